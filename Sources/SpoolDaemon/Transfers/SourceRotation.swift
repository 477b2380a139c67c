import SpoolTransfer

/// Which of an item's sources (its `url`, then its `mirror:`s) a transfer asks, and the next one
/// after a failure that retrying cannot fix or a long outage. Pure.
///
/// A round tries the sources in order of preference; each that failed in the round is skipped.
/// Once every source has failed once, the round starts again at the first source.
struct SourceRotation: Equatable {
    /// How many sources the item has (1 + mirrors).
    let count: Int
    private(set) var current = 0
    /// Sources that failed in this round, one bit each.
    private(set) var failed: UInt64 = 0

    init(count: Int) { self.count = max(1, min(count, 64)) }

    /// Whether another source has not failed in this round yet.
    var hasNext: Bool { next != nil }

    private var next: Int? {
        let failedNow = failed | (1 << UInt64(current))
        return (0..<count).first { failedNow & (1 << UInt64($0)) == 0 }
    }

    /// The current source failed: moves to the next one not failed in this round and returns it;
    /// nil when all have failed once (the round starts again at the first source).
    mutating func moveOn() -> Int? {
        failed |= 1 << UInt64(current)
        guard let n = next else {
            failed = 0
            current = 0
            return nil
        }
        current = n
        return n
    }
}

extension TransferFailure {
    /// A failure of this source that retrying it cannot fix, so a mirror is worth asking: 404,
    /// 410, a name that does not resolve, a certificate that does not verify, an address the
    /// egress policy denies.
    var movesToNextSource: Bool {
        switch self {
        case .httpStatus(let status): return status == 404 || status == 410
        case .curl(let code, _): return [6, 60, 83, 90, 91].contains(code)
        // A denied address (a mirror inside a denied network): the next source may be allowed.
        case .addressDenied: return true
        default: return false
        }
    }
}
