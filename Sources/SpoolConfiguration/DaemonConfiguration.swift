import Foundation
import Logging
import SpoolRequest
import SpoolScheduler

/// Everything `spoolfetch run` can be told. Built by the executable from flags, environment and
/// an optional config file (`ConfigurationSource`); printed by `--print-config`.
///
/// Each setting a user can give has one row in `ConfigurationKey.all` (its name, parser, check,
/// printed form, help text and whether it can change at run time); the fields below are only
/// where the values live.
public struct DaemonConfiguration: Sendable, Hashable, Codable {
    /// The spool root.
    public var spool: String = "spool"
    /// Where published files and markers go (default: `SPOOL/final`).
    public var finalFolder: String?
    /// Drain mode: exit when nothing is pending or running.
    public var once: Bool = false
    /// Due-drain mode (`run --due`): fetch what is due now, leave items whose earliest start or
    /// window lies ahead queued, and exit. Needs no lock when several workers share the spool.
    public var due: Bool = false
    public var concurrency: Int = 16
    public var perHost: Int = 6
    /// Connections an HTTP/1.1 host may grow to while it gains throughput (`HostConnectionLimit`).
    public var perHostMax: Int = 16
    /// Streams at once on one HTTP/2 connection: what one host's requests share.
    public var maxStreams: Int = 100
    /// Connections one large item may use at once (its segments), within `perHost`; 1: one stream.
    public var maxSegments: Int = 16
    /// `HH:MM-HH:MM`, local time; discretionary items run only inside it.
    public var window: String?
    /// `--deadline`: every request's `deadline:` unless it gives its own (an RFC 3339 time or a
    /// time from the claim such as `6h`); nil: none.
    public var deadline: String?
    /// Seconds without a byte before a transfer is cut and retried.
    public var stallTimeout: Int = 60
    /// Seconds after an item was first claimed after which it is not retried any more (7 days).
    public var resourceTimeout: Double = 7 * 24 * 3600
    /// First retry delay and cap, in seconds.
    public var retryBase: Double = 1
    public var retryCap: Double = 300
    /// Attempts per item before it fails for good (0: unlimited, bounded by the resource timeout).
    public var maxAttempts: Int = 10
    /// Daemon-wide receive-rate cap in bytes per second (0: none), shared among running
    /// transfers; by time of day when it has windows.
    public var maxRate = RateSchedule(constant: 0)
    /// Daemon-wide cap on any response body (0: none); a request's `max-bytes` may only lower it.
    public var maxBytes: Int64 = 0
    /// A body more than this many times its `expected-bytes` fails (unless `max-bytes` is set).
    public var expectSlack: Double = 2
    /// Bytes of free space kept on the staging (and final) filesystem; nil: the smaller of 64 MiB
    /// and 5 % of each filesystem (`SpaceRules.automaticMinFree`), so a small final folder drains.
    public var minFree: Int64? = nil
    /// A large body is synced every this many bytes while it arrives (0: only when it stops), so
    /// that after a power cut its resume starts from there (see `ItemState.syncedBytes`).
    public var syncEvery: Int64 = 256 * 1024 * 1024
    /// Items per request file.
    public var maxItems: Int = 1_000_000
    /// Bytes per request file.
    public var maxRequestBytes: Int64 = 64 * 1024 * 1024
    /// Seconds between scans of `active/` for requests whose worker died (0: only at start).
    public var adoptInterval: Double = 30
    /// Seconds between renewals of this worker's lease on the spool (`active/W/.lease`).
    public var leasePeriod: Double = 5
    /// Seconds without a renewal after which a worker counts as dead and its requests are
    /// taken over (judged by the filesystem's timestamps, not by the machines' clocks).
    public var leaseTimeout: Double = 30
    /// Seconds between full scans of `incoming/` besides inotify (0: none).
    public var rescanInterval: Double = 0
    /// Whether `incoming/` and `control/` are watched with inotify. Off for a spool written from
    /// other machines (NFS, CIFS, most FUSE): inotify sees only this kernel's changes there, so
    /// rescans are the only source of new names.
    public var inotify: Bool = true
    public var caFile: String?
    /// Whether markers, error files, status and logs show URLs whole; by default without their
    /// query, which holds a signed URL's signature (`URLPrivacy`).
    public var keepURLQueries: Bool = false
    /// Credentials by reference: a netrc file (libcurl's rules), and a folder of header files a
    /// request names with `credentials: NAME`. Both must be the daemon user's own and private.
    /// Seconds an item's host may be unreachable before the item moves on to its next mirror.
    public var mirrorAfter: Double = 600
    public var netrcFile: String?
    /// `--operators`: the group whose members may act on anyone's requests (see `VerbPermission`).
    public var operators: String?
    public var credentialsDir: String?
    public var caPath: String?
    /// Commands run after each item / each group (through `/bin/sh -c`).
    public var onItem: String?
    public var onGroup: String?
    /// Command run (through `/bin/sh -c`) for a fresh URL when an item's URL has expired, expires
    /// within `refreshMargin`, or was refused with 401, 403 or 410; its first stdout line is the URL.
    public var refreshHook: String?
    /// Seconds before a URL's known expiry at which an item starting asks for a fresh one.
    public var refreshMargin: Double = 60
    /// Seconds a hook may run before its whole process group is killed.
    public var hookTimeout: Double = 300
    /// Hooks running at once; more wait their turn, in order.
    public var maxHooks: Int = 4
    public var logLevel: String = "info"
    /// Where Prometheus metrics are written (none: only `status/HOST-PID.prom`).
    public var metricsFile: String?
    /// Seconds at least between two writes of the metrics.
    public var metricsInterval: Double = 15
    /// The content store: `no`, `yes` (`SPOOL/store`) or a folder (`--store DIR`).
    public var store: String = "no"
    /// How a hit is published: `reflink` (a reflink where the filesystem can, else a copy) or `hardlink`.
    public var storeLink: String = "reflink"
    /// Most bytes the store keeps (least recently used entries go first); 0 = no bound.
    public var storeMax: Int64 = 0
    /// URL templates with `{sha256}` tried, in order, before an item's own URL when it has a
    /// `sha256:` (`--hashed-mirror`, repeatable; space-separated in the config file).
    public var hashedMirror: String = ""
    /// The egress policy's networks, as given (`EgressPolicy.Network.list`): denied, and allowed
    /// even where denied. Read into `egressPolicy`; checked by their rows of the table.
    public var denyNetwork: String = EgressPolicy.defaultDenyText
    public var allowNetwork: String = ""
    /// Where this configuration came from, so `SIGHUP` can read the file again with the same
    /// flags on top (nil when built in code).
    public var source: ConfigurationSource?

