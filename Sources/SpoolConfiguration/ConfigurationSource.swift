import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Where a configuration comes from: the defaults, then the config file, then `$SPOOLFETCH_SPOOL`
/// (for the spool), then the flags. Kept by the daemon so that `SIGHUP` can read the file again
/// and put the same flags on top: a flag given at start keeps winning over the file.
public struct ConfigurationSource: Sendable, Hashable, Codable {
    /// `--config FILE`, if given.
    public var configFile: String?
    /// Flag values by key (`"concurrency": "8"`), as typed.
    public var flags: [String: String]
    /// `$SPOOLFETCH_SPOOL`, if set and not empty.
    public var environmentSpool: String?
    public var once: Bool
    public var due: Bool

    public init(configFile: String? = nil, flags: [String: String] = [:], environmentSpool: String? = nil,
                once: Bool = false, due: Bool = false) {
        self.configFile = configFile
        self.flags = flags
        self.environmentSpool = environmentSpool
        self.once = once
        self.due = due
    }

    /// Which layer a problem was found in: the executable exits 64 for a malformed flag and 3
    /// for anything else (a file that cannot be read or holds a bad value, keys that disagree).
    public enum Failure: Error, Sendable, CustomStringConvertible {
        /// A flag's value is malformed; the message starts with `--KEY`.
        case flag(ConfigurationError)
        /// The file, or the combination, is not usable.
        case configuration(ConfigurationError)

        public var description: String {
            switch self {
            case .flag(let e), .configuration(let e): return e.description
            }
        }
    }

    /// The configuration these layers give, validated.
    public func load() throws(Failure) -> DaemonConfiguration {
        var c = DaemonConfiguration()
        if let configFile {
            let text: String
            do throws(ConfigurationError) { text = try Self.read(configFile) } catch { throw .configuration(error) }
            do throws(ConfigurationError) { try c.apply(configFile: text, path: configFile) } catch { throw .configuration(error) }
        }
        if let environmentSpool { c.spool = environmentSpool }
        // In table order, so that the first malformed flag reported is the same every time.
        for key in ConfigurationKey.all {
            guard let value = flags[key.name] else { continue }
            do throws(ConfigurationError) { try key.set(value, in: &c) } catch { throw .flag(.init("--\(error.description)")) }
        }
        if let unknown = flags.keys.first(where: { ConfigurationKey.named($0) == nil }) {
            throw .flag(.init("--\(unknown) is not a setting"))
        }
        c.once = once
        c.due = due
        c.source = self
        do throws(ConfigurationError) { try c.validate() } catch { throw .configuration(error) }
        return c
    }

    /// The file's text, or why it cannot be had (missing, a folder, no permission, not UTF-8).
    static func read(_ path: String) throws(ConfigurationError) -> String {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else {
            let code = errno
            throw .init("cannot read the config file \(path): \(String(cString: strerror(code))) (errno \(code))")
        }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let n = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if n < 0 {
                let code = errno
                if code == EINTR { continue }
                throw .init("cannot read the config file \(path): \(String(cString: strerror(code))) (errno \(code))")
            }
            if n == 0 { break }
            bytes += buffer[0..<n]
            if bytes.count > 1 << 20 { throw .init("the config file \(path) is larger than 1 MiB; is it the right file?") }
        }
        guard let text = String(validating: bytes, as: UTF8.self) else {
            throw .init("the config file \(path) is not UTF-8 text")
        }
        return text
    }
}
