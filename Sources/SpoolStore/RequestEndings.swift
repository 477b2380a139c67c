import Foundation
import SpoolRequest

/// How many of a request's items ended the same way (same `code` and `message`): one entry of the
/// `endings` of `R.error` and of the group marker when the request has too many failed items to
/// list them there (`SpoolStore.listedFailuresLimit`).
public struct EndingCount: Codable, Sendable, Hashable {
    public var code: String
    public var message: String
    public var count: Int

    public init(code: String, message: String, count: Int) {
        self.code = code; self.message = message; self.count = count
    }
}

extension EndingCount {
    /// `failures` counted by code and message, the most common first.
    public static func counting(_ failures: some Sequence<ItemFailure>) -> [EndingCount] {
        counting(failures.lazy.map { ($0.code, $0.message, 1) })
    }

    /// (code, message, count) triples added up by code and message, the most common first.
    public static func counting(_ counted: some Sequence<(String, String, Int)>) -> [EndingCount] {
        var counts: [String: [String: Int]] = [:]
        for (code, message, n) in counted { counts[code, default: [:]][message, default: 0] += n }
        return counts.flatMap { code, messages in messages.map { EndingCount(code: code, message: $0.key, count: $0.value) } }
            .sorted { $0.count != $1.count ? $0.count > $1.count : ($0.code, $0.message) < ($1.code, $1.message) }
    }
}

/// `staging/B.INODE.cancelled`: the operator cancelled the whole request at `cancelledAt`.
///
/// Why: cancelling a request of 200,000 waiting items must answer within a second, so its items
/// that never started get no state file each. This one record, written and synced before the
/// cancel is answered, stands for them all: a daemon that adopts the request after a crash,
/// before its group ended, ends every item it would have queued as `cancelled` instead of
/// fetching it. It goes with the group end (and with the staging of ended groups at start).
public struct RequestCancelRecord: Codable, Sendable, Hashable {
    public var request: String
    public var inode: UInt64
    public var cancelledAt: String
    /// Who asked (a user name, or a uid as text).
    public var caller: String

    public init(request: String, inode: UInt64, cancelledAt: String, caller: String) {
        self.request = request; self.inode = inode; self.cancelledAt = cancelledAt; self.caller = caller
    }
}

extension SpoolStore {
    /// More failed items than this and `R.error` and the group marker count them by ending
    /// (`endings`) and name a file that lists them one JSON object a line (`itemsFile`) instead
    /// of listing them: both records stay a few kilobytes whatever the request's size.
    public static let listedFailuresLimit = 1000

    /// The items file beside a record named `name` (`R.error`, `G.group.done`).
    public static func itemsFileName(of name: String) -> String { name + ".items.jsonl" }

    private static func cancelRecordName(_ claim: ClaimedRequest) -> String {
        stagingBase(claim.name) + ".\(claim.inode).cancelled"
    }

    /// Writes the request's cancel record and makes it durable (file and folder synced): when
    /// this returns, a crash cannot bring the request's waiting items back.
    public func recordCancel(_ claim: ClaimedRequest, at date: Date, caller: String) throws(StoreError) {
        let record = RequestCancelRecord(request: claim.name, inode: claim.inode, cancelledAt: RFC3339.format(date), caller: caller)
        try layout.staging.writeAtomically(Self.cancelRecordName(claim), SpoolJSON.encode(record), sync: true)
        try layout.staging.sync()
    }

    /// The request's cancel record, if the operator cancelled it (the same name and inode).
    public func cancelRecord(of claim: ClaimedRequest) -> RequestCancelRecord? {
        guard let bytes = try? layout.staging.read(Self.cancelRecordName(claim)),
              let record = SpoolJSON.decode(RequestCancelRecord.self, bytes),
              record.request == claim.name, record.inode == claim.inode else { return nil }
        return record
    }

    /// The group ended: its cancel record has done its work.
    public func removeCancelRecord(of claim: ClaimedRequest) {
        layout.staging.remove(Self.cancelRecordName(claim))
    }
}

/// Writes a record's items file: one JSON object a line, streamed through a fixed buffer into a
/// temporary file that takes its name once synced. A consumer reads it a line at a time.
public final class ItemLinesWriter {
    private let directory: Directory
    private let name: String
    private let temp: String
    private var fd: Int32
    private var buffer: [UInt8] = []
    public private(set) var lines = 0

    init(_ directory: Directory, _ name: String) throws(StoreError) {
        self.directory = directory
        self.name = name
        temp = ".\(name).tmp"
        fd = try directory.createFresh(temp)
        buffer.reserveCapacity(Self.chunk)
    }

    deinit { abandon() }

    private static let chunk = 256 << 10

    /// Appends one line (`json` without its newline).
    public func append(_ json: [UInt8]) throws(StoreError) {
        buffer.append(contentsOf: json)
        buffer.append(0x0A)
        lines += 1
        if buffer.count >= Self.chunk { try flush() }
    }

    private func flush() throws(StoreError) {
        guard !buffer.isEmpty else { return }
        try FileIO.writeAll(fd, buffer, path: directory.path(of: temp))
        buffer.removeAll(keepingCapacity: true)
    }

    /// Synced and renamed to its name (replacing a retried end's earlier one).
    func finish() throws(StoreError) {
        do throws(StoreError) {
            try flush()
            if fdatasync(fd) != 0 { throw StoreError("fdatasync", directory.path(of: temp)) }
            try directory.rename(temp, to: name, in: directory, replace: true)
            close(fd)
            fd = -1
        } catch {
            abandon()
            throw error
        }
    }

    /// Not finished: the temporary file goes.
    func abandon() {
        guard fd >= 0 else { return }
        close(fd)
        fd = -1
        _ = unlinkat(directory.fd, temp, 0)
    }

    /// Copies the finished file `name` of `source` to `target` under `targetName` (synced),
    /// in fixed chunks.
    static func copy(_ name: String, from source: Directory, to target: Directory, as targetName: String) throws(StoreError) {
        let input = openat(source.fd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
        guard input >= 0 else { throw StoreError("open", source.path(of: name)) }
        defer { close(input) }
        let writer = try ItemLinesWriter(target, targetName)
        var chunk = [UInt8](repeating: 0, count: Self.chunk)
        while true {
            let n = chunk.withUnsafeMutableBytes { Glibc.read(input, $0.baseAddress, $0.count) }
            if n < 0 {
                if errno == EINTR { continue }
                throw StoreError("read", source.path(of: name))
            }
            if n == 0 { break }
            writer.buffer.append(contentsOf: chunk[0..<n])
            if writer.buffer.count >= Self.chunk { try writer.flush() }
        }
        try writer.finish()
    }
}

/// The lines of a request's failed items, for `SpoolStore.endGroup`: called with a writer to
/// append each item's `ItemFailure` JSON to, in index order.
public typealias FailedItemLines = @Sendable (ItemLinesWriter) throws(StoreError) -> Void
