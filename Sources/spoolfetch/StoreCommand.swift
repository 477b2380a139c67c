import ArgumentParser
import Foundation
import SpoolClient
import SpoolStore

/// `spoolfetch store [verify]`: the content store's size, entries and hits; `verify` hashes it again.
struct Store: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "store",
        abstract: "Show the content store's entries, size and hits (see run --store).",
        discussion: "Exit status 2: the store cannot be read.\nExample: spoolfetch store --spool /var/spool/spoolfetch",
        subcommands: [StoreVerify.self])

    @OptionGroup var spool: SpoolOption
    @Option(name: .customLong("store"), help: ArgumentHelp("The store's folder, if not SPOOL/store. Example: --store /srv/cas", valueName: "dir"))
    var store: String?
    @Flag(help: "Print JSON: path, entries, bytes, hits, bytesSaved.") var json = false

    func run() throws {
        do {
            let summary = try StoreReport.summary(path: store ?? spool.resolved + "/store")
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
        discussion: "Exit status 0: every entry matched; 1: some were removed or unreadable; 2: the store cannot be read.\nExample: spoolfetch store verify --spool /var/spool/spoolfetch")

    @OptionGroup var spool: SpoolOption
    @Option(name: .customLong("store"), help: ArgumentHelp("The store's folder, if not SPOOL/store. Example: --store /srv/cas", valueName: "dir"))
    var store: String?

    func run() throws {
        do {
            let (lines, whole) = try StoreReport.verify(path: store ?? spool.resolved + "/store")
            for line in lines { print(line) }
            if !whole { throw ExitCode(1) }
        } catch let error as StoreError {
            FileHandle.standardError.write(Data("spoolfetch store verify: \(error)\n".utf8))
            throw ExitCode(2)
        }
    }
}
