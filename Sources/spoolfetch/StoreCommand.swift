import ArgumentParser
import Foundation
import SpoolClient
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

/// Where the store is: `--store DIR`, else `SPOOL/store`.
struct StoreOptions: ParsableArguments {
    @OptionGroup var spool: SpoolOption
    @Option(name: .customLong("store"), help: ArgumentHelp("The store's folder, if not SPOOL/store. Example: --store /srv/cas", valueName: "dir"))
    var store: String?

    var path: String { store ?? spool.resolved + "/store" }
}

struct StoreShow: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "show",
        abstract: "Show the content store's entries, size and hits (the default of spoolfetch store).",
        discussion: "Exit status 2: the store cannot be read.\nExample: spoolfetch store show --store /srv/cas --json")

    @OptionGroup var options: StoreOptions
    @Flag(help: "Print JSON: path, entries, bytes, hits, bytesSaved.") var json = false

    func run() throws {
        do {
            let summary = try StoreReport.summary(path: options.path)
            print(json ? String(decoding: SpoolJSON.encode(summary).dropLast(), as: UTF8.self) : StoreReport.line(summary))
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
            let (lines, whole) = try StoreReport.verify(path: options.path)
            for line in lines { print(line) }
            if !whole { throw ExitCode(1) }
        } catch let error as StoreError {
            FileHandle.standardError.write(Data("spoolfetch store verify: \(error)\n".utf8))
            throw ExitCode(2)
        }
    }
}
