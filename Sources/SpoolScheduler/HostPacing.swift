import Foundation

/// A host that limits its clients' request rate (429 Too Many Requests, 503 Service
/// Unavailable, or the IETF `RateLimit` / `RateLimit-Policy` headers): its requests are spaced to
/// a rate the server accepts, found by additive increase and multiplicative decrease (AIMD, as
/// TCP finds a path's rate), and while it is paced its refused items spend no attempt.
///
/// Why not just retry with back-off: a batch against a server allowing 40 requests a second would
/// otherwise burn attempts on every burst and fail items that the server would gladly serve a
/// second later; each item backing off on its own also keeps the host's rate far below what it
/// allows. Paced, the host's items start one every `1 / rate` seconds, and the rate follows the
/// server: it grows while requests are answered and halves on a refusal.
///
/// The rules, each with a unit test (`HostPacingTests`):
/// - **Start.** The first refusal paces the host at half the rate it was started at over the last
///   second (at least `minimumRate`), in slow start: each answer then adds two requests a second
///   (the rate grows e-fold every half second) until the next refusal.
/// - **Decrease.** A refusal multiplies the rate by `decrease` (not below `minimumRate`), at most
///   once per `decreaseSpacing` (the refusals of requests already in flight say nothing new), and
///   ends slow start.
/// - **Increase.** Past slow start, each answer adds one request a second while the rate is below
///   `recover` × the rate of the last refusal (back quickly to what was nearly accepted), then
///   `increase / rate`: `increase` more a second per second, probing gently. A server allowing 40
///   a second whose limit has no burst refuses now and then below it too (requests started 25 ms
///   apart may arrive closer): the rate settles just under where it refuses.
/// - **Retry-After.** Nothing starts before it (a hold, besides the rate).
/// - **RateLimit headers.** `remaining` 0 holds the host until `reset`; a policy of `quota` per
///   `window` caps the rate at `quota / window` (and paces the host at it).
/// - **Free refusals.** A refused item spends no attempt while the host answered (or began being
///   paced) within `freeRefusalsFor`: a server that only ever refuses is down, not busy, and its
///   items fail after their attempts as before.
/// - **End.** A host with no refusal for `calmAfter` and no policy is no longer paced.
public struct HostPace: Sendable, Hashable {
    public static let minimumRate = 0.2
    public static let decreaseSpacing = 1.0
    public static let freeRefusalsFor = 600.0
    public static let calmAfter = 60.0
    public static let decrease = 0.75
    public static let increase = 2.0
    public static let recover = 0.9

    /// Requests a second the host's starts are spaced to.
    public internal(set) var rate: Double
    /// Whether the rate still doubles every second (no refusal since pacing began).
    public internal(set) var slowStart = true
    /// No request starts before this (Retry-After, or a `RateLimit` with nothing remaining).
    public internal(set) var holdUntil: Double = 0
    /// The policy's cap (`RateLimit-Policy`: quota / window), if the server sent one.
    public internal(set) var ceiling: Double?
    /// Refusals so far, for status.
    public internal(set) var refusals = 0
    /// The rate at the last decrease: the rate refused.
    public internal(set) var refusedRate: Double = .infinity
    var lastStart: Double = -.infinity
    var lastDecrease: Double = -.infinity
    var lastRefusal: Double = -.infinity
    var lastAnswer: Double = -.infinity
    var pacedSince: Double

    init(rate: Double, now: Double) {
        self.rate = rate
        pacedSince = now
    }

    /// When the next request to the host may start.
    public var nextStart: Double { max(holdUntil, lastStart + 1 / rate) }

    mutating func refused(now: Double, retryAfter: Double?) {
        refusals += 1
        lastRefusal = now
        if let retryAfter { holdUntil = max(holdUntil, now + retryAfter) }
        guard now - lastDecrease >= Self.decreaseSpacing else { return }
        lastDecrease = now
        slowStart = false
        refusedRate = rate
        rate = max(Self.minimumRate, rate * Self.decrease)
    }

    mutating func answered(now: Double) {
        lastAnswer = now
        rate += slowStart ? 2 : rate < Self.recover * refusedRate ? 1 : Self.increase / rate
        if let ceiling { rate = min(rate, ceiling) }
    }

    /// Whether a refusal at `now` should cost its item no attempt.
    func refusalIsFree(now: Double) -> Bool {
        now - max(pacedSince, lastAnswer) < Self.freeRefusalsFor
    }

