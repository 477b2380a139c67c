import Crypto
import Foundation

/// Who a file in `outgoing/` is: enough of its `stat` to notice any change between two looks.
/// `ctime` moves on every write, truncation, rename-over or `utimensat`, and no caller can set
/// it back, so a file whose identity is unchanged holds the bytes it held.
public struct OutgoingIdentity: Sendable, Hashable {
    public let device: UInt64
    public let inode: UInt64
    public let size: Int64
    public let modifiedNanoseconds: Int64
    public let changedNanoseconds: Int64

    init(_ st: stat) {
        device = UInt64(st.st_dev)
        inode = UInt64(st.st_ino)
        size = Int64(st.st_size)
        modifiedNanoseconds = Int64(st.st_mtim.tv_sec) * 1_000_000_000 + Int64(st.st_mtim.tv_nsec)
        changedNanoseconds = Int64(st.st_ctim.tv_sec) * 1_000_000_000 + Int64(st.st_ctim.tv_nsec)
    }
}

/// Why a name in `outgoing/` cannot be sent: a stable rule and a reason for the producer.
public struct OutgoingRefusal: Error, Sendable, Hashable {
    public let rule: String
    public let reason: String

    public init(rule: String, reason: String) {
        self.rule = rule
        self.reason = reason
    }
}

extension SpoolStore {
    /// Opens `outgoing/NAME` for reading as an upload's body: never through a symlink
    /// (`O_NOFOLLOW`), never blocking on a FIFO (`O_NONBLOCK`), and only a regular file with one
    /// link (a hard link made to a file elsewhere, such as `/etc/shadow`, is refused too).
    /// The name itself was checked by `UploadName` (no `/`), so the open cannot leave the folder.
    /// Returns the descriptor (the caller closes it) and the file's identity.
    ///
    /// `owner`: the request's owner. The file is sent only if that user could read it by its
    /// mode, owner and groups, as the kernel would decide (`SpoolAccounts.mayRead`), else
    /// `upload-not-permitted` — whatever the daemon itself may read (it may run as root). Why
    /// a check of the mode and not an open with the owner's credentials: the daemon usually runs
    /// as its own unprivileged user, which cannot take another user's credentials, and a
    /// per-thread `setfsuid` would need root and a helper thread around every open. The check is
    /// made on the descriptor that is then sent from, so it holds for the bytes sent. POSIX ACLs
    /// are not consulted (the mode's group bits are their mask): an ACL can only be stricter here.
    public func openOutgoing(_ name: String, owner: uid_t? = nil) throws(OutgoingRefusal) -> (fd: Int32, identity: OutgoingIdentity) {
        let fd = openat(layout.outgoing.fd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC)
        guard fd >= 0 else {
            let e = errno
            switch e {
            case ENOENT: throw OutgoingRefusal(rule: "upload-missing", reason: "outgoing/\(name) does not exist")
            case ELOOP: throw OutgoingRefusal(rule: "upload-not-regular", reason: "outgoing/\(name) is a symlink; only regular files are sent")
            default: throw OutgoingRefusal(rule: "upload-unreadable", reason: "outgoing/\(name) cannot be opened: \(String(cString: strerror(e))) (errno \(e))")
            }
        }
        var st = stat()
        guard fstat(fd, &st) == 0 else {
            let e = errno
            close(fd)
            throw OutgoingRefusal(rule: "upload-unreadable", reason: "outgoing/\(name): fstat: \(String(cString: strerror(e))) (errno \(e))")
        }
        let kind = st.st_mode & S_IFMT
        guard kind == S_IFREG else {
            close(fd)
            let what = kind == S_IFDIR ? "a directory" : kind == S_IFIFO ? "a FIFO" : kind == S_IFSOCK ? "a socket"
                : kind == S_IFCHR || kind == S_IFBLK ? "a device" : "not a regular file"
            throw OutgoingRefusal(rule: "upload-not-regular", reason: "outgoing/\(name) is \(what); only regular files are sent")
        }
        guard st.st_nlink == 1 else {
            close(fd)
            throw OutgoingRefusal(rule: "upload-not-regular",
                                  reason: "outgoing/\(name) has \(st.st_nlink) hard links; only a file written into outgoing/ (one link) is sent")
        }
        if let owner, !SpoolAccounts.mayRead(st, uid: owner, groups: SpoolAccounts.groups(of: owner)) {
            close(fd)
            throw OutgoingRefusal(rule: "upload-not-permitted",
                                  reason: "outgoing/\(name) belongs to \(SpoolAccounts.userName(st.st_uid)):\(SpoolAccounts.groupName(st.st_gid)) "
                                      + "with mode \(SpoolAccounts.modeText(st.st_mode)), which the request's owner "
                                      + "\(SpoolAccounts.userName(owner)) may not read; nothing was sent")
        }
        // Reads must block normally from here on (a regular file never blocks anyway).
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK)
        return (fd, OutgoingIdentity(st))
    }

    /// The identity of `outgoing/NAME` by the rules of `openOutgoing`, without keeping it open.
    public func checkOutgoing(_ name: String) throws(OutgoingRefusal) -> OutgoingIdentity {
        let (fd, identity) = try openOutgoing(name)
        close(fd)
        return identity
    }

    /// The identity of the file open as `fd` now (after a transfer read it).
    public static func identity(of fd: Int32) -> OutgoingIdentity? {
        var st = stat()
        return fstat(fd, &st) == 0 ? OutgoingIdentity(st) : nil
    }
}

