// swift-tools-version:6.0
// A provider written for Linux from scratch in NetworkExtension's style, in a package of its own that
// depends on Tunnelgate by path, as a user's package would (by URL) — see README.md.
import PackageDescription

let package = Package(
    name: "LinuxProviderPackage",
    dependencies: [
        .package(name: "Tunnelgate", path: "../.."),
    ],
    targets: [
        .executableTarget(name: "echo-provider", dependencies: [
            .product(name: "NetworkExtension", package: "Tunnelgate"),
        ]),
    ]
)