    /// Whether the host may be left unpaced at `now`.
    func isCalm(now: Double) -> Bool {
        ceiling == nil && holdUntil <= now && now - lastRefusal >= Self.calmAfter
    }
}

/// What a response's `RateLimit` / `RateLimit-Policy` headers said (draft-ietf-httpapi-ratelimit-
/// headers, the structured form `"name";r=0;t=10` and `"name";q=100;w=60`, and the older
/// `RateLimit-Remaining` / `-Reset` / `-Limit` fields).
public struct RateLimitFacts: Sendable, Hashable {
    /// Requests left in the current window.
    public var remaining: Int?
    /// Seconds until the window resets.
    public var reset: Double?
    /// Requests allowed per window, and the window in seconds.
    public var quota: Int?
    public var window: Double?

    public init(remaining: Int? = nil, reset: Double? = nil, quota: Int? = nil, window: Double? = nil) {
        self.remaining = remaining
        self.reset = reset
        self.quota = quota
        self.window = window
    }

    public var isEmpty: Bool { remaining == nil && reset == nil && quota == nil && window == nil }

    /// Reads one header (name lowercased, value as sent) into these facts; false when the header
    /// is not one of them.
    public mutating func read(name: String, value: String) -> Bool {
        switch name {
        case "ratelimit":
            // `"default";r=0;t=10` (several policies: the first one's). Also the older
            // `limit=100, remaining=0, reset=10` of draft 03.
            for (key, number) in Self.parameters(value) {
                switch key {
                case "r", "remaining": remaining = Int(number)
                case "t", "reset": reset = number
                case "limit": quota = Int(number)
                default: break
                }
            }
        case "ratelimit-policy":
            // `"default";q=100;w=60`, or the older `100;w=60`.
            let first = value.split(separator: ",").first.map(String.init) ?? value
            for (key, number) in Self.parameters(first) {
                switch key {
                case "q": quota = Int(number)
                case "w": window = number
                default: break
                }
            }
            if quota == nil, let head = first.split(separator: ";").first, let q = Int(head.trimmingCharacters(in: .whitespaces)) {
                quota = q
            }
        case "ratelimit-remaining", "x-ratelimit-remaining": remaining = Int(value.trimmingCharacters(in: .whitespaces))
        case "ratelimit-reset", "x-ratelimit-reset":
            // Seconds (a Unix time would be far larger: then it is not read).
            if let seconds = Double(value.trimmingCharacters(in: .whitespaces)), seconds < 86_400 { reset = seconds }
        case "ratelimit-limit": quota = Int(value.split(separator: ",").first?.trimmingCharacters(in: .whitespaces) ?? "")
        default: return false
        }
        return true
    }

    /// `key=number` pairs of a structured field's first member (`;` or `,` separated).
    static func parameters(_ value: String) -> [(String, Double)] {
        var found: [(String, Double)] = []
        var seen = Set<String>()
        for part in value.split(whereSeparator: { $0 == ";" || $0 == "," }) {
            let kv = part.split(separator: "=", maxSplits: 1)
            guard kv.count == 2 else { continue }
            let key = kv[0].trimmingCharacters(in: .whitespaces).lowercased()
            guard !seen.contains(key), let number = Double(kv[1].trimmingCharacters(in: .whitespaces)) else { continue }
            seen.insert(key)
            found.append((key, number))
        }
        return found
    }
}

extension Scheduler {
    // MARK: Pacing

    /// Paced hosts, for status.
    public var hostPaces: [String: HostPace] { paces }

    /// The host refused a request (429 or 503) at `now`; `retryAfter`: its `Retry-After` in
    /// seconds. Returns whether the refused item should spend no attempt (see `HostPace`).
    @discardableResult
    public mutating func hostRefused(_ hostKey: String, now date: Date, retryAfter: Double?) -> Bool {
        let now = date.timeIntervalSince1970
        hostStrained(hostKey, now: now, why: "refused requests (429/503)")
        if paces[hostKey] == nil {
            let recent = Double(recentStarts(hostKey)?.count(since: now - 1) ?? 1)
            paces[hostKey] = HostPace(rate: max(HostPace.minimumRate, recent / 2), now: now)
            paces[hostKey]!.lastStart = recentStarts(hostKey)?.last ?? -.infinity
            // Its first refusal only starts the pacing (in slow start).
            paces[hostKey]!.refusals = 1
            paces[hostKey]!.lastRefusal = now
            paces[hostKey]!.lastDecrease = now
            if let retryAfter { paces[hostKey]!.holdUntil = now + retryAfter }
        } else {
            paces[hostKey]!.refused(now: now, retryAfter: retryAfter)
        }
        return paces[hostKey]!.refusalIsFree(now: now)
    }

