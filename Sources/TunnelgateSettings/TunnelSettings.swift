/// The settings of one tunnel, with the names and meanings of
/// NetworkExtension's NEPacketTunnelNetworkSettings, plus what Linux needs
/// that iOS decides by itself (interface name, carrier endpoints, runtime).
///
/// This is the model every format is translated to, each by a pure function:
/// a JSON file (`TunnelSettings.parse(json:)`), a wg-quick file
/// (`WgQuickConfig.parse`) and NetworkExtension's settings objects
/// (`NETunnelNetworkSettings.tunnelgateSettings`). The rules the values must
/// satisfy are the model's, `validate()`, which each translator calls on what
/// it built: what a translator returns has passed it. Settings built in code
/// are checked with `validate()` as well.
public struct TunnelSettings: Sendable, Equatable {
    /// The TUN interface name (`tg0` by default). Also the tunnel's name for
    /// `tunnelgate down`, `status` and the state directory.
    public var name: String
    /// NEPacketTunnelNetworkSettings.tunnelRemoteAddress: the server's IP
    /// address or host name. Always a carrier endpoint.
    public var tunnelRemoteAddress: String
    /// NEPacketTunnelNetworkSettings.mtu; nil means the default (1500). The
    /// WireGuard runtime's default, 1420, is set here by the translators.
    public var mtu: Int?
    public var ipv4Settings: IPv4Settings?
    public var ipv6Settings: IPv6Settings?
    public var dnsSettings: DNSSettings?
    /// NEVPNProtocol.includeAllNetworks (the kill switch; enforced by the nftables layer).
    public var includeAllNetworks: Bool
    /// NEVPNProtocol.excludeLocalNetworks.
    public var excludeLocalNetworks: Bool
    /// The tunnel's control and data servers, kept off the tunnel. Includes
    /// `tunnelRemoteAddress` whether or not the file lists it (except a wg-quick
    /// file's placeholder when no peer has an endpoint), and every WireGuard
    /// peer's endpoint.
    public var carrierEndpoints: [CarrierEndpoint]
    public var runtime: RuntimeSettings
    /// Gateway mode: other hosts or namespaces routed through this one use the tunnel.
    public var forwarding: ForwardingSettings?
    /// What happens when the tunnel's packet plane fails (crashes, is killed, hangs, garbles its
    /// channel): nil is `never`, the tunnel fails (a kill switch stays closed).
    public var restart: RestartSettings?
    /// `ipv4Settings.addresses[i]` was written `"auto"`: this node's mesh
    /// IPv4, derived from its MeshGuard identity (mesh runtime only). Until
    /// `resolvingMeshAddress` fills it in, that entry is 0.0.0.0 and the
    /// settings cannot be planned.
    public var meshAddressIndex: Int?
    /// A NetworkExtension provider's `proxySettings`, as the files the engine writes (`ProxyFiles`);
    /// not part of a configuration file.
    public var proxy: ProxyFiles?

    public static let defaultName = "tg0"
    public static let defaultMTU = 1500
    public static let mtuRange = 576...65535
    public static let minimumIPv6MTU = 1280

    public var effectiveMTU: Int { mtu ?? Self.defaultMTU }

    public init(name: String = defaultName, tunnelRemoteAddress: String, mtu: Int? = nil,
                ipv4Settings: IPv4Settings? = nil, ipv6Settings: IPv6Settings? = nil,
                dnsSettings: DNSSettings? = nil, includeAllNetworks: Bool = false,
                excludeLocalNetworks: Bool = false, carrierEndpoints: [CarrierEndpoint] = [],
                runtime: RuntimeSettings = .none, forwarding: ForwardingSettings? = nil,
                restart: RestartSettings? = nil, meshAddressIndex: Int? = nil) {
        self.name = name
        self.tunnelRemoteAddress = tunnelRemoteAddress
        self.mtu = mtu
        self.ipv4Settings = ipv4Settings
        self.ipv6Settings = ipv6Settings
        self.dnsSettings = dnsSettings
        self.includeAllNetworks = includeAllNetworks
        self.excludeLocalNetworks = excludeLocalNetworks
        self.carrierEndpoints = carrierEndpoints
        self.runtime = runtime
        self.forwarding = forwarding
        self.restart = restart
        self.meshAddressIndex = meshAddressIndex
    }
}

/// The packet plane's restart policy, as systemd's `Restart=` names it: `never` (the default), or
/// `onFailure`: a plane that fails is started again with the same TUN, after a pause that doubles from
/// half a second up to ten, at most `attempts` times in a row (a plane that ran a minute resets the count).
/// Meanwhile the tunnel is reasserting and the kill switch holds.
public struct RestartSettings: Sendable, Equatable {
    public enum Policy: String, Sendable, CaseIterable {
        case never
        case onFailure = "on-failure"
    }
    public var policy: Policy
    public var attempts: Int

    public static let defaultAttempts = 5
    public static let attemptsRange = 1...100

    public init(policy: Policy, attempts: Int = defaultAttempts) {
        self.policy = policy
        self.attempts = attempts
    }

