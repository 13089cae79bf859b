extension TunnelSettings {
    /// Checks every rule a tunnel's settings must satisfy, whatever they were written in: addresses
    /// and masks, MTU (with IPv6's minimum), routes, DNS, carriers, forwarding and the runtime's own
    /// rules (the mesh MTU limit, the `"auto"` address, WireGuard's peers, a callback runtime's
    /// symbols and codes). Throws every problem, named by its key path with NetworkExtension's and
    /// the JSON format's names (`ipv4Settings.subnetMasks[0]`), in the order of the model's keys.
    ///
    /// The translators (`TunnelSettings.parse(json:)`, `WgQuickConfig`, the NetworkExtension
    /// conversion) call this same validation on the model they built, and name its problems in
    /// their own terms (a file's line, a property).
    public func validate() throws(ConfigurationError) {
        _ = try SettingsTranslation().finish(self)
    }
}

/// One walk over a `TunnelSettings`, collecting every broken rule with its model key path.
///
/// A value the translator could not read (`refused`, where a placeholder stands) is not checked
/// and is not compared with the others, but still counts (`1 mask for 2 addresses`).
struct SettingsValidator {
    let settings: TunnelSettings
    /// Model key paths a translator refused; everything at or below them is skipped.
    let refused: Set<String>
    /// How a message names another part of the configuration (`runtime.peers[1]`, or a wg-quick
    /// file's `the [Peer] on line 3`).
    let refer: (String) -> String
    private(set) var findings: [SettingsTranslation.Finding] = []

    init(_ settings: TunnelSettings, refused: Set<String> = [], refer: @escaping (String) -> String = { $0 }) {
        self.settings = settings
        self.refused = refused
        self.refer = refer
    }

    /// True when `path` or a key path enclosing it was refused.
    func isRefused(_ path: String) -> Bool {
        if refused.isEmpty { return false }
        var p = Substring(path)
        while true {
            if refused.contains(String(p)) { return true }
            guard let cut = p.lastIndex(where: { $0 == "." || $0 == "[" }) else { return false }
            p = p[..<cut]
        }
    }

    mutating func problem(_ path: String, _ reason: String) {
        findings.append(.init(path: path, reason: reason))
    }

    static func plural(_ n: Int, _ one: String, _ many: String) -> String { "\(n) \(n == 1 ? one : many)" }

    mutating func run() -> [SettingsTranslation.Finding] {
        let s = settings
        if !isRefused("name"), let reason = InterfaceName.problem(s.name) { problem("name", reason) }
        if !isRefused("tunnelRemoteAddress"), IPAddress(s.tunnelRemoteAddress) == nil,
           let reason = HostName.problem(s.tunnelRemoteAddress) {
            problem("tunnelRemoteAddress", "\(quoted(s.tunnelRemoteAddress)) is neither an IP address nor a valid host name (\(reason))")
        }
        let mtu = isRefused("mtu") ? nil : s.mtu
        if let mtu, !TunnelSettings.mtuRange.contains(mtu) {
            problem("mtu", "\(mtu) is outside \(TunnelSettings.mtuRange.lowerBound)–\(TunnelSettings.mtuRange.upperBound)")
        }
        if let v4 = s.ipv4Settings, !isRefused("ipv4Settings") { checkIPv4(v4) }
        if let v6 = s.ipv6Settings, !isRefused("ipv6Settings") { checkIPv6(v6) }
        if let mtu, s.ipv6Settings != nil, TunnelSettings.mtuRange.contains(mtu), mtu < TunnelSettings.minimumIPv6MTU {
            problem("mtu", "\(mtu) is below \(TunnelSettings.minimumIPv6MTU), the minimum for IPv6 (ipv6Settings is configured)")
        }
        if let dns = s.dnsSettings, !isRefused("dnsSettings") { checkDNS(dns) }
        checkCarriers(s.carrierEndpoints)
        let runtimeKnown = !isRefused("runtime") && !isRefused("runtime.kind")
        if runtimeKnown {
            switch s.runtime {
            case .none: break
            case .callback(let c): checkCallback(c)
            case .mesh(let m):
                checkMesh(m)
                checkMeshMTU()
            case .wireguard(let w): checkWireGuard(w)
            }
        }
        if let i = s.meshAddressIndex {
            let path = "ipv4Settings.addresses[\(i)]"
            if s.ipv4Settings.map({ !$0.addresses.indices.contains(i) }) ?? true {
                problem("ipv4Settings.addresses", "the 'auto' address at [\(i)] is not among the addresses")
            } else if runtimeKnown, !isRefused(path) {
                if case .mesh = s.runtime {} else {
                    problem(path, "'auto' is this node's mesh address, derived from its MeshGuard identity: it needs runtime.kind mesh")
                }
            }
        }
        if let forwarding = s.forwarding, !isRefused("forwarding") { checkForwarding(forwarding) }
        if let restart = s.restart, !isRefused("restart.attempts"), !RestartSettings.attemptsRange.contains(restart.attempts) {
            problem("restart.attempts", "\(restart.attempts) is out of range (\(RestartSettings.attemptsRange.lowerBound)–\(RestartSettings.attemptsRange.upperBound))")
        }
        return findings
    }

