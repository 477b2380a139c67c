import Foundation
import Logging
import SpoolRequest
import SpoolScheduler

extension ConfigurationKey {
    /// Every setting of `spoolfetch run`, in the order `--print-config` prints them. The one list:
    /// add a setting here (and a field in `DaemonConfiguration`, and its flag in the executable,
    /// which a test checks against this table).
    public static let all: [ConfigurationKey] = [
        .text("spool", \.spool, value: "dir", reload: false, example: "/var/spool/spoolfetch",
              "The spool root; $SPOOLFETCH_SPOOL when not given", rule: { $0.isEmpty ? "must not be empty" : nil }),
        .optionalText("final-folder", \.finalFolder, value: "dir", reload: false, example: "/srv/data/in",
                      "Where published files and markers go (none: SPOOL/final)"),
        .int("concurrency", \.concurrency, atLeast: 1, reload: true, example: "32",
             "Connections at once in all, whatever the protocol (an HTTP/2 connection counts once, however many requests it carries; a server that allows few streams makes libcurl open more, still within this)"),
        .int("per-host", \.perHost, atLeast: 1, reload: true, example: "4",
             "Connections an HTTP/1.1 host starts with (one request each); it may grow to per-host-max"),
        .int("per-host-max", \.perHostMax, atLeast: 1, reload: true, example: "32",
             "The most connections to one host:port, whatever the protocol: an HTTP/1.1 host grows to it from per-host while each added one adds throughput and the server shows no strain; an HTTP/2 host opens more than one only when its server allows fewer streams than its requests need"),
        .int("max-streams", \.maxStreams, atLeast: 1, reload: true, example: "50",
             "Requests at once to one host over HTTP/2, as streams of one connection (the server's own limit holds too)"),
        .int("max-segments", \.maxSegments, atLeast: 1, reload: true, example: "4",
             "Connections one large file (16 MiB or more, from a server that answers ranges) may use at once, within per-host and only where no other waiting item of the host needs them; 1 = one stream"),
        .optionalText("window", \.window, value: "HH:MM-HH:MM", reload: true, example: "22:00-06:00",
                      "Discretionary window, local time, may cross midnight",
                      rule: { DailyWindow(parsing: $0) == nil
                          ? "must look like 22:00-06:00 (HH:MM-HH:MM, start and end differ), got '\($0)'" : nil }),
        .int("stall-timeout", \.stallTimeout, atLeast: 1, value: "seconds", reload: false, example: "30",
             "Seconds without a byte before a transfer is cut and retried"),
        .optionalText("deadline", \.deadline, value: "TIME|DURATION", reload: true, example: "6h",
                      "Default deadline of every item whose request gives none: an RFC 3339 time, or a time from the claim (90m, 6h, 2d); an item not ended by then fails with code deadline",
                      rule: { RequestDeadline(parsing: $0) == nil
                          ? "must be an RFC 3339 time or a duration such as 90m, 6h or 2d, got '\($0)'" : nil }),
        .seconds("resource-timeout", \.resourceTimeout, positive: true, reload: true, example: "86400",
                 "Seconds after an item was queued when it is not retried any more"),
        .seconds("retry-base", \.retryBase, positive: true, reload: true, example: "2",
                 "First retry delay in seconds, doubling with jitter"),
        .seconds("retry-cap", \.retryCap, positive: true, reload: true, example: "600",
                 "Longest retry delay in seconds"),
        .int("max-attempts", \.maxAttempts, atLeast: 0, reload: true, example: "5",
             "Attempts per item before it fails for good; 0 = until the resource timeout"),
        .rateSchedule("max-rate", \.maxRate, reload: true, example: "1M 08:00-20:00, 0",
                      "Daemon-wide receive rate shared by the running transfers; 0 = unlimited. Rates by time of day: RATE HH:MM-HH:MM, ..., RATE (local time, the first window that holds wins, the last rate is for the rest of the day)"),
        .bytes("max-bytes", \.maxBytes, reload: true, example: "10G",
               "Daemon-wide cap on any response body; 0 = none"),
        .number("expect-slack", \.expectSlack, value: "factor", positive: true, atLeast: 1, reload: true, example: "3",
                "A body more than this many times its expected-bytes fails, unless max-bytes is set"),
        .bytesOrAuto("min-free", \.minFree, auto: "auto", reload: true, example: "1G",
                     "Free space kept on the staging (and final) filesystem; items wait rather than fill it. auto: the smaller of 64M and 5% of each filesystem"),
        .bytes("sync-every", \.syncEvery, reload: true, example: "1G",
               "A large body is made durable every this many bytes while it arrives, so a power cut costs its resume at most that much; 0 = only when a transfer stops"),
        .int("max-items", \.maxItems, atLeast: 1, reload: true, example: "5000",
             "Most items one request file may hold"),
        .bytes("max-request-bytes", \.maxRequestBytes, positive: true, reload: true, example: "1M",
               "Largest request file accepted; a larger one is rejected"),
        .seconds("adopt-interval", \.adoptInterval, positive: false, reload: true, example: "10",
                 "Seconds between looks for requests whose worker died; 0 = only at start"),
        .seconds("lease-period", \.leasePeriod, positive: true, reload: false, example: "2",
                 "Seconds between renewals of this worker's lease on the spool (one small write each)"),
        .seconds("lease-timeout", \.leaseTimeout, positive: true, reload: false, example: "10",
                 "Seconds without a lease renewal after which a worker counts as dead and another takes its requests over; at least 3 lease periods"),
        .seconds("rescan-interval", \.rescanInterval, positive: false, reload: true, example: "600",
                 "Seconds between full scans of incoming/ besides inotify (for filesystems whose events can be missed); 0 = off"),
        .yesNo("inotify", \.inotify, reload: false, example: "no",
               "Watch incoming/ with inotify; no: only rescans see new requests (a spool on NFS or another shared filesystem written from other machines; needs --rescan-interval)"),
        .optionalText("ca-file", \.caFile, value: "file", reload: false, example: "/etc/ssl/private-ca.pem",
                      "Extra CA certificates (PEM) to trust, besides the system's"),
        .optionalText("ca-path", \.caPath, value: "dir", reload: false, example: "/etc/ssl/extra",
                      "Extra folder of hashed CA certificates to trust"),
        .text("deny-network", \.denyNetwork, value: "CIDR,...", reload: false, example: "default,10.0.0.0/8,127.0.0.0/8",
              "Networks no connection may go to, checked on the resolved address of every connection (redirects, each DNS answer, a proxy's own address); default: link-local and cloud metadata; the word default stands for that list; empty: none",
              rule: { text in
                  do throws(EgressPolicy.Network.Invalid) { _ = try EgressPolicy.Network.list(parsing: text) } catch { return "\(error)" }
                  return nil
              }),
        .text("allow-network", \.allowNetwork, value: "CIDR,...", reload: false, example: "10.1.2.0/24",
              "Networks connections may go to even where deny-network holds them (allow wins where both match)",
              rule: { text in
                  do throws(EgressPolicy.Network.Invalid) { _ = try EgressPolicy.Network.list(parsing: text) } catch { return "\(error)" }
                  return nil
              }),
        .yesNo("keep-url-queries", \.keepURLQueries, reload: false, example: "yes",
               "Write URLs with their query into markers, error files, status and logs; no: without it (a signed URL's query is a credential), markers add urlQuerySha256"),
        .seconds("mirror-after", \.mirrorAfter, positive: false, reload: true, example: "120",
                 "Seconds an item's host may be unreachable before the item moves on to its next mirror"),
        .optionalText("netrc-file", \.netrcFile, value: "file", reload: false, example: "/etc/spoolfetch/netrc",
                      "A netrc file: user and password for the hosts it names (never for another host after a redirect); must be the daemon user's own and not readable by others"),
        .optionalText("operators", \.operators, value: "group", reload: false, example: "spoolops",
                      "The operators' group: its members may cancel, pause, resume and retry anyone's requests (others only their own); default: the group spoolfetch init --operators recorded in SPOOL/operators"),
        .optionalText("credentials-dir", \.credentialsDir, value: "dir", reload: true, example: "/etc/spoolfetch/credentials",
                      "Folder of private credentials files (Authorization or Cookie lines, AWS SigV4 keys, a client certificate) that a request names with credentials: NAME"),
        .text("store", \.store, value: "yes|no|dir", reload: false, example: "yes",
              "Keep every body verified against its sha256 in a content store and publish later items with that sha256 from it without a request; yes: SPOOL/store (shared by every worker on the spool), or a folder",
              rule: { $0.hasPrefix("/") || ["yes", "no", "true", "false", "on", "off", "1", "0"].contains($0.lowercased())
                  ? nil : "must be yes, no or an absolute folder, got '\($0)'" }),
        .text("store-link", \.storeLink, value: "reflink|hardlink", reload: false, example: "hardlink",
              "How an item is published from the store: reflink (a copy that shares the blocks where the filesystem can, else a copy) or hardlink (the store's read-only file itself)",
              rule: { ["reflink", "hardlink"].contains($0) ? nil : "must be reflink or hardlink, got '\($0)'" }),
        .bytes("store-max", \.storeMax, reload: true, example: "100G",
               "Most bytes the content store keeps; the least recently used entries no item is publishing from go first; 0 = no bound"),
        .text("hashed-mirror", \.hashedMirror, value: "url", reload: true, example: "https://cas.example.org/sha256/{sha256}",
              "A URL with {sha256} tried before an item's own URL when the item has a sha256; repeatable (space-separated in the config file), tried in order; a 404 or a wrong body moves on without spending an attempt",
              rule: { text in
                  for template in text.split(whereSeparator: \.isWhitespace).map(String.init) {
                      guard template.contains("{sha256}") else { return "must contain {sha256}, got '\(template)'" }
                      let url = template.replacingOccurrences(of: "{sha256}", with: String(repeating: "0", count: 64))
                      do throws(RequestURL.Invalid) { _ = try RequestURL(validating: url) } catch {
                          return "must be an http or https URL with {sha256}, got '\(template)'"
                      }
                  }
                  return nil
              }),
        .optionalText("on-item", \.onItem, value: "command", reload: true, example: "/usr/local/bin/item-done",
                      "Command run (sh -c) after each item ends, with SPOOLFETCH_* variables"),
        .optionalText("on-group", \.onGroup, value: "command", reload: true, example: "/usr/local/bin/ingest",
                      "Command run (sh -c) once after every item of a request file ended"),
        .optionalText("refresh-hook", \.refreshHook, value: "command", reload: true, example: "/usr/local/bin/presign",
                      "Command run (sh -c) for a fresh URL when an item's URL has expired, expires within refresh-margin, or was refused (401, 403, 410); its first output line is the new URL"),
        .seconds("refresh-margin", \.refreshMargin, positive: false, reload: true, example: "300",
                 "Seconds before a URL's known expiry at which an item starting asks the refresh hook for a fresh one"),
        .seconds("hook-timeout", \.hookTimeout, positive: true, reload: true, example: "60",
                 "Seconds a hook may run; past it its whole process group is killed"),
        .int("max-hooks", \.maxHooks, atLeast: 1, reload: true, example: "2",
             "Hooks running at once; more wait their turn"),
        .optionalText("metrics-file", \.metricsFile, value: "file", reload: true,
                      example: "/var/lib/prometheus/node-exporter/spoolfetch.prom",
                      "Prometheus metrics written here (node_exporter's textfile format, atomically) after a change, at most every --metrics-interval"),
        .seconds("metrics-interval", \.metricsInterval, positive: true, reload: true, example: "60",
                 "Seconds at least between two writes of the metrics"),
        .text("log-level", \.logLevel, value: "level", reload: true, example: "debug",
              "trace, debug, info, notice, warning, error or critical",
              rule: { Logger.Level(rawValue: $0) == nil
                  ? "must be one of trace, debug, info, notice, warning, error, critical, got '\($0)'" : nil }),
    ]
}
