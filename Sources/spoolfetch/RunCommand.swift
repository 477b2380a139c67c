import ArgumentParser
import Foundation
import SpoolConfiguration
import SpoolDaemon

/// `spoolfetch run`. Each setting flag is a `String?` named exactly like its row in
/// `ConfigurationKey.all`, whose help text it shows; the value is read and checked by that row,
/// so a flag and a config-file line accept the same text and fail with the same message.
/// (A test compares these flags with the table.)
struct Run: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "run",
        abstract: "Run the daemon: claim request files from incoming/ and download them.",
        discussion: """
        Without --once or --due it runs until SIGTERM or SIGINT (SIGHUP reloads --config).
        --once drains: it exits when nothing is pending or running, waiting for items whose earliest start
        or window lies ahead. --due fetches what is due now, leaves the rest queued, and exits.
        Both exit with status 0 when every item they ended was published, 1 when any failed or was rejected.
        Precedence: flags, then $SPOOLFETCH_SPOOL (for the spool), then --config FILE, then the defaults shown.
        Exit status 3: bad configuration or unusable spool; 64: a malformed flag.
        Example: spoolfetch run --spool /var/spool/spoolfetch --once --concurrency 32
        """)

    @Option(help: ArgumentHelp("A config file of 'key = value' lines named like these flags. Example: --config /etc/spoolfetch.conf", valueName: "file"))
    var config: String?

    @Flag(name: .customLong("print-config"), help: "Print the effective configuration (in the config file's format) and exit.")
    var printConfig = false

    @Flag(help: "Drain: exit when nothing is pending or running (waits for items whose earliest start or window lies ahead).")
    var once = false

    @Flag(help: "Drain what is due now: items whose earliest start or window lies ahead stay queued; then exit.")
    var due = false

    /// No longer a setting (a claim holds no descriptor, so nothing limits claims): hidden,
    /// accepted and ignored so that old scripts keep working.
    @Option(name: .customLong("max-claims"), help: ArgumentHelp(visibility: .hidden)) var maxClaims: Int?

    @Option(help: .setting("spool")) var spool: String?
    @Option(name: .customLong("final-folder"), help: .setting("final-folder")) var finalFolder: String?
    @Option(help: .setting("concurrency")) var concurrency: String?
    @Option(name: .customLong("per-host"), help: .setting("per-host")) var perHost: String?
    @Option(name: .customLong("per-host-max"), help: .setting("per-host-max")) var perHostMax: String?
    @Option(name: .customLong("max-streams"), help: .setting("max-streams")) var maxStreams: String?
    @Option(name: .customLong("max-segments"), help: .setting("max-segments")) var maxSegments: String?
    @Option(help: .setting("window")) var window: String?
    @Option(name: .customLong("stall-timeout"), help: .setting("stall-timeout")) var stallTimeout: String?
    @Option(help: .setting("deadline")) var deadline: String?
    @Option(name: .customLong("resource-timeout"), help: .setting("resource-timeout")) var resourceTimeout: String?
    @Option(name: .customLong("retry-base"), help: .setting("retry-base")) var retryBase: String?
    @Option(name: .customLong("retry-cap"), help: .setting("retry-cap")) var retryCap: String?
    @Option(name: .customLong("max-attempts"), help: .setting("max-attempts")) var maxAttempts: String?
    @Option(name: .customLong("max-rate"), help: .setting("max-rate")) var maxRate: String?
    @Option(name: .customLong("max-bytes"), help: .setting("max-bytes")) var maxBytes: String?
    @Option(name: .customLong("expect-slack"), help: .setting("expect-slack")) var expectSlack: String?
    @Option(name: .customLong("min-free"), help: .setting("min-free")) var minFree: String?
    @Option(name: .customLong("sync-every"), help: .setting("sync-every")) var syncEvery: String?
    @Option(name: .customLong("max-items"), help: .setting("max-items")) var maxItems: String?
    @Option(name: .customLong("max-request-bytes"), help: .setting("max-request-bytes")) var maxRequestBytes: String?
    @Option(name: .customLong("adopt-interval"), help: .setting("adopt-interval")) var adoptInterval: String?
    @Option(name: .customLong("lease-period"), help: .setting("lease-period")) var leasePeriod: String?
    @Option(name: .customLong("lease-timeout"), help: .setting("lease-timeout")) var leaseTimeout: String?
    @Option(name: .customLong("rescan-interval"), help: .setting("rescan-interval")) var rescanInterval: String?
    @Option(help: .setting("inotify")) var inotify: String?
    @Option(name: .customLong("ca-file"), help: .setting("ca-file")) var caFile: String?
    @Option(name: .customLong("ca-path"), help: .setting("ca-path")) var caPath: String?
    @Option(name: .customLong("deny-network"), help: .setting("deny-network")) var denyNetwork: String?
    @Option(name: .customLong("allow-network"), help: .setting("allow-network")) var allowNetwork: String?
    @Option(name: .customLong("keep-url-queries"), help: .setting("keep-url-queries")) var keepUrlQueries: String?
    @Option(name: .customLong("mirror-after"), help: .setting("mirror-after")) var mirrorAfter: String?
    @Option(name: .customLong("netrc-file"), help: .setting("netrc-file")) var netrcFile: String?
    @Option(name: .customLong("credentials-dir"), help: .setting("credentials-dir")) var credentialsDir: String?
    @Option(help: .setting("operators")) var operators: String?
    @Option(help: .setting("store")) var store: String?
    @Option(name: .customLong("store-link"), help: .setting("store-link")) var storeLink: String?
    @Option(name: .customLong("store-max"), help: .setting("store-max")) var storeMax: String?
    /// Repeatable: the values are joined with spaces, the config file's form of the list.
    @Option(name: .customLong("hashed-mirror"), help: .setting("hashed-mirror")) var hashedMirror: [String] = []
    @Option(name: .customLong("on-item"), help: .setting("on-item")) var onItem: String?
    @Option(name: .customLong("on-group"), help: .setting("on-group")) var onGroup: String?
    @Option(name: .customLong("refresh-hook"), help: .setting("refresh-hook")) var refreshHook: String?
    @Option(name: .customLong("refresh-margin"), help: .setting("refresh-margin")) var refreshMargin: String?
    @Option(name: .customLong("hook-timeout"), help: .setting("hook-timeout")) var hookTimeout: String?
    @Option(name: .customLong("max-hooks"), help: .setting("max-hooks")) var maxHooks: String?
    @Option(name: .customLong("log-level"), help: .setting("log-level")) var logLevel: String?
    @Option(name: .customLong("metrics-file"), help: .setting("metrics-file")) var metricsFile: String?
    @Option(name: .customLong("metrics-interval"), help: .setting("metrics-interval")) var metricsInterval: String?

    /// The setting flags given, by key: every `String?` option but `--config`, its key being the
    /// property name in kebab case (`perHost` → `per-host`). Read by reflection so that the flags
    /// are not listed a second time here.
    var settingFlags: [String: String] {
        var flags: [String: String] = [:]
        for child in Mirror(reflecting: self).children {
            guard let label = child.label else { continue }
            let key = Self.kebab(String(label.drop { $0 == "_" }))
            if let option = child.value as? Option<String?>, let value = option.wrappedValue, key != "config" {
                flags[key] = value
            } else if let option = child.value as? Option<[String]>, !option.wrappedValue.isEmpty {
                flags[key] = option.wrappedValue.joined(separator: " ")
            }
        }
        return flags
    }

    static func kebab(_ camel: String) -> String {
        camel.reduce(into: "") { out, ch in
            if ch.isUppercase { out += "-" + ch.lowercased() } else { out.append(ch) }
        }
    }

    func run() throws {
        let environmentSpool = ProcessInfo.processInfo.environment["SPOOLFETCH_SPOOL"].flatMap { $0.isEmpty ? nil : $0 }
        let source = ConfigurationSource(configFile: config, flags: settingFlags, environmentSpool: environmentSpool,
                                         once: once, due: due)
        var configuration: DaemonConfiguration
        do throws(ConfigurationSource.Failure) {
            configuration = try source.load()
        } catch {
            switch error {
            case .flag(let e): throw ValidationError(e.description)   // exit 64, with the usage line
            case .configuration(let e):
                FileHandle.standardError.write(Data("spoolfetch run: bad configuration: \(e.description)\n".utf8))
                throw ExitCode(Daemon.ExitStatus.cannotStart)
            }
        }
        if printConfig {
            print(configuration.printed, terminator: "")
            return
        }
        let status = Daemon.run(configuration)
        if status != 0 { throw ExitCode(status) }
    }
}

extension ArgumentHelp {
    /// A setting flag's help, from its row in the configuration table.
    static func setting(_ name: String) -> ArgumentHelp {
        guard let help = settingHelps[name] else { preconditionFailure("no configuration key \(name)") }
        return help
    }

    /// Every setting's help, made once: the parser builds `Run` several times while it parses a
    /// command line, and each row's text prints its default, a cost every start of the daemon
    /// would pay again for each flag.
    private static let settingHelps = Dictionary(uniqueKeysWithValues: ConfigurationKey.all.map {
        ($0.name, ArgumentHelp($0.help, valueName: $0.valueName))
    })
}