    // MARK: Addresses and routes

    /// The indices of `values` to check: not refused, and not the `"auto"` address.
    func checked(_ count: Int, _ path: String, skipping skip: Int? = nil) -> [Int] {
        (0..<count).filter { $0 != skip && !isRefused("\(path)[\($0)]") }
    }

    mutating func checkIPv4(_ v4: IPv4Settings) {
        let path = "ipv4Settings"
        var seen: Set<IPv4Address> = []
        for i in checked(v4.addresses.count, "\(path).addresses", skipping: settings.meshAddressIndex) {
            let a = v4.addresses[i]
            let kind = a.isUnspecified ? "unspecified" : a.isMulticast ? "multicast" : a.isLoopback ? "loopback" : a.isBroadcast ? "broadcast" : nil
            if let kind { problem("\(path).addresses[\(i)]", "\(a) cannot be an interface address (\(kind))") }
            if !seen.insert(a).inserted { problem("\(path).addresses[\(i)]", "\(a) is listed twice") }
        }
        if v4.addresses.isEmpty, v4.includedRoutes.isEmpty, !isRefused("\(path).addresses") {
            problem("\(path).addresses", "empty (NEIPv4Settings needs at least one address, or includedRoutes to route IPv4 without one)")
        }
        for i in checked(v4.subnetMasks.count, "\(path).subnetMasks") where v4.subnetMasks[i].maskLength == nil {
            problem("\(path).subnetMasks[\(i)]", "\(v4.subnetMasks[i]) is not a contiguous mask")
        }
        if v4.addresses.count != v4.subnetMasks.count, !isRefused("\(path).addresses"), !isRefused("\(path).subnetMasks") {
            problem("\(path).subnetMasks", "\(Self.plural(v4.subnetMasks.count, "mask", "masks")) for \(Self.plural(v4.addresses.count, "address", "addresses")) (one mask per address)")
        }
        checkRoutes(v4.includedRoutes, "\(path).includedRoutes", family: .ipv4)
        checkRoutes(v4.excludedRoutes, "\(path).excludedRoutes", family: .ipv4)
    }

    mutating func checkIPv6(_ v6: IPv6Settings) {
        let path = "ipv6Settings"
        var seen: Set<IPv6Address> = []
        for i in checked(v6.addresses.count, "\(path).addresses") {
            let a = v6.addresses[i]
            let kind = a.isUnspecified ? "unspecified" : a.isMulticast ? "multicast" : a.isLoopback ? "loopback" : nil
            if let kind { problem("\(path).addresses[\(i)]", "\(a) cannot be an interface address (\(kind))") }
            if !seen.insert(a).inserted { problem("\(path).addresses[\(i)]", "\(a) is listed twice") }
        }
        if v6.addresses.isEmpty, v6.includedRoutes.isEmpty, !isRefused("\(path).addresses") {
            problem("\(path).addresses", "empty (NEIPv6Settings needs at least one address, or includedRoutes to route IPv6 without one)")
        }
        for i in checked(v6.networkPrefixLengths.count, "\(path).networkPrefixLengths") where !(0...128).contains(v6.networkPrefixLengths[i]) {
            problem("\(path).networkPrefixLengths[\(i)]", "prefix length \(v6.networkPrefixLengths[i]) is outside 0–128")
        }
        if v6.addresses.count != v6.networkPrefixLengths.count, !isRefused("\(path).addresses"), !isRefused("\(path).networkPrefixLengths") {
            problem("\(path).networkPrefixLengths", "\(Self.plural(v6.networkPrefixLengths.count, "prefix length", "prefix lengths")) for \(Self.plural(v6.addresses.count, "address", "addresses")) (one per address)")
        }
        checkRoutes(v6.includedRoutes, "\(path).includedRoutes", family: .ipv6)
        checkRoutes(v6.excludedRoutes, "\(path).excludedRoutes", family: .ipv6)
    }