/// `final/NAME.uploaded`: what an upload sent and what the server answered. Its presence means
/// the server accepted the whole file (a 2xx); `request`, `index` and `requestInode` say which
/// claim sent it, so a restart knows its own record from an earlier upload of the same name.
public struct UploadRecord: Codable, Sendable, Hashable {
    public var request: String
    public var group: String
    public var index: Int
    public var requestInode: UInt64
    public var name: String
    /// Without its query unless the daemon keeps queries (a signed URL is a secret).
    public var url: String
    public var method: String
    public var contentType: String
    public var bytes: Int64
    public var sha256: String
    public var httpStatus: Int
    public var etag: String?
    public var location: String?
    /// `NAME.response` beside it: the response body's first 64 KiB, when it had one.
    public var response: String?
    public var startedAt: String
    public var finishedAt: String
    public var attempts: Int
    public var outageSeconds: Int?
    /// The request's owner and uid (see `ItemMarker.owner`).
    public var owner: String?
    public var ownerUID: Int?

    public init(request: String, group: String, index: Int, requestInode: UInt64, name: String, url: String,
                method: String, contentType: String, bytes: Int64, sha256: String, httpStatus: Int, etag: String?,
                location: String?, startedAt: String, finishedAt: String, attempts: Int, outageSeconds: Int?) {
        self.request = request; self.group = group; self.index = index; self.requestInode = requestInode
        self.name = name; self.url = url; self.method = method; self.contentType = contentType
        self.bytes = bytes; self.sha256 = sha256; self.httpStatus = httpStatus; self.etag = etag
        self.location = location; self.startedAt = startedAt; self.finishedAt = finishedAt
        self.attempts = attempts; self.outageSeconds = outageSeconds
    }
}

