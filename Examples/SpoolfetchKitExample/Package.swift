// swift-tools-version: 6.0
import PackageDescription

// A program that hands a download to the spoolfetch daemon and waits for its ending through
// SpoolfetchKit, resuming after a restart from the cursor it stored. It depends on the
// repository's root package by path; a project of yours would name its URL and a version.
let package = Package(
    name: "SpoolfetchKitExample",
    platforms: [.macOS(.v13)],
    dependencies: [
        .package(name: "spoolfetch", path: "../.."),
    ],
    targets: [
        .executableTarget(name: "fetch-and-wait",
                          dependencies: [.product(name: "SpoolfetchKit", package: "spoolfetch")]),
    ],
    swiftLanguageModes: [.v6]
)
