// swift-tools-version:6.0
import PackageDescription

// How the three binaries a tunnel runs on are linked (docs/performance.md, "resident memory"): with lld,
// relative relocations packed (DT_RELR, glibc 2.36: a few KB where RELA's table was 0.7 MB, all of it read
// at start), and no symbols of their own exported (the Swift driver passes -export-dynamic: 4,000-8,600
// dynamic symbols whose tables every symbol lookup of the dynamic linker walks). Nothing loads into them
// that could use those symbols: a runtime library is C and binds only its own dependencies.
//
// The engine and the plane also lay their functions out in the order packaging/text-order/NAME.order
// lists them: the code a tunnel runs (up, handshakes, traffic both ways, status, down), as
// Scripts/text-order.sh measured it, first and together. The kernel maps executable pages 64 KB around
// each page touched, so that code scattered among code that never runs cost its neighbours' pages too.
// It takes effect where functions have sections of their own (Scripts/release-flags.sh, as installed);
// text.ld puts first the helpers Swift emits with no symbol, which no ordering file can name.
// SwiftPM does not see the file as an input: a changed order needs the binary removed to be relinked.
func tunnelLinking(order product: String? = nil) -> [LinkerSetting] {
    var flags = ["-use-ld=lld", "-Xlinker", "-z", "-Xlinker", "pack-relative-relocs", "-Xlinker", "--no-export-dynamic"]
    if let product {
        flags += ["-Xlinker", "--symbol-ordering-file=\(Context.packageDirectory)/packaging/text-order/\(product).order",
                  "-Xlinker", "--no-warn-symbol-ordering",
                  "-Xlinker", "-T", "-Xlinker", "\(Context.packageDirectory)/packaging/text-order/text.ld"]
    }
    return [.unsafeFlags(flags)]
}

