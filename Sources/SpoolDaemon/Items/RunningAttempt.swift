import Foundation
import SpoolStore

/// What one running phase holds: the daemon's payload of the item machine's
/// `running(part:)` (its `Part`). The staging file the transfer writes (for an upload, the
/// descriptor its file is sent from instead), the existing file's marker a conditional request
/// was asked on, and the byte counts its rate is measured from. It ends with the phase: a new
/// attempt gets a new one, so nothing is reset by hand, and a waiting item holds none.
final class RunningAttempt {
    /// The part, open (its descriptor closes when the last holder lets it go).
    let file: StagingFile?
    /// `on-exists: skip-unchanged`: the existing file's marker whose validators the transfer
    /// sent (`If-None-Match`/`If-Modified-Since`); a 304 ends the item with that file.
    private(set) var previousMarker: ItemMarker?
    /// Byte counts at recent status reports, for the rate and ETA.
    private var rateWindow = RateWindow()
    /// An upload's: the descriptor its file is sent from, and the file's SHA-256 computed beside
    /// the transfer (from its own duplicate). Closed when the transfer ends or is stopped; at
    /// the latest when the phase lets the attempt go.
    private(set) var upload: (fd: Int32, digest: OutgoingDigest)?

    init(file: StagingFile?) { self.file = file }

    /// An upload's attempt, sending from `fd`.
    init(sending fd: Int32, digest: OutgoingDigest) {
        file = nil
        upload = (fd, digest)
    }

    /// A download's attempt has no upload to close (asked here, not by a call per attempt).
    deinit { if upload != nil { closeUpload() } }

    /// Closes the upload's file (its transfer ended or was stopped); does nothing when closed.
    func closeUpload() {
        guard let upload else { return }
        close(upload.fd)
        self.upload = nil
    }

    /// The transfer starts asking conditionally on `previous` (nil: it does not).
    func askedConditionally(on previous: ItemMarker?) { previousMarker = previous }

    /// A status report saw `bytes` of `total` at `now`: the rate over the recent reports, and
    /// the seconds left at that rate.
    func progress(bytes: Int64, total: Int64?, at now: Date) -> (rate: Double?, eta: Double?) {
        rateWindow.add(bytes: bytes, at: now)
        return (rateWindow.rate, rateWindow.eta(total: total, bytes: bytes))
    }
}