    /// `never`, `on-failure` or `on-failure:N` (`tunnelgate up --restart`); nil otherwise, and
    /// `problem(_:)` says why.
    public static func parse(_ text: String) -> RestartSettings? {
        problem(text) == nil ? parsed(text) : nil
    }

    /// Why `text` is not a restart policy; nil when it is one.
    public static func problem(_ text: String) -> String? {
        let parts = text.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false)
        guard let policy = Policy(rawValue: String(parts[0])) else {
            return "'\(text)' is not a restart policy (never, on-failure or on-failure:ATTEMPTS)"
        }
        if parts.count == 2, policy != .onFailure || Int(parts[1]).map({ !attemptsRange.contains($0) }) ?? true {
            return "'\(text)': the attempts of on-failure are a number from \(attemptsRange.lowerBound) to \(attemptsRange.upperBound)"
        }
        return nil
    }

    private static func parsed(_ text: String) -> RestartSettings? {
        let parts = text.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false)
        guard let policy = Policy(rawValue: String(parts[0])) else { return nil }
        return RestartSettings(policy: policy, attempts: parts.count == 2 ? Int(parts[1]) ?? defaultAttempts : defaultAttempts)
    }
}

extension TunnelSettings {
    /// The key path of the `"auto"` address, for messages.
    public var meshAddressPath: String? { meshAddressIndex.map { "ipv4Settings.addresses[\($0)]" } }

    /// The settings with the node's own mesh address in place of `"auto"`.
    public func resolvingMeshAddress(_ address: IPv4Address) throws(ConfigurationError) -> TunnelSettings {
        guard let i = meshAddressIndex, var v4 = ipv4Settings else { return self }
        if let j = v4.addresses.indices.first(where: { $0 != i && v4.addresses[$0] == address }) {
            throw ConfigurationError([ConfigProblem(path: "ipv4Settings.addresses[\(j)]",
                                                    reason: "\(address) is also this node's mesh address ('auto' at [\(i)])")])
        }
        v4.addresses[i] = address
        var s = self
        s.ipv4Settings = v4
        s.meshAddressIndex = nil
        return s
    }
}

/// Gateway mode (no NetworkExtension equivalent): packets from `sources`
/// that this host forwards go through the tunnel like its own, masqueraded
/// behind the tunnel's address unless `masquerade` is false.
public struct ForwardingSettings: Sendable, Equatable {
    public var sources: [IPPrefix]
    public var masquerade: Bool

    public init(sources: [IPPrefix], masquerade: Bool = true) {
        self.sources = sources
        self.masquerade = masquerade
    }
}

/// NEIPv4Settings.
public struct IPv4Settings: Sendable, Equatable {
    public var addresses: [IPv4Address]
    public var subnetMasks: [IPv4Address]
    public var includedRoutes: [Route]
    public var excludedRoutes: [Route]

    public init(addresses: [IPv4Address], subnetMasks: [IPv4Address],
                includedRoutes: [Route] = [], excludedRoutes: [Route] = []) {
        self.addresses = addresses
        self.subnetMasks = subnetMasks
        self.includedRoutes = includedRoutes
        self.excludedRoutes = excludedRoutes
    }

    /// The addresses with their prefix lengths (masks are validated contiguous).
    public var interfaceAddresses: [IPPrefix] {
        zip(addresses, subnetMasks).map { IPPrefix(address: .v4($0), length: $1.maskLength!)! }
    }
}

/// NEIPv6Settings.
public struct IPv6Settings: Sendable, Equatable {
    public var addresses: [IPv6Address]
    public var networkPrefixLengths: [Int]
    public var includedRoutes: [Route]
    public var excludedRoutes: [Route]

    public init(addresses: [IPv6Address], networkPrefixLengths: [Int],
                includedRoutes: [Route] = [], excludedRoutes: [Route] = []) {
        self.addresses = addresses
        self.networkPrefixLengths = networkPrefixLengths
        self.includedRoutes = includedRoutes
        self.excludedRoutes = excludedRoutes
    }

    public var interfaceAddresses: [IPPrefix] {
        zip(addresses, networkPrefixLengths).map { IPPrefix(address: .v6($0), length: $1)! }
    }
}

/// NEIPv4Route / NEIPv6Route: a destination prefix and an optional gateway.
public struct Route: Sendable, Hashable, CustomStringConvertible {
    public var destination: IPPrefix
    public var gateway: IPAddress?

    public init(destination: IPPrefix, gateway: IPAddress? = nil) {
        self.destination = destination
        self.gateway = gateway
    }

    /// NEIPv4Route.default() / NEIPv6Route.default().
    public static func `default`(_ family: IPFamily) -> Route {
        switch family {
        case .ipv4: Route(destination: IPPrefix("0.0.0.0/0")!)
        case .ipv6: Route(destination: IPPrefix("::/0")!)
        }
    }

    public var description: String {
        gateway.map { "\(destination) via \($0)" } ?? destination.description
    }
}

