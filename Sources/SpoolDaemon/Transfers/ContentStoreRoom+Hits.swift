import Foundation
import SpoolCore
import SpoolRequest
import SpoolStore

/// A content-store hit (`ContentStoreRoom`): the entry's bytes are read on the store's copy
/// thread — a reflink or copy into a fresh part then read back, or the entry itself under
/// `store-link = hardlink` — and hashed (`ContentStore.fill`, `hashEntry`); the item takes the
/// body with the digest computed from those bytes, never the entry's name. An entry whose bytes
/// do not hash to its name is removed, logged with both digests, and the item decides again as
/// if there had been no entry (it fetches from its sources, or waits for a fetch of the digest).
extension ContentStoreRoom {
    /// What the copy thread found for item `key`'s hit (`EngineMessage.storeCopied`).
    struct HitRead: Sendable {
        /// The bytes to publish and their computed SHA-256; nil when they could not be read (`error`).
        let body: ContentStore.HitBody?
        /// The entry's path, for the log line of a mismatch.
        let entryPath: String
        /// The rotten entry is no longer under its name (removed now, or gone already).
        let rottenGone: Bool
        let error: StoreError?
    }

    /// Starts a hit: opens the entry (false when it is gone — evicted between the look and now —
    /// or the part cannot be made: the caller decides again or fetches) and hands the reading and
    /// hashing to the copy thread, which answers with `storeCopied`; the item stays running meanwhile.
    func publishFromStore(_ record: ItemRecord, digest: String, send: (ItemEvent) -> Void,
                          openPart: () throws(StoreError) -> StagingFile, credentials: [RequestHeader] = []) -> Bool {
        record.noteStarted(at: Date())
        let store = self.store, post = self.post, key = record.key
        let part: StagingFile, inode: UInt64, path = store.entryPath(digest)
        let read: @Sendable () throws(StoreError) -> ContentStore.HitBody
        do {
            if hardlink {
                // The published file is the entry: it is hashed, and handed to the item only if it matches.
                guard let entry = try store.openAsPart(digest, base: record.base) else { return false }
                part = entry
                inode = entry.inode
                read = { () throws(StoreError) in try store.hashEntry(entry.fd, digest: digest) }
            } else {
                guard let entry = try store.openEntry(digest) else { return false }
                part = try openPart()
                inode = entry.inode
                send(.partOpened(RunningAttempt(file: part)))
                read = { () throws(StoreError) in try store.fill(entry, into: part.fd, outPath: "staging/\(part.base).part") }
            }
        } catch {
            logger.warning("could not publish from the store; fetching instead: \(error)", metadata: ["item": "\(record.id)"])
            return false
        }
        inUse[digest, default: 0] += 1
        copying[key] = Copying(digest: digest, part: part, handedOver: !hardlink, credentials: credentials)
        copyQueue.async {
            do throws(StoreError) {
                let body = try read()
                // Removed at once, on the copy thread: a later hit of the digest finds it gone.
                let gone = body.sha256 != digest ? store.removeRotten(digest, inode: inode) : false
                post(.storeCopied(key: key, digest: digest, read: HitRead(body: body, entryPath: path, rottenGone: gone, error: nil)))
            } catch {
                post(.storeCopied(key: key, digest: digest, read: HitRead(body: nil, entryPath: path, rottenGone: false, error: error)))
            }
        }
        return true
    }

    /// What the item does once its hit was read: nil when it goes on with the body (or left its
    /// running phase meanwhile: stopped, paused, cancelled, `forget`); else the credentials it
    /// decides again with, as if the store had no entry: the rotten entry is removed, and one that
    /// could not be removed or read is `distrusted` (its items fetch instead of reading it again).
    func copied(_ record: ItemRecord?, key: Int, digest: String, read: HitRead,
                send: (ItemEvent) -> Void) -> [RequestHeader]? {
        guard let copy = copying.removeValue(forKey: key) else { return nil }
        release(digest)
        guard let record, record.phase == .running, !copy.handedOver || record.part === copy.part else { return nil }
        guard let body = read.body else {
            logger.warning("could not publish from the store; fetching instead: \(read.error.map { "\($0)" } ?? "the entry is unreadable")",
                           metadata: ["item": "\(record.id)", "path": "\(read.entryPath)"])
            distrusted.insert(digest)
            return copy.credentials
        }
        guard body.sha256 == digest else {
            logger.error("store entry does not match its name; \(read.rottenGone ? "removed" : "could not remove it"), fetching from the sources",
                         metadata: ["item": "\(record.id)", "expected": "\(digest)", "actual": "\(body.sha256)",
                                    "bytes": "\(body.bytes)", "path": "\(read.entryPath)"])
            if !read.rottenGone { distrusted.insert(digest) }
            return copy.credentials
        }
        finish(record, digest: body.sha256, part: copy.part, bytes: body.bytes, how: body.method?.rawValue ?? "hardlink", send: send)
        return nil
    }

    /// The body is in the part and hashes to `digest`: the item takes it as a complete transfer
    /// whose digest is that computed one (the item's machine compares it with its `sha256:` again).
    private func finish(_ record: ItemRecord, digest: String, part: StagingFile, bytes: Int64, how: String,
                        send: (ItemEvent) -> Void) {
        counted(record, bytes: bytes)
        if record.part !== part { send(.partOpened(RunningAttempt(file: part))) }
        record.partFilled(bytes: bytes)
        logger.debug("published from the store", metadata: ["item": "\(record.id)", "sha256": "\(digest)",
                                                             "bytes": "\(bytes)", "copy": "\(how)"])
        let wanted = record.loaded.flatMap(Self.digest(of:))
        send(.transferEnded(TransferEnd(fault: nil, sha256: digest, hasPartial: true, wantedSHA256: wanted)))
    }

    func release(_ digest: String) {
        inUse[digest, default: 1] -= 1
        if inUse[digest] == 0 { inUse[digest] = nil }
    }

    private func counted(_ record: ItemRecord, bytes: Int64) {
        metrics.storeHit(bytes: bytes)
        if counters.hit(bytes: bytes) { executor.scheduleCheck(Date().addingTimeInterval(1)) }
        executor.hitServed(record.key)
    }
}