extension SpoolStore {
    /// Writes a batch of uploads' results in the final folder — for each, `NAME.response` (when
    /// the server sent a body), then `NAME.uploaded`, each synced and renamed over an earlier one
    /// — syncs the folder once, and then moves each `outgoing/NAME` into `done/` (a `-N` suffix if
    /// the name is taken there), syncing both folders once. A record is the commit point: once it
    /// is durable its file is never sent again. Per upload: the record's path, or why it failed.
    public func recordUploads(_ batch: [(record: UploadRecord, response: [UInt8]?)]) -> [Result<String, StoreError>] {
        let final = layout.final
        var results: [Result<String, StoreError>] = []
        for (record, response) in batch {
            var record = record
            do throws(StoreError) {
                // Fencing: no record for a request another worker has taken over.
                try confirmHeld(record.request)
                if let response {
                    try final.writeAtomically(record.name + ".response", response, replace: true, sync: true)
                    record.response = record.name + ".response"
                } else {
                    final.remove(record.name + ".response")
                }
                try final.writeAtomically(record.name + ".uploaded", SpoolJSON.encode(record), replace: true, sync: true)
                results.append(.success(final.path(of: record.name + ".uploaded")))
            } catch {
                results.append(.failure(error))
            }
        }
        do throws(StoreError) { try final.sync() } catch {
            return results.map { _ in .failure(error) }
        }
        // The files move only once their records are durable; a move a crash loses leaves the
        // file in outgoing/ beside its record (an adopted request moves it then).
        for ((record, _), result) in zip(batch, results) {
            guard case .success = result, layout.outgoing.exists(record.name) else { continue }
            _ = try? file(record.name, from: layout.outgoing, into: layout.done, record: nil, sync: false)
        }
        try? layout.done.sync()
        try? layout.outgoing.sync()
        return results
    }

    /// Moves `outgoing/NAME` into `done/` (sent) or `failed/` (its item failed), with a `-N`
    /// suffix when the name is taken; nil when it is no longer in `outgoing/`.
    @discardableResult
    public func moveOutgoing(_ name: String, failed: Bool) throws(StoreError) -> String? {
        guard layout.outgoing.exists(name) else { return nil }
        return try file(name, from: layout.outgoing, into: failed ? layout.failed : layout.done, record: nil)
    }

    /// The upload record `final/NAME.uploaded` when it is the one `request` (the claim with
    /// `inode`) wrote for item `index`; nil otherwise.
    public func uploadRecord(_ name: String, request: String, inode: UInt64, index: Int) -> UploadRecord? {
        guard let bytes = try? layout.final.read(name + ".uploaded", limit: 1 << 20),
              let record = SpoolJSON.decode(UploadRecord.self, bytes),
              record.request == request, record.requestInode == inode, record.index == index else { return nil }
        return record
    }
}

/// The SHA-256 of an upload's file, computed on a thread of the system's beside its transfer, so
/// the engine's thread only sends. It reads its own duplicate of the descriptor the transfer
/// sends from; the caller checks the file's identity before and after the transfer, so the bytes
/// hashed are the bytes sent.
public final class OutgoingDigest: @unchecked Sendable {
    private let done = NSCondition()
    private var digest: String??

    public init(fd: Int32, size: Int64) {
        let own = dup(fd)
        guard own >= 0 else { digest = .some(nil); return }
        DispatchQueue.global(qos: .userInitiated).async { [self] in
            let result = Self.hash(own, size: size)
            close(own)
            done.lock()
            digest = .some(result)
            done.broadcast()
            done.unlock()
        }
    }

    /// The hex digest once computed; nil when the file could not be read whole (`size` bytes).
    public func wait() -> String? {
        done.lock()
        defer { done.unlock() }
        while digest == nil { done.wait() }
        return digest!
    }

    static func hash(_ fd: Int32, size: Int64) -> String? {
        var sha = SHA256()
        var buffer = [UInt8](repeating: 0, count: 256 << 10)
        var offset: Int64 = 0
        while offset < size {
            let wanted = Int(min(Int64(buffer.count), size - offset))
            let got = buffer.withUnsafeMutableBytes { pread(fd, $0.baseAddress, wanted, off_t(offset)) }
            guard got > 0 else { return nil }
            buffer.withUnsafeBytes { sha.update(bufferPointer: UnsafeRawBufferPointer(rebasing: $0[0..<got])) }
            offset += Int64(got)
        }
        return sha.finalize().map { String(format: "%02x", $0) }.joined()
    }
}