let package = Package(
    name: "Tunnelgate",
    products: [
        .executable(name: "tunnelgate", targets: ["tunnelgate"]),
        .executable(name: "tunnelgate-plane", targets: ["tunnelgate-plane"]),
        .executable(name: "tunnelgate-on-demand", targets: ["tunnelgate-on-demand"]),
        .library(name: "TunnelgateSettings", targets: ["TunnelgateSettings"]),
        .library(name: "Engine", targets: ["Engine"]),
        .library(name: "Session", targets: ["Session"]),
        // The example packet runtime (docs/runtime-abi.md): a shared library tests and users load.
        .library(name: "TunnelgateExampleRuntime", type: .dynamic, targets: ["CExampleRuntime"]),
        // NetworkExtension's packet-tunnel API over the same engine (docs/networkextension.md), with `os`
        // (Logger, OSLog, os_log: what every provider logs with) in the same product.
        .library(name: "NetworkExtension", targets: ["NetworkExtension", "os"]),
        .library(name: "os", targets: ["os"]),
        .executable(name: "tunnelgate-provider-example", targets: ["tunnelgate-provider-example"]),
        .executable(name: "mehs-provider-example", targets: ["mehs-provider-example"]),
        .executable(name: "tunnelgate-manager-example", targets: ["tunnelgate-manager-example"]),
        .executable(name: "os-provider-example", targets: ["os-provider-example"]),
        .executable(name: "connections-provider-example", targets: ["connections-provider-example"]),
        // The lab: network-namespace end-to-end testing of any tunnel software (docs/lab.md).
        .executable(name: "tunnelgate-lab", targets: ["tunnelgate-lab"]),
        .library(name: "Lab", targets: ["Lab"]),
        // The CNI plugin: a container behind a tunnel of its own, chained after a network's main plugin (docs/cni.md).
        .executable(name: "tunnelgate-cni", targets: ["tunnelgate-cni"]),
    ],
    targets: [
        // System libraries, found by pkg-config (Debian: libmnl-dev, libnftnl-dev).
        .systemLibrary(name: "CMnl", pkgConfig: "libmnl",
                       providers: [.apt(["libmnl-dev"])]),
        .systemLibrary(name: "CNftnl", pkgConfig: "libnftnl",
                       providers: [.apt(["libnftnl-dev"])]),
        .systemLibrary(name: "CSodium", pkgConfig: "libsodium",
                       providers: [.apt(["libsodium-dev"])]),
        // sd-bus (libsystemd): the D-Bus client that talks to systemd-resolved (docs/dns.md).
        .systemLibrary(name: "CSystemd", pkgConfig: "libsystemd",
                       providers: [.apt(["libsystemd-dev"])]),
        // OpenSSL 3 (Debian: libssl-dev): TLS for a provider's own connections (createTCPConnection).
        .systemLibrary(name: "COpenSSL", pkgConfig: "openssl",
                       providers: [.apt(["libssl-dev"])]),
        // The TLS client over a non-blocking socket (server name, verification against the trust store).
        .target(name: "CTunnelgateTLS", dependencies: ["COpenSSL"]),
        // The Internet checksum's loop (and a copy fused with it), where the carry flag can be used.
        .target(name: "CInternetChecksum"),
        // The public C header of the runtime ABI (tunnelgate_runtime.h).
        .target(name: "CTunnelgateRuntime"),
        // WireGuard's transport AEAD on OpenSSL's ChaCha20 and Poly1305 (libssl-dev): about twice libsodium
        // 1.0.18's on this CPU. Their objects are linked in from the static libcrypto (36 KB) rather than
        // libcrypto.so mapped, whose loading costs every process 1.4-3.3 MB resident (docs/performance.md).
        .target(name: "CTransportAEAD", linkerSettings: [.linkedLibrary(":libcrypto.a")]),
        // The example runtime: IP packets in UDP, sealed with XChaCha20-Poly1305 (libsodium).
        .target(name: "CExampleRuntime", dependencies: ["CTunnelgateRuntime", "CSodium"]),
        // The kernel macros, ioctls and glibc-only calls Swift cannot import.
        .target(name: "CTunnelgateShims"),

        // Every libc call passes through here: Errno, FileDescriptor, EINTR retry.
        .target(name: "LinuxSystem", dependencies: ["CTunnelgateShims"]),
        // Pure Swift: addresses, prefixes, the settings model, JSON, validation, route arithmetic.
        .target(name: "TunnelgateSettings"),
        // rtnetlink over libmnl: links, addresses, routes, rules; batched, every ack checked.
        .target(name: "Netlink", dependencies: ["CMnl", "LinuxSystem", "TunnelgateSettings"]),
        // nftables over libnftnl: one inet table per tunnel, one atomic batch per change.
        .target(name: "Nftables", dependencies: ["CNftnl", "CMnl", "Netlink", "LinuxSystem", "TunnelgateSettings"]),
        // The TUN device, its virtio_net_hdr, and the writer of complete IP packets to it.
        .target(name: "TUN", dependencies: ["CInternetChecksum", "LinuxSystem"]),
        // What packet runtimes depend on: the runtime protocol, its context, state, errors and counters.
        .target(name: "RuntimeABI", dependencies: ["TUN", "LinuxSystem", "TunnelgateSettings"]),
        // The engine: plan -> journal -> apply -> verify -> repair -> teardown of kernel state (netlink,
        // nftables, DNS, sysctls), the state directory, records and reports. Kernel state only.
        .target(name: "Engine", dependencies: ["Netlink", "Nftables", "DNSConfig", "TUN", "RuntimeABI", "LinuxSystem", "TunnelgateSettings"]),
        // DNS from NEDNSSettings: resolv.conf backends (namespace, host), systemd-resolved over D-Bus, split-DNS forwarder.
        .target(name: "DNSConfig", dependencies: ["CSystemd", "LinuxSystem", "TunnelgateSettings"]),
        // Packet runtimes hosted behind the callback C ABI: dlopen, packet flow, backpressure, lifecycle;
        // MeshGuard's tunnel ABI (libsodium: the node's Ed25519 identity from its seed, for its mesh address).
        .target(name: "Runtimes", dependencies: ["RuntimeABI", "TUN", "CTunnelgateRuntime", "CSodium", "LinuxSystem", "TunnelgateSettings"]),
        // The built-in userspace WireGuard: Noise_IKpsk2 over libsodium, timers, cryptokey routing, UAPI.
        .target(name: "WireGuard", dependencies: ["CSodium", "CTransportAEAD", "RuntimeABI", "TUN", "LinuxSystem", "TunnelgateSettings"]),
        // The packet plane's seccomp allow-list (libseccomp, Debian's libseccomp-dev).
        .target(name: "CPlaneSeccomp", linkerSettings: [.linkedLibrary("seccomp")]),
        // The engine–plane channel: messages and their framing over a SOCK_SEQPACKET pair; a plane's lock-down.
        .target(name: "PlaneProtocol", dependencies: ["RuntimeABI", "CPlaneSeccomp", "LinuxSystem", "TunnelgateSettings"]),
        // The packet plane: the unprivileged, sandboxed process that hosts a tunnel's runtime and moves its packets.
        .target(name: "PacketPlane", dependencies: ["PlaneProtocol", "Runtimes", "WireGuard", "RuntimeABI", "TUN",
                                                    "LinuxSystem", "TunnelgateSettings"]),
        // A tunnel session: its lifecycle (NEVPNStatus), event loop, monitor and repair, control server and
        // carrier-path check, over the engine. The CLI and the NetworkExtension host both drive it.
        .target(name: "Session", dependencies: ["Engine", "DNSConfig", "PlaneProtocol", "RuntimeABI", "TUN", "Netlink", "Nftables", "LinuxSystem", "TunnelgateSettings"]),
        // `tunnelgate metrics`: the Prometheus text-format endpoint over the published state (Engine's reports).
        .target(name: "Metrics", dependencies: ["Engine", "LinuxSystem", "TunnelgateSettings"]),
        .executableTarget(name: "tunnelgate", dependencies: ["Session", "Engine", "Metrics", "Runtimes", "WireGuard", "TunnelgateSettings", "TunnelgateSecrets"],
                          linkerSettings: tunnelLinking(order: "tunnelgate")),
        // The packet plane's executable, which the engine starts into the plane's sandbox: the runtimes,
        // the TUN and the channel, and neither Foundation nor the engine's modules (docs/architecture.md).
        .executableTarget(name: "tunnelgate-plane", dependencies: ["PacketPlane", "LinuxSystem"],
                          linkerSettings: tunnelLinking(order: "tunnelgate-plane")),
        // The on-demand watcher, which `tunnelgate on-demand` becomes: it links NetworkExtension (and so
        // Foundation), which tunnelgate itself, the engine of every tunnel, therefore does not.
        .executableTarget(name: "tunnelgate-on-demand", dependencies: ["NetworkExtension", "Session", "LinuxSystem"],
                          linkerSettings: tunnelLinking()),
        // `import os` / `import os.log` on Linux: the Swift module os (Logger, OSLog, os_log, privacy
        // interpolations; one line per message on standard error) over a Clang module also named os
        // (COSLog's module map), which gives it the submodule `log` that `import os.log` names.
        .target(name: "COSLog"),
        .target(name: "os", dependencies: ["COSLog", "LinuxSystem", "TunnelgateSettings"]),
        // Named secrets kept root-only (0600 files in a 0700 directory, read into secure memory): what
        // NEVPNProtocol.passwordReference/identityReference name. No Foundation: the CLI uses it too.
        .target(name: "TunnelgateSecrets", dependencies: ["LinuxSystem"]),
        // NEPacketTunnelProvider & co. with Apple's names; setTunnelNetworkSettings drives Engine.up.
        .target(name: "NetworkExtension", dependencies: ["CTunnelgateTLS", "Session", "Engine", "DNSConfig", "Netlink", "Nftables", "PlaneProtocol", "RuntimeABI", "TUN", "LinuxSystem", "TunnelgateSettings", "TunnelgateSecrets"]),
        // A host for a provider class, with the seed's PacketTunnelProvider compiled beside an instrumented one.
        .executableTarget(name: "tunnelgate-provider-example", dependencies: ["NetworkExtension"],
                          path: "Examples/tunnelgate-provider-example"),
        // The MEHS C names (shared/seeds/000), implemented on Linux by the example runtime's exports.
        .target(name: "MEHSClient", dependencies: ["CExampleRuntime"]),
        // The MEHS embedding guide's provider, compiled on Linux against NetworkExtension and MEHSClient.
        .executableTarget(name: "mehs-provider-example", dependencies: ["NetworkExtension", "MEHSClient"],
                          path: "Examples/mehs-provider-example",
                          // The guide's code is Swift 5, as an iOS extension's would be.
                          swiftSettings: [.swiftLanguageMode(.v5)]),
        // The manager side (seeds/003's VPNManager) as a command: start, status, message, stop, watch.
        .executableTarget(name: "tunnelgate-manager-example", dependencies: ["NetworkExtension"],
                          path: "Examples/tunnelgate-manager-example"),

        // A provider as iOS code writes one: os.log's Logger and os_log, protocolConfiguration.
        .executableTarget(name: "os-provider-example", dependencies: ["NetworkExtension", "os"],
                          path: "Examples/os-provider-example"),

        // A provider reaching its servers over createTCPConnection (TLS) and createUDPSession, watched with KVO.
        .executableTarget(name: "connections-provider-example", dependencies: ["NetworkExtension"],
                          path: "Examples/connections-provider-example"),

        // The lab: topologies, the builder, impairments, leak counters, snapshots, results (docs/lab.md).
        .target(name: "Lab", dependencies: ["Netlink", "Nftables", "LinuxSystem", "TunnelgateSettings"]),
        .executableTarget(name: "tunnelgate-lab", dependencies: ["Lab", "Netlink", "LinuxSystem", "TunnelgateSettings"]),

        // CNI: the specification's types (versions, environment, network configuration, results, errors) and
        // the plugin's ADD/DEL/CHECK over `tunnelgate up/down/status`, with its state directory.
        .target(name: "CNI", dependencies: ["LinuxSystem", "TunnelgateSettings"]),
        .executableTarget(name: "tunnelgate-cni", dependencies: ["CNI", "LinuxSystem"]),

        // What the tests share: a private network namespace per test.
        .target(name: "TunnelgateTestSupport", dependencies: ["LinuxSystem"], path: "Tests/Support"),

        .testTarget(name: "LinuxSystemTests", dependencies: ["LinuxSystem"]),
        .testTarget(name: "TunnelgateSettingsTests", dependencies: ["TunnelgateSettings"]),
        .testTarget(name: "NetlinkTests", dependencies: ["Netlink", "LinuxSystem", "TunnelgateTestSupport"]),
        .testTarget(name: "DNSConfigTests", dependencies: ["DNSConfig", "CSystemd", "LinuxSystem"]),
        .testTarget(name: "NftablesTests", dependencies: ["Nftables", "LinuxSystem", "TunnelgateTestSupport"]),
        .testTarget(name: "EngineTests", dependencies: ["Engine", "Session", "Nftables", "Netlink", "TunnelgateTestSupport"]),
        .testTarget(name: "NetworkExtensionTests", dependencies: ["NetworkExtension", "os", "TunnelgateSecrets", "LinuxSystem", "TunnelgateSettings"]),
        .testTarget(name: "LabTests", dependencies: ["Lab", "TunnelgateSettings"]),
        .testTarget(name: "MetricsTests", dependencies: ["Metrics", "Engine", "LinuxSystem", "TunnelgateSettings"]),
        .testTarget(name: "CNITests", dependencies: ["CNI", "TunnelgateSettings"]),
        .testTarget(name: "WireGuardTests", dependencies: ["WireGuard", "CTransportAEAD", "RuntimeABI", "TUN", "LinuxSystem", "TunnelgateSettings", "TunnelgateTestSupport"]),
        .testTarget(name: "PacketPlaneTests", dependencies: ["PacketPlane", "PlaneProtocol", "RuntimeABI", "TUN", "TunnelgateSettings", "TunnelgateTestSupport"]),
    ]
)