/// NEDNSSettings. Parsed and validated; applied by the DNS layer.
public struct DNSSettings: Sendable, Equatable {
    public var servers: [IPAddress]
    public var searchDomains: [String]
    public var matchDomains: [String]?
    public var matchDomainsNoSearch: Bool
    public var domainName: String?

    public init(servers: [IPAddress], searchDomains: [String] = [], matchDomains: [String]? = nil,
                matchDomainsNoSearch: Bool = false, domainName: String? = nil) {
        self.servers = servers
        self.searchDomains = searchDomains
        self.matchDomains = matchDomains
        self.matchDomainsNoSearch = matchDomainsNoSearch
        self.domainName = domainName
    }
}

/// A server the tunnel's runtime talks to over the physical network: an IP
/// address or a host name, with an optional port and transport. Only the
/// runtime's own sockets (its carrier identity) reach it outside the tunnel,
/// and only at that port and transport when they are given.
public struct CarrierEndpoint: Sendable, Hashable, CustomStringConvertible {
    public enum Host: Sendable, Hashable {
        case address(IPAddress)
        case name(String)
    }
    public var host: Host
    public var port: UInt16?
    /// nil: UDP and TCP when a port is given, any protocol without one.
    public var transport: CarrierTransport?
    /// Where the configuration named it (`carrierEndpoints[2]`,
    /// `tunnelRemoteAddress`), for error messages. Not part of equality.
    public var keyPath: String

    public init(host: Host, port: UInt16? = nil, transport: CarrierTransport? = nil, keyPath: String = "") {
        self.host = host
        self.port = port
        self.transport = transport
        self.keyPath = keyPath
    }

    public static func == (a: Self, b: Self) -> Bool { a.host == b.host && a.port == b.port && a.transport == b.transport }
    public func hash(into hasher: inout Hasher) { hasher.combine(host); hasher.combine(port); hasher.combine(transport) }

    /// True when this endpoint lets through everything `other` does (same host; no port, or the same
    /// port with no transport or the same one).
    public func covers(_ other: CarrierEndpoint) -> Bool {
        host == other.host && (port == nil || (port == other.port && (transport == nil || transport == other.transport)))
    }

    public var description: String {
        let h: String
        switch host {
        case .address(.v6(let a)) where port != nil: h = "[\(a)]"
        case .address(let a): h = a.description
        case .name(let n): h = n
        }
        return port.map { "\(h):\($0)" } ?? h
    }
}

/// Which packet runtime the tunnel hosts.
public enum RuntimeSettings: Sendable, Equatable {
    /// No runtime: packets read from the TUN are counted and dropped.
    case none
    /// A shared library behind the callback C ABI (tunnelgate_runtime.h).
    case callback(CallbackRuntimeSettings)
    /// A MeshGuard mesh (libmeshguard-ffi.so) whose data tunnels carry the packets.
    case mesh(MeshRuntimeSettings)
    /// The built-in userspace WireGuard (a wg-quick file, or `{"kind": "wireguard", …}`).
    case wireguard(WireGuardSettings)
}

/// Where a callback runtime's packets flow.
public enum PacketPath: String, Sendable, Equatable, Codable {
    /// Tunnelgate reads the TUN and calls packet_in; the writer callback writes to the TUN.
    case callback
    /// The runtime gets the TUN descriptor (`--tun-fd N`) and reads and writes it itself.
    case fd
}

/// `{"kind": "callback", …}`: a runtime library and how to bind and start it.
public struct CallbackRuntimeSettings: Sendable, Equatable, Codable {
    /// Symbol names, defaulting to tunnelgate_runtime_start … _app_message.
    public struct Symbols: Sendable, Equatable, Codable {
        public var start = "tunnelgate_runtime_start"
        public var packetIn = "tunnelgate_runtime_packet_in"
        /// Optional: used when the library has it, else packets go in one by one through packetIn.
        /// nil when the configuration says "packetInBatch": null (never use one).
        public var packetInBatch: String? = "tunnelgate_runtime_packet_in_batch"
        public var status = "tunnelgate_runtime_status"
        public var stop = "tunnelgate_runtime_stop"
        /// nil when the configuration says "appMessage": null (the runtime has none).
        public var appMessage: String? = "tunnelgate_runtime_app_message"
        public init() {}
    }

    /// The runtime's values for the ABI's result codes, when they differ.
    public struct ResultCodes: Sendable, Equatable, Codable {
        public var ok: Int32 = 0
        public var queueFull: Int32 = 1
        public var invalidState: Int32 = 2
        public var invalidArgument: Int32 = 3
        public var bufferTooSmall: Int32 = 4
        public var failed: Int32 = 5
        public init() {}
    }

    public enum Secret: Sendable, Equatable, Codable {
        case none
        /// A file readable by its owner only. (No environment variable: `secretEnvironment` is refused.)
        case file(String)
    }

    public var library: String
    public var symbols = Symbols()
    public var arguments: [String] = []
    public var secret: Secret = .none
    public var packetPath: PacketPath = .callback
    public var resultCodes = ResultCodes()
    /// How long `up` waits for the runtime to report an interface.
    public var startTimeoutSeconds: Double = 30

    public init(library: String) { self.library = library }
}