    public init() {}

    /// Checks every key's rule and the rules between keys; the message names the flag.
    public func validate() throws(ConfigurationError) {
        for key in ConfigurationKey.all {
            if let problem = key.check(self) { throw .init("--\(problem)") }
        }
        if retryCap < retryBase {
            throw .init("--retry-base (\(ConfigurationKey.formatNumber(retryBase))) must be at most --retry-cap (\(ConfigurationKey.formatNumber(retryCap)))")
        }
        if leaseTimeout < 3 * leasePeriod {
            throw .init("--lease-timeout (\(ConfigurationKey.formatNumber(leaseTimeout))) must be at least 3 times --lease-period (\(ConfigurationKey.formatNumber(leasePeriod))): a live worker must not miss its lease by one late renewal")
        }
        if once && due { throw .init("--once and --due are two drain modes; give one") }
        if !hashedMirrors.isEmpty && storePath == nil {
            throw .init("--hashed-mirror needs the content store (--store yes or --store DIR): what a hashed mirror serves is kept there")
        }
        if !inotify && rescanInterval <= 0 {
            throw .init("--inotify no needs --rescan-interval (seconds between scans of incoming/), or no new request would ever be seen")
        }
    }

    /// The content store's folder; nil when the store is off.
    public var storePath: String? {
        switch store.lowercased() {
        case "no", "false", "off", "0", "": return nil
        case "yes", "true", "on", "1": return spool + "/store"
        default: return store
        }
    }

    /// `deny-network` and `allow-network` read (validated, so the fallback, the built-in policy,
    /// is never used after `validate()`).
    public var egressPolicy: EgressPolicy {
        (try? EgressPolicy(denyText: denyNetwork, allowText: allowNetwork)) ?? .standard
    }

    /// `hashed-mirror`'s templates, in order.
    public var hashedMirrors: [String] { hashedMirror.split(whereSeparator: \.isWhitespace).map(String.init) }

    /// The log level as swift-log's type (validated, so never nil after `validate()`).
    public var loggerLevel: Logger.Level { Logger.Level(rawValue: logLevel) ?? .info }
}

/// A configuration value is unusable. `description` names the key (and the file and line, for
/// config files).
public struct ConfigurationError: Error, Sendable, CustomStringConvertible {
    public let description: String
    public init(_ message: String) { description = message }
}
