// swift-tools-version: 6.0
import PackageDescription

// One target per concern; the dependency arrows below are the architecture (docs/ARCHITECTURE.md):
//   SpoolRequest, SpoolScheduler      pure, standard library + Foundation only
//   SpoolCore                          the daemon's decisions (items' machines): pure, imports only the
//                                      pure modules, reads no clock; driven by SpoolDaemon and the simulator
//   SpoolStore, SpoolWatcher, SpoolTransfer, SpoolNetwork, SpoolProcess
//                                      adapters; each may import SpoolRequest, never each other.
//                                      SpoolStore holds every spool file format, the status and
//                                      control files included, so both sides below can share them
//                                      (SpoolProcess: hooks' processes, signals, systemd's notify)
//   SpoolMetrics                       the Prometheus numbers (swift-metrics + swift-prometheus); knows
//                                      no other target
//   SpoolConfiguration                 the settings: flags <-> keys table, config file, reload diff
//                                      (SpoolRequest, SpoolScheduler for the values' types)
//   SpoolDaemon                        the engine: wires the adapters, metrics and configuration
//   SpoolClient                        what the CLI needs to talk to a spool and its daemons (status,
//                                      control commands, add): reads and writes spool files only and
//                                      never imports SpoolDaemon, so the two meet only in SpoolStore
//   SpoolfetchKit                      the library product: URLSession-shaped tasks and events over
//                                      SpoolClient, for Swift programs and the CLI alike
//   spoolfetch                         the executable: argument parsing and nothing else
let package = Package(
    name: "spoolfetch",
    platforms: [.macOS(.v13)],
    products: [
        .executable(name: "spoolfetch", targets: ["spoolfetch"]),
        // The background-URLSession API for Swift programs (Examples/ shows it in use).
        .library(name: "SpoolfetchKit", targets: ["SpoolfetchKit"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-crypto", from: "3.12.3"),
        .package(url: "https://github.com/apple/swift-collections", from: "1.6.0"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
    ],
    targets: [
        // C shims: system libraries with typed, non-variadic wrappers.
        .systemLibrary(name: "CCurl", pkgConfig: "libcurl",
                       providers: [.apt(["libcurl4-openssl-dev"])]),
        .systemLibrary(name: "CInotifyTools",
                       providers: [.apt(["libinotifytools0-dev"])]),
        .systemLibrary(name: "CLinux"),
        .systemLibrary(name: "CNetlink"),

        // Pure parts.
        .target(name: "SpoolRequest"),
        .target(name: "SpoolScheduler",
                dependencies: [.product(name: "HeapModule", package: "swift-collections")]),
        // The item machine is generic over the shell's part and job: without its bodies in the module
        // interface the daemon calls it unspecialised, through runtime metadata and value witnesses
        // at every event (2.5 % of all instructions on 2,000 small files). Cross-module optimisation lets
        // SpoolDaemon specialise it. SpoolCore is not in the SpoolfetchKit product's closure.
        .target(name: "SpoolCore", dependencies: ["SpoolRequest", "SpoolScheduler"],
                swiftSettings: [.unsafeFlags(["-cross-module-optimization"])]),

        // Adapters.
        .target(name: "SpoolStore",
                dependencies: ["CLinux", "SpoolRequest",
                               .product(name: "Crypto", package: "swift-crypto")]),
        .target(name: "SpoolWatcher",
                dependencies: ["CInotifyTools", "CLinux"]),
        .target(name: "SpoolTransfer",
                dependencies: ["CCurl", "CLinux", "SpoolRequest",
                               .product(name: "Crypto", package: "swift-crypto")]),
        .target(name: "SpoolNetwork",
                dependencies: ["CNetlink"]),
        .target(name: "SpoolProcess",
                dependencies: [.product(name: "Logging", package: "swift-log")]),
        .target(name: "SpoolMetrics",
                dependencies: [.product(name: "CoreMetrics", package: "swift-metrics"),
                               .product(name: "Prometheus", package: "swift-prometheus")]),

        .target(name: "SpoolConfiguration",
                dependencies: ["SpoolRequest", "SpoolScheduler",
                               .product(name: "Logging", package: "swift-log")]),

        // The engine that wires them, the client beside it, and the thin executable.
        .target(name: "SpoolDaemon",
                dependencies: ["SpoolCore", "SpoolRequest", "SpoolScheduler", "SpoolStore", "SpoolWatcher",
                               "SpoolTransfer", "SpoolNetwork", "SpoolProcess", "SpoolMetrics",
                               "SpoolConfiguration", "CLinux",
                               .product(name: "Logging", package: "swift-log")]),
        .target(name: "SpoolClient",
                dependencies: ["SpoolRequest", "SpoolStore", "SpoolWatcher", "SpoolMetrics"]),
        .target(name: "SpoolfetchKit",
                dependencies: ["SpoolClient", "SpoolStore"]),
        .executableTarget(name: "spoolfetch",
                          dependencies: ["SpoolDaemon", "SpoolClient", "SpoolfetchKit", "SpoolConfiguration", "SpoolStore",
                                         .product(name: "ArgumentParser", package: "swift-argument-parser")]),

        // Tests.
        .target(name: "SpoolTestSupport",
                dependencies: ["CLinux",
                               .product(name: "Crypto", package: "swift-crypto"),
                               .product(name: "NIOCore", package: "swift-nio"),
                               .product(name: "NIOPosix", package: "swift-nio"),
                               .product(name: "NIOHTTP1", package: "swift-nio")],
                path: "Tests/SpoolTestSupport"),
        .testTarget(name: "SpoolRequestTests", dependencies: ["SpoolRequest"]),
        .testTarget(name: "SpoolSchedulerTests", dependencies: ["SpoolScheduler"]),
        .testTarget(name: "SpoolCoreTests", dependencies: ["SpoolCore", "SpoolScheduler", "SpoolClient", "SpoolRequest", "SpoolStore"]),
        .testTarget(name: "SpoolStoreTests", dependencies: ["SpoolStore", "CLinux",
                                                            .product(name: "Crypto", package: "swift-crypto")]),
        .testTarget(name: "SpoolDaemonTests",
                    dependencies: ["SpoolDaemon", "SpoolCore", "SpoolConfiguration", "SpoolProcess", "SpoolStore", "SpoolTransfer",
                                   "SpoolTestSupport", "spoolfetch",
                                   .product(name: "Logging", package: "swift-log")]),
        .testTarget(name: "SpoolConfigurationTests", dependencies: ["SpoolConfiguration"]),
        .testTarget(name: "SpoolClientTests", dependencies: ["SpoolClient", "SpoolRequest", "SpoolStore"]),
        .testTarget(name: "SpoolTransferTests", dependencies: ["SpoolTransfer", "SpoolRequest", "SpoolTestSupport"]),
        .testTarget(name: "SpoolNetworkTests", dependencies: ["SpoolNetwork", "CNetlink"]),
        .testTarget(name: "SpoolWatcherTests", dependencies: ["SpoolWatcher"]),
        .testTarget(name: "EndToEndTests",
                    dependencies: ["SpoolTestSupport", "spoolfetch", "SpoolfetchKit"]),
    ],
    swiftLanguageModes: [.v6]
)