    /// NEIPv4Route / NEIPv6Route: of the section's family, no host bits, a usable gateway, and a
    /// destination listed twice only with the same gateway.
    mutating func checkRoutes(_ routes: [Route], _ path: String, family: IPFamily) {
        let section = family == .ipv4 ? "ipv4Settings" : "ipv6Settings"
        var byDestination: [IPPrefix: Route] = [:]
        for i in checked(routes.count, path) {
            let route = routes[i], p = "\(path)[\(i)]"
            let destination = route.destination
            // A destination the translator could not make (no usable mask or length): only the gateway is checked.
            let hasDestination = !isRefused("\(p).destinationAddress")
            if hasDestination, destination.family != family {
                problem(p, "\(destination) is an \(destination.family) route in \(section)")
                continue
            }
            if let g = route.gateway, !isRefused("\(p).gatewayAddress"), g.family != family || g.isUnspecified || g.isMulticast {
                problem("\(p).gatewayAddress", "\(quoted(g.description)) is not a usable \(family) gateway address")
            }
            guard hasDestination else { continue }
            guard destination.isCanonical else {
                problem("\(p).destinationAddress", "\(destination) has host bits set (the network is \(destination.network))")
                continue
            }
            if let previous = byDestination[destination] {
                if previous.gateway != route.gateway { problem(p, "\(destination) is listed twice with different gateways") }
                continue
            }
            byDestination[destination] = route
        }
    }

    // MARK: DNS, carriers, forwarding

    mutating func checkDNS(_ dns: DNSSettings) {
        let path = "dnsSettings"
        for i in checked(dns.servers.count, "\(path).servers") where dns.servers[i].isUnspecified || dns.servers[i].isMulticast {
            problem("\(path).servers[\(i)]", "\(quoted(dns.servers[i].description)) is not a DNS server address")
        }
        if dns.servers.isEmpty, !isRefused("\(path).servers") {
            problem("\(path).servers", "empty (NEDNSSettings needs at least one server)")
        }
        checkDomains(dns.searchDomains, "\(path).searchDomains", allowEmpty: false)
        checkDomains(dns.matchDomains ?? [], "\(path).matchDomains", allowEmpty: true)
        if let name = dns.domainName, !isRefused("\(path).domainName"), let reason = HostName.problem(name) {
            problem("\(path).domainName", "\(quoted(name)) is not a domain (\(reason))")
        }
    }

    mutating func checkDomains(_ domains: [String], _ path: String, allowEmpty: Bool) {
        for i in checked(domains.count, path) {
            let d = domains[i]
            if d.isEmpty && allowEmpty { continue }
            if let reason = HostName.problem(d) { problem("\(path)[\(i)]", "\(quoted(d)) is not a domain (\(reason))") }
        }
    }

    /// Each carrier is named by where the configuration put it (its `keyPath`).
    mutating func checkCarriers(_ carriers: [CarrierEndpoint]) {
        var seen: [CarrierEndpoint] = []
        for (i, endpoint) in carriers.enumerated() {
            let path = endpoint.keyPath.isEmpty ? "carrierEndpoints[\(i)]" : endpoint.keyPath
            if isRefused(path) { continue }
            if case .name(let name) = endpoint.host, let reason = HostName.problem(name) {
                problem(path, "\(quoted(name)) is not a valid host name (\(reason))")
                continue
            }
            if seen.contains(endpoint) { problem(path, "\(quoted(endpoint.configurationText)) is listed twice") } else { seen.append(endpoint) }
        }
    }

    mutating func checkForwarding(_ forwarding: ForwardingSettings) {
        let path = "forwarding.sources"
        for i in checked(forwarding.sources.count, path) {
            let prefix = forwarding.sources[i]
            if !prefix.isCanonical {
                problem("\(path)[\(i)]", "\(prefix) has host bits set (the network is \(prefix.network))")
            } else if prefix.length == 0 {
                problem("\(path)[\(i)]", "\(prefix) would forward for every address; name the hosts' prefixes")
            }
        }
        if forwarding.sources.isEmpty, !isRefused(path) { problem(path, "empty (name at least one prefix)") }
    }

