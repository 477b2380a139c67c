import ArgumentParser
import Foundation
import SpoolClient
import SpoolConfiguration
import SpoolStore

/// `spoolfetch store [show|verify]`: the content store's size, entries and hits; `verify` hashes it again.
///
/// The parent command declares no option of its own: swift-argument-parser hands an option the
/// parent and a subcommand both declare to the parent, so `store verify --store DIR` used to check
/// `SPOOL/store` instead of DIR. Each subcommand owns its options (`StoreOptions`); `show` is the
/// default, so `spoolfetch store --spool X` reads as before.
struct Store: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "store",
        abstract: "Show the content store's entries, size and hits (see run --store).",
        discussion: "Exit status 2: the store cannot be read.\nExample: spoolfetch store --spool /var/spool/spoolfetch",
        subcommands: [StoreShow.self, StoreVerify.self],
        defaultSubcommand: StoreShow.self)
}

/// Where the store is: `--store DIR`, the `store` of `--config FILE`, the running daemon's, the
/// last drain's, else `SPOOL/store` (see `StoreLocation`).
struct StoreOptions: ParsableArguments {
    @OptionGroup var spool: SpoolOption
    @Option(name: .customLong("store"), help: ArgumentHelp(
        "The store's folder. Default: the one the running daemon (else the last drain) uses, else SPOOL/store. Example: --store /srv/cas",
        valueName: "dir"))
    var store: String?
    @Option(help: ArgumentHelp("Read the store's folder from this config file of spoolfetch run (its store key). Example: --config /etc/spoolfetch.conf",
                               valueName: "file"))
    var config: String?

    /// The store to read and why that one; a config file that cannot be read is an error.
    func location() throws -> StoreLocation {
        var configured: (path: String?, file: String)? = nil
        if let config {
            let environmentSpool = ProcessInfo.processInfo.environment["SPOOLFETCH_SPOOL"].flatMap { $0.isEmpty ? nil : $0 }
            let source = ConfigurationSource(configFile: config, flags: spool.spool.map { ["spool": $0] } ?? [:],
                                             environmentSpool: environmentSpool)
            let configuration: DaemonConfiguration
            do throws(ConfigurationSource.Failure) { configuration = try source.load() } catch {
                throw ValidationError("--config: \(error.description)")
            }
            guard let path = configuration.storePath else {
                throw ValidationError("--config \(config) turns the store off (store = \(configuration.store)): pass --store DIR")
            }
            configured = (path, config)
        }
        return StoreLocation.find(spool: spool.resolved, flag: store, configured: configured)
    }
}

struct StoreShow: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "show",
        abstract: "Show the content store's entries, size and hits (the default of spoolfetch store).",
        discussion: "Exit status 2: the store cannot be read.\nExample: spoolfetch store show --store /srv/cas --json")

    @OptionGroup var options: StoreOptions
    @Flag(help: "Print JSON: path, entries, bytes, hits, bytesSaved, source (why this store).") var json = false

    func run() throws {
        do {
            let location = try options.location()
            var summary = try StoreReport.summary(path: location.path)
            summary.source = location.source
            print(json ? String(decoding: SpoolJSON.encode(summary).dropLast(), as: UTF8.self)
                       : StoreReport.line(summary) + "\n(\(location.source))")
        } catch let error as ValidationError {
            throw error
        } catch {
            FileHandle.standardError.write(Data("spoolfetch store: \(error)\n".utf8))
            throw ExitCode(2)
        }
    }
}

struct StoreVerify: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "verify",
        abstract: "Hash every entry of the content store again; remove and report those whose bytes do not match their name.",
        discussion: "Exit status 0: every entry matched; 1: some were removed or unreadable; 2: the store cannot be read.\nExample: spoolfetch store verify --store /srv/cas")

    @OptionGroup var options: StoreOptions

    func run() throws {
        do {
            let location = try options.location()
            print("\(location.path) (\(location.source))")
            let (lines, whole) = try StoreReport.verify(path: location.path)
            for line in lines { print(line) }
            if !whole { throw ExitCode(1) }
        } catch let error as StoreError {
            FileHandle.standardError.write(Data("spoolfetch store verify: \(error)\n".utf8))
            throw ExitCode(2)
        }
    }
}