    /// A request to the host was answered (its body began): a paced host's rate grows, and one
    /// calm for long enough is no longer paced.
    public mutating func hostAnsweredRequest(_ hostKey: String, now date: Date) {
        let now = date.timeIntervalSince1970
        guard !paces.isEmpty, paces[hostKey] != nil else { return }
        if paces[hostKey]!.isCalm(now: now) { paces.removeValue(forKey: hostKey); return }
        paces[hostKey]!.answered(now: now)
    }

    /// A response's `RateLimit` headers: nothing remaining holds the host until the reset; a
    /// policy caps (and sets) its rate.
    public mutating func hostRateLimit(_ hostKey: String, _ facts: RateLimitFacts, now date: Date) {
        let now = date.timeIntervalSince1970
        var ceiling: Double? = nil
        if let q = facts.quota, let w = facts.window, q > 0, w > 0 { ceiling = Double(q) / w }
        let exhausted = facts.remaining.map { $0 <= 0 } ?? false
        guard ceiling != nil || exhausted else { return }
        if paces[hostKey] == nil {
            paces[hostKey] = HostPace(rate: ceiling ?? HostPace.minimumRate, now: now)
            paces[hostKey]!.slowStart = false
            paces[hostKey]!.lastStart = recentStarts(hostKey)?.last ?? -.infinity
        }
        if let ceiling {
            paces[hostKey]!.ceiling = ceiling
            paces[hostKey]!.rate = min(paces[hostKey]!.rate, ceiling)
        }
        if exhausted, let reset = facts.reset { paces[hostKey]!.holdUntil = max(paces[hostKey]!.holdUntil, now + reset) }
    }

    /// Whether the host's pace lets a request start at `now`.
    func paceAllowsStart(_ host: String, now: Double) -> Bool {
        guard !paces.isEmpty, let pace = paces[host] else { return true }
        return pace.nextStart <= now
    }

    /// A request to the host (`number` in the host table) starts at `now`. Its recent starts are
    /// filed by number and a pace looked up only when some host is paced: this runs at every
    /// start, and hashing the host's name twice there was most of a start's cost (callgrind).
    mutating func pacedStart(_ host: String, number: UInt32, now: Double) {
        starts[number, default: RecentStarts()].add(now)
        if !paces.isEmpty { paces[host]?.lastStart = now }
    }

    private func recentStarts(_ hostKey: String) -> RecentStarts? {
        knownHostNumber(hostKey).flatMap { starts[$0] }
    }

    /// When a paced host with waiting items may start the next one: for every host its pace held
    /// back at the last `nextActions` (`decidedAt`), even if that time has passed since — the
    /// engine asks for its wake-up a moment after deciding, and must not sleep through it.
    func nextPacedStart(now: Double) -> Double? {
        var next: Double? = nil
        for (host, pace) in paces where pace.nextStart > decidedAt {
            guard (ready[host]?.count ?? 0) > 0 || (readyDiscretionary[host]?.count ?? 0) > 0 else { continue }
            next = min(next ?? pace.nextStart, pace.nextStart)
        }
        return next
    }
}

/// A host's request starts over the last seconds (a few dozen numbers), for the rate a pacing
/// starts from.
struct RecentStarts: Sendable, Hashable {
    private var times: [Double] = []
    var last: Double? { times.last }

    /// Times arrive in order, so the old ones are a prefix: dropping it is one move, not a pass
    /// over every kept time at every start (a clock stepped back leaves a few stale times,
    /// which `count(since:)` does not count and the cap of 256 bounds).
    mutating func add(_ t: Double) {
        times.append(t)
        let old = times.prefix(while: { t - $0 > 2 }).count
        let drop = max(old, times.count - 256)
        if drop > 0 { times.removeFirst(drop) }
    }

    func count(since t: Double) -> Int { times.reduce(0) { $0 + ($1 >= t ? 1 : 0) } }
}