    // MARK: Runtimes

    static func seconds(_ value: Double) -> String {
        value.rounded() == value && abs(value) < 1e15 ? String(Int(value)) : String(value)
    }

    mutating func checkStartTimeout(_ seconds: Double) {
        if !isRefused("runtime.startTimeoutSeconds"), !(1...600).contains(seconds) {
            problem("runtime.startTimeoutSeconds", "\(Self.seconds(seconds)) is outside 1–600")
        }
    }

    static var resultCodeKeys: [(String, KeyPath<CallbackRuntimeSettings.ResultCodes, Int32>)] {
        [("ok", \.ok), ("queueFull", \.queueFull), ("invalidState", \.invalidState),
         ("invalidArgument", \.invalidArgument), ("bufferTooSmall", \.bufferTooSmall), ("failed", \.failed)]
    }

    mutating func checkCallback(_ c: CallbackRuntimeSettings) {
        if c.library.isEmpty, !isRefused("runtime.library") { problem("runtime.library", "empty") }
        let symbols: [(String, String?)] = [("start", c.symbols.start), ("packetIn", c.symbols.packetIn),
                                            ("packetInBatch", c.symbols.packetInBatch), ("status", c.symbols.status),
                                            ("stop", c.symbols.stop), ("appMessage", c.symbols.appMessage)]
        for (key, name) in symbols {
            guard let name, !isRefused("runtime.symbols.\(key)") else { continue }
            if name.isEmpty || !name.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_") }) {
                problem("runtime.symbols.\(key)", "\(quoted(name)) is not a C symbol name")
            }
        }
        if case .file(let file) = c.secret, !isRefused("runtime.secretFile"), !file.hasPrefix("/") {
            problem("runtime.secretFile", "\(quoted(file)) is not an absolute path")
        }
        // Every code needs a value of its own, or the host could not tell them apart. The problem is
        // named at a code moved off its default (the header's value), naming the other code, and
        // saying so when that one kept its default.
        let codes = c.resultCodes, defaults = CallbackRuntimeSettings.ResultCodes()
        let keys = Self.resultCodeKeys
        func moved(_ field: KeyPath<CallbackRuntimeSettings.ResultCodes, Int32>) -> Bool { codes[keyPath: field] != defaults[keyPath: field] }
        for (j, (key, field)) in keys.enumerated() {
            guard let (other, otherField) = keys[..<j].first(where: { codes[keyPath: $0.1] == codes[keyPath: field] }) else { continue }
            let (at, with, withField) = moved(field) ? (key, other, otherField) : (other, key, field)
            problem("runtime.resultCodes.\(at)", "\(codes[keyPath: field]) is also \(with)'s value"
                    + (moved(withField) ? "" : " (its default)") + "; every code needs a value of its own")
        }
        checkStartTimeout(c.startTimeoutSeconds)
    }

    mutating func checkMesh(_ m: MeshRuntimeSettings) {
        if m.library.isEmpty, !isRefused("runtime.library") { problem("runtime.library", "empty") }
        if !isRefused("runtime.identitySeedFile"), !m.identitySeedFile.hasPrefix("/") {
            problem("runtime.identitySeedFile", "\(quoted(m.identitySeedFile)) is not an absolute path")
        }
        if m.seeds.isEmpty, !isRefused("runtime.seeds") { problem("runtime.seeds", "empty (at least one seed peer is needed to join)") }
        // MeshGuard binds its own socket, in the unprivileged packet plane: a privileged port would fail at
        // start, after the kernel was touched.
        if (1..<1024).contains(m.listenPort), !isRefused("runtime.listenPort") {
            problem("runtime.listenPort", "\(m.listenPort) is below 1024, which the packet plane may not bind (MeshGuard opens its own socket there); use 1024–65535, or 0 for any")
        }
        for i in checked(m.seeds.count, "runtime.seeds") {
            let seed = m.seeds[i], p = "runtime.seeds[\(i)]"
            if seed.port == 0 { problem(p, "\(quoted(seed.description)) is not IP:port or host:port (port 1–65535)"); continue }
            guard IPv4Address(seed.host) == nil else { continue }
            let unbracketed = seed.host.hasPrefix("[") && seed.host.hasSuffix("]") ? String(seed.host.dropFirst().dropLast()) : seed.host
            if IPAddress(unbracketed) != nil {
                problem(p, "\(quoted(seed.description)): MeshGuard joins over IPv4; give an IPv4 address or a host name")
            } else if let reason = HostName.problem(seed.host) {
                problem(p, "\(quoted(seed.host)) is neither an IPv4 address nor a valid host name (\(reason))")
            }
        }
        if case .routes(let routes) = m.peers, !isRefused("runtime.peers") {
            var earlier: [MeshRuntimeSettings.PeerRoute] = []
            for i in checked(routes.count, "runtime.peers") {
                let route = routes[i], p = "runtime.peers[\(i)]"
                if earlier.contains(where: { $0.identity == route.identity }) { problem(p, "this identity is listed twice"); continue }
                var kept: [IPPrefix] = []
                for j in checked(route.prefixes.count, "\(p).prefixes") {
                    let prefix = route.prefixes[j], pp = "\(p).prefixes[\(j)]"
                    if !prefix.isCanonical { problem(pp, "\(quoted(prefix.description)) has host bits set (did you mean \(prefix.network)?)"); continue }
                    for other in earlier { for o in other.prefixes where o == prefix {
                        problem(pp, "\(prefix) is also routed to \(MeshRuntimeSettings.hex(other.identity).prefix(8))…")
                    } }
                    kept.append(prefix)
                }
                if route.prefixes.isEmpty, !isRefused("\(p).prefixes") { problem("\(p).prefixes", "no prefixes (give at least one, e.g. \"10.60.0.2/32\")") }
                earlier.append(.init(identity: route.identity, prefixes: kept))
            }
            if routes.isEmpty { problem("runtime.peers", "no peers (give identity → prefixes, or \"auto\")") }
        }
        if let n = m.keepaliveSeconds, !isRefused("runtime.keepaliveSeconds"), !(1...600).contains(n) {
            problem("runtime.keepaliveSeconds", "\(n) is outside 1–600")
        }
        checkStartTimeout(m.startTimeoutSeconds)
    }

    /// A mesh runtime carries at most 1,396 bytes per packet: the tunnel's MTU must be given and not
    /// above it (refused, never silently clamped).
    mutating func checkMeshMTU() {
        guard !isRefused("mtu") else { return }
        let limit = MeshRuntimeSettings.maximumMTU
        guard let mtu = settings.mtu else {
            problem("mtu", "missing: a mesh runtime needs \"mtu\" of at most \(limit) (MeshGuard's tunnel payload limit; the default 1500 is too large)")
            return
        }
        if mtu > limit {
            problem("mtu", "\(mtu) is above \(limit), MeshGuard's tunnel payload limit (runtime.kind mesh): use \(limit) or less")
        }
    }

    /// Each peer once (by public key); allowed IPs without host bits, each allowed for one peer only.
    mutating func checkWireGuard(_ w: WireGuardSettings) {
        var peerOfKey: [[UInt8]: Int] = [:]
        var peerOfPrefix: [IPPrefix: Int] = [:]
        for (i, peer) in w.peers.enumerated() where !isRefused("runtime.peers[\(i)]") {
            let p = "runtime.peers[\(i)]"
            // The same peer again: said once; its allowed IPs are that peer's, not compared with it.
            var repeated = false
            if !isRefused("\(p).publicKey") {
                if let first = peerOfKey[peer.publicKey] {
                    problem("\(p).publicKey", "the same peer as \(refer("runtime.peers[\(first)]"))")
                    repeated = true
                } else {
                    peerOfKey[peer.publicKey] = i
                }
            }
            for k in checked(peer.allowedIPs.count, "\(p).allowedIPs") {
                let prefix = peer.allowedIPs[k], pp = "\(p).allowedIPs[\(k)]"
                guard prefix.isCanonical else { problem(pp, "\(prefix) has host bits set (the network is \(prefix.network))"); continue }
                if repeated { continue }
                if let other = peerOfPrefix[prefix], other != i {
                    problem(pp, "\(prefix) is also allowed for \(refer("runtime.peers[\(other)]"))")
                } else {
                    peerOfPrefix[prefix] = i
                }
            }
        }
    }
}

extension CarrierEndpoint {
    /// The endpoint as a configuration writes it: `HOST[:PORT][/TRANSPORT]`.
    var configurationText: String { description + (transport.map { "/\($0.rawValue)" } ?? "") }
}
