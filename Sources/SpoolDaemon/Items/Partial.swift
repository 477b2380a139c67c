import Foundation
import SpoolCore
import SpoolTransfer

/// What an item's staging part holds, as far as a resume may build on it: its length, the
/// running hash of those bytes, the validators of the response they came from (the next
/// `If-Range`), and a segmented part's ranges kept by a recovery. Every change is one of the
/// named steps below, so the four facts cannot drift apart: bytes without their hash, or a
/// hash of another response's bytes.
struct Partial {
    /// Bytes in the part that a resume may build on (the in-order prefix).
    private(set) var bytes: Int64 = 0
    /// The hash of those bytes; nil when it must be computed again (after a restart).
    private(set) var hash: HashState?
    /// ETag (preferred) or Last-Modified of the response the bytes came from.
    private(set) var etag: String?
    private(set) var lastModified: String?
    /// A segmented part's ranges kept by a recovery in this boot (`ItemState.ranges`), for the
    /// next start only.
    private(set) var keptRanges: [[Int64]]?

    /// Nothing kept and nothing to resume with.
    var isEmpty: Bool { bytes == 0 && hash == nil && etag == nil && lastModified == nil && keptRanges == nil }

    /// Forgets the bytes and their validators: the next attempt starts from byte 0.
    mutating func discard() {
        bytes = 0
        hash = nil
        keptRanges = nil
        etag = nil
        lastModified = nil
    }

    /// The part is empty again (a fresh file, or cut to 0); the validators stay until a response
    /// names new ones.
    mutating func emptied() {
        bytes = 0
        hash = nil
        keptRanges = nil
    }

    /// The hash of the kept bytes, computed again before a resume.
    mutating func rehashed(_ hash: HashState) { self.hash = hash }

    /// The kept ranges have gone into the transfer that starts now.
    mutating func rangesTaken() { keptRanges = nil }

    /// A segmented transfer stopped without breaking a promise (`TransferOutcome.keptRanges`):
    /// its ranges past the prefix stay in the part for the next start.
    mutating func keptRanges(_ ranges: [[Int64]]) { keptRanges = ranges }

    /// A response began: its validators are the part's from now on; `restartedFromZero`: the
    /// server sent the whole body again, so the bytes start over.
    mutating func bodyBegan(etag: String?, lastModified: String?, restartedFromZero: Bool) {
        if restartedFromZero { bytes = 0 }
        self.etag = etag
        self.lastModified = lastModified
    }

    /// A transfer ended (or was stopped) with `bytes` in order in the part, hashed as `hash`.
    /// `validators`: the response's, when its body went into the part (a 200 or 206): an error
    /// page's or a 416's must not become the next resume's If-Range.
    mutating func kept(bytes: Int64, hash: HashState?, validators: (etag: String?, lastModified: String?)?) {
        self.bytes = bytes
        self.hash = hash
        if let validators, validators.etag != nil || validators.lastModified != nil {
            etag = validators.etag
            lastModified = validators.lastModified
        }
    }

    /// What a recovery found usable: `bytes` to resume from with these validators (the hash is
    /// computed again before the transfer starts), and a segmented part's ranges.
    mutating func recovered(bytes: Int64, etag: String?, lastModified: String?, ranges: [[Int64]]?) {
        self.bytes = bytes
        hash = nil
        self.etag = etag
        self.lastModified = lastModified
        keptRanges = ranges
    }

    /// A recovered part whose data is whole and verified, `bytes` long, on its way to the publisher.
    mutating func recoveredWhole(bytes: Int64) { self.bytes = bytes }

    /// The item moves to another source: bytes are kept only under a strong ETag, which
    /// `If-Range` then checks at the new server; a date says nothing across servers.
    mutating func movedToAnotherSource() {
        let strongETag = etag.map { !$0.hasPrefix("W/") } ?? false
        if bytes > 0 && !strongETag { discard() }
        lastModified = nil
    }

    /// An upload counts the bytes the server accepted (none until it accepted them all).
    mutating func sent(_ bytes: Int64) { self.bytes = bytes }
}
