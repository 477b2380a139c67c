import Foundation
import SpoolStore

/// Which content store `spoolfetch store` reads, and why that one. Without `--store` it used to
/// read `SPOOL/store`, made empty if missing, while the daemon used another folder: the answer was
/// "0 entries" and said nothing of the choice. The store is now the one given (`--store`, or the
/// `store` of `--config FILE`), else the one the running daemon reports using, else the one the
/// last drain's record names, else `SPOOL/store`; `source` says which, in words.
public struct StoreLocation: Codable, Sendable, Hashable {
    public let path: String
    public let source: String

    public init(path: String, source: String) {
        self.path = path
        self.source = source
    }

    /// `flag`: `--store DIR`; `configured`: the store a `--config FILE` names (nil path: it turns
    /// the store off), read by the caller, which knows the configuration's rules.
    public static func find(spool: String, flag: String?, configured: (path: String?, file: String)?) -> StoreLocation {
        if let flag { return StoreLocation(path: absolute(flag), source: "--store") }
        if let configured, let path = configured.path {
            return StoreLocation(path: absolute(path), source: "store in --config \(configured.file)")
        }
        let overview = try? SpoolOverview.read(spool: spool)
        let using = (overview?.reports ?? []).filter { $0.daemon.store != nil }
        if let daemon = using.first?.daemon, let path = daemon.store {
            let others = Set(using.compactMap(\.daemon.store)).subtracting([path])
            return StoreLocation(path: path, source: "the running daemon (pid \(daemon.pid) on \(daemon.host)) uses it"
                                 + (others.isEmpty ? "" : "; other daemons on this spool use \(others.sorted().joined(separator: ", "))"))
        }
        let running = overview?.reports.first?.daemon
        if running == nil, let drain = (overview?.lastDrains ?? []).first(where: { $0.store != nil }), let path = drain.store {
            return StoreLocation(path: path, source: "the last drain (pid \(drain.pid) on \(drain.host), ended \(drain.endedAt)) used it")
        }
        let why = running.map { "the running daemon (pid \($0.pid)) uses no store" }
            ?? "no daemon runs, and no drain's record names a store"
        return StoreLocation(path: spool + "/store", source: "the default, SPOOL/store: \(why); --store or --config names another")
    }

    private static func absolute(_ path: String) -> String {
        path.hasPrefix("/") ? path : FileManager.default.currentDirectoryPath + "/" + path
    }
}
