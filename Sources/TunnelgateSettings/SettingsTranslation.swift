/// What a translator found while it turned its format (a JSON file, a wg-quick file,
/// NetworkExtension's settings objects) into a `TunnelSettings`: the problems of syntax and type,
/// each at the model key path it concerns, and the values it could not translate.
///
/// A value that could not be translated keeps its place in the model, held by a placeholder
/// (0.0.0.0, `::`, a default route, an empty string), so that indices and counts stay the source's
/// (`subnetMasks: 1 mask for 2 addresses` when the second address is not one): `refuse` records
/// the problem and the path, and validation skips what is at or below a refused path. `finish`
/// then runs the model's validation (`TunnelSettings.validate`'s rules, the same code) and reports
/// every problem, the translator's and the validation's, in the order of the model's keys.
///
/// Its parsers of single values from text are the ones every translator of text uses, so that a
/// bad address reads the same from a JSON file and from an NEIPv4Settings. The rules of the model
/// (interface addresses, masks, host bits, gateways, duplicates, MTU…) are not here: they are
/// `validate`'s.
public struct SettingsTranslation: Sendable {
    /// One problem, before it is named in the source's terms.
    struct Finding: Sendable {
        var path: String
        var reason: String
        /// An unknown key is reported before its object's other problems.
        var unknownKey = false
    }

    private(set) var findings: [Finding] = []
    /// The model key paths at which the translator left a placeholder (or found nothing to put).
    private(set) var refused: Set<String> = []

    public init() {}

    /// The problems found so far, at their model key paths, in the order found.
    public var problems: [ConfigProblem] { findings.map { ConfigProblem(path: $0.path, reason: $0.reason) } }

    /// The value at `path` could not be translated (or is missing): reported; a placeholder stands
    /// there, which validation skips.
    public mutating func refuse(_ path: String, _ reason: String) {
        findings.append(Finding(path: path, reason: reason))
        refused.insert(path)
    }

    /// A key the format does not know.
    mutating func unknownKey(_ path: String, _ reason: String) {
        findings.append(Finding(path: path, reason: reason, unknownKey: true))
    }

    /// Marks `path` as already refused (a problem the caller reported under another path).
    mutating func markRefused(_ path: String) { refused.insert(path) }

    /// Validates `settings` and returns them when neither the translation nor the validation found a
    /// problem. Otherwise throws every problem in the order of the model's keys, each path (and each
    /// carrier's `keyPath`) named by `name`: the identity for the model's own names, or the source's
    /// (`destinationSubnetMask`, a file's line).
    public func finish(_ settings: TunnelSettings,
                       naming name: @escaping (String) -> String = { $0 }) throws(ConfigurationError) -> TunnelSettings {
        // A placeholder without its problem would be returned as a value: a translator's bug.
        precondition(refused.isEmpty || !findings.isEmpty, "a value was refused without a problem saying why")
        var validator = SettingsValidator(settings, refused: refused, refer: name)
        let all = KeyOrder.sorted(findings + validator.run())
        guard all.isEmpty else {
            throw ConfigurationError(all.map { ConfigProblem(path: name($0.path), reason: $0.reason) })
        }
        var s = settings
        for i in s.carrierEndpoints.indices { s.carrierEndpoints[i].keyPath = name(s.carrierEndpoints[i].keyPath) }
        return s
    }

    // MARK: Placeholders

    /// Stand in for a value that could not be translated; never checked, never returned.
    static let placeholderIPv4 = IPv4Address(0)
    static let placeholderIPv6 = IPv6Address(high: 0, low: 0)
    static let placeholderAddress = IPAddress.v4(placeholderIPv4)
    static func placeholderRoute(_ family: IPFamily) -> Route { .default(family) }

    // MARK: Values from text

    /// NEIPv4Settings.addresses: each an IPv4 address, or `"auto"` (once: this node's mesh address,
    /// derived from its MeshGuard identity; 0.0.0.0 stands there until `resolvingMeshAddress`).
    public mutating func ipv4Addresses(_ texts: [String], at path: String) -> (addresses: [IPv4Address], meshAddressIndex: Int?) {
        ipv4Addresses(texts.map(Optional.some), at: path)
    }

    /// The same, where a nil element is one the caller refused already (a JSON value of the wrong type).
    mutating func ipv4Addresses(_ texts: [String?], at path: String) -> (addresses: [IPv4Address], meshAddressIndex: Int?) {
        var addresses: [IPv4Address] = []
        var mesh: Int?
        for (i, text) in texts.enumerated() {
            let p = "\(path)[\(i)]"
            addresses.append(Self.placeholderIPv4)
            guard let text else { markRefused(p); continue }
            if text == "auto" {
                if mesh != nil { refuse(p, "'auto' is listed twice") } else { mesh = i }
                continue
            }
            guard let a = IPv4Address(text) else {
                refuse(p, IPv6Address(text) != nil ? "\(text) is an IPv6 address in ipv4Settings" : "\(quoted(text)) is not an IPv4 address")
                continue
            }
            addresses[i] = a
        }
        return (addresses, mesh)
    }

    /// NEIPv4Settings.subnetMasks: each an IPv4 address (whether it is a contiguous mask is validation's).
    public mutating func subnetMasks(_ texts: [String], at path: String) -> [IPv4Address] {
        subnetMasks(texts.map(Optional.some), at: path)
    }

    /// The same, where a nil element is one the caller refused already (a JSON value of the wrong type).
    mutating func subnetMasks(_ texts: [String?], at path: String) -> [IPv4Address] {
        texts.enumerated().map { i, text in
            let p = "\(path)[\(i)]"
            guard let text else { markRefused(p); return Self.placeholderIPv4 }
            guard let mask = IPv4Address(text) else { refuse(p, "\(quoted(text)) is not a subnet mask"); return Self.placeholderIPv4 }
            return mask
        }
    }

    /// NEIPv6Settings.addresses.
    public mutating func ipv6Addresses(_ texts: [String], at path: String) -> [IPv6Address] {
        ipv6Addresses(texts.map(Optional.some), at: path)
    }

    /// The same, where a nil element is one the caller refused already (a JSON value of the wrong type).
    mutating func ipv6Addresses(_ texts: [String?], at path: String) -> [IPv6Address] {
        texts.enumerated().map { i, text in
            let p = "\(path)[\(i)]"
            guard let text else { markRefused(p); return Self.placeholderIPv6 }
            guard let a = IPv6Address(text) else {
                refuse(p, IPv4Address(text) != nil ? "\(text) is an IPv4 address in ipv6Settings" : "\(quoted(text)) is not an IPv6 address")
                return Self.placeholderIPv6
            }
            return a
        }
    }

    static func section(_ family: IPFamily) -> String { family == .ipv4 ? "ipv4Settings" : "ipv6Settings" }

    /// A route written `ADDRESS/LENGTH` (the JSON format's short form). A route in ipv4Settings is an
    /// IPv4 route, as NEIPv4Route is: the family is the type's.
    public mutating func route(prefix text: String, family: IPFamily, at path: String) -> Route {
        guard let prefix = IPPrefix(text) else {
            let parts = text.split(separator: "/", maxSplits: 1)
            if parts.count == 2, let a = IPAddress(parts[0]) {
                refuse(path, "\(quoted(text)): prefix length must be 0–\(a.family.bitWidth)")
            } else {
                refuse(path, "\(quoted(text)) is not an address prefix (ADDRESS/LENGTH)")
            }
            return Self.placeholderRoute(family)
        }
        guard prefix.family == family else {
            refuse(path, "\(text) is an \(prefix.family) route in \(Self.section(family))")
            return Self.placeholderRoute(family)
        }
        return Route(destination: prefix)
    }

    /// The destination of an NEIPv4Route / NEIPv6Route (`path` is the route's), or nil (refused).
    mutating func routeDestination(_ text: String?, family: IPFamily, at path: String) -> IPAddress? {
        guard let text else { markRefused(path); return nil }
        guard let destination = IPAddress(text) else {
            refuse("\(path).destinationAddress", "\(quoted(text)) is not an IP address")
            markRefused(path)
            return nil
        }
        guard destination.family == family else {
            refuse(path, "\(text) is an \(destination.family) route in \(Self.section(family))")
            return nil
        }
        return destination
    }

    /// A route's `gatewayAddress`: an IP address (whether it is usable there is validation's).
    mutating func gateway(_ text: String?, family: IPFamily, at path: String) -> IPAddress? {
        guard let text else { return nil }
        guard let g = IPAddress(text) else {
            refuse("\(path).gatewayAddress", "\(quoted(text)) is not a usable \(family) gateway address")
            return nil
        }
        return g
    }

    /// A member a format may leave out or give with the wrong type.
    enum Given<Value> {
        case value(Value)
        /// Not given: the reason to report (once the destination is known to be usable).
        case missing(String)
        /// Given, and refused already by the caller.
        case refused
    }

    /// NEIPv4Route(destinationAddress:subnetMask:) with its gatewayAddress, at `path` (the route's).
    /// The mask becomes the destination prefix's length, so it must be a contiguous mask here.
    public mutating func ipv4Route(destination: String, subnetMask: String, gateway: String?, at path: String) -> Route {
        ipv4Route(destination: destination, subnetMask: .value(subnetMask), gateway: gateway, at: path)
    }

    /// NEIPv6Route(destinationAddress:networkPrefixLength:) with its gatewayAddress.
    public mutating func ipv6Route(destination: String, networkPrefixLength: Int, gateway: String?, at path: String) -> Route {
        ipv6Route(destination: destination, networkPrefixLength: .value(networkPrefixLength), gateway: gateway, at: path)
    }

    /// A nil destination is one the caller refused (or reported missing) already: nothing more is read.
    mutating func ipv4Route(destination: String?, subnetMask: Given<String>, gateway gatewayText: String?, at path: String) -> Route {
        guard let address = routeDestination(destination, family: .ipv4, at: path) else { return Self.placeholderRoute(.ipv4) }
        var length: Int?
        switch subnetMask {
        case .value(let text):
            if let mask = IPv4Address(text) {
                if let l = mask.maskLength { length = l } else { refuse("\(path).subnetMask", "\(text) is not a contiguous mask") }
            } else {
                refuse("\(path).subnetMask", "\(quoted(text)) is not a subnet mask")
            }
        case .missing(let reason): refuse("\(path).subnetMask", reason)
        case .refused: break
        }
        return route(address, length: length, gateway: gatewayText, family: .ipv4, at: path)
    }

    mutating func ipv6Route(destination: String?, networkPrefixLength: Given<Int>, gateway gatewayText: String?, at path: String) -> Route {
        guard let address = routeDestination(destination, family: .ipv6, at: path) else { return Self.placeholderRoute(.ipv6) }
        var length: Int?
        switch networkPrefixLength {
        case .value(let n):
            if (0...128).contains(n) { length = n } else { refuse("\(path).networkPrefixLength", "prefix length \(n) is outside 0–128") }
        case .missing(let reason): refuse("\(path).networkPrefixLength", reason)
        case .refused: break
        }
        return route(address, length: length, gateway: gatewayText, family: .ipv6, at: path)
    }

    mutating func route(_ address: IPAddress, length: Int?, gateway gatewayText: String?, family: IPFamily, at path: String) -> Route {
        let gateway = gateway(gatewayText, family: family, at: path)
        // Without a length there is no destination prefix; the gateway is still checked.
        guard let length, let prefix = IPPrefix(address: address, length: length) else {
            markRefused("\(path).destinationAddress")
            return Route(destination: Self.placeholderRoute(family).destination, gateway: gateway)
        }
        return Route(destination: prefix, gateway: gateway)
    }

    /// NEDNSSettings.servers: each an IP address.
    public mutating func dnsServers(_ texts: [String], at path: String) -> [IPAddress] {
        dnsServers(texts.map(Optional.some), at: path)
    }

    /// The same, where a nil element is one the caller refused already (a JSON value of the wrong type).
    mutating func dnsServers(_ texts: [String?], at path: String) -> [IPAddress] {
        texts.enumerated().map { i, text in
            let p = "\(path)[\(i)]"
            guard let text else { markRefused(p); return Self.placeholderAddress }
            guard let a = IPAddress(text) else { refuse(p, "\(quoted(text)) is not a DNS server address"); return Self.placeholderAddress }
            return a
        }
    }

    /// A DNS domain as the model keeps it: in lower case when it is one; as written otherwise, so
    /// that validation quotes it as written.
    public static func domain(_ text: String) -> String {
        HostName.problem(text) == nil ? text.lowercased() : text
    }

    /// Carrier endpoints written `HOST[:PORT][/udp|/tcp]`, each with its key path.
    public mutating func carrierEndpoints(_ texts: [String], at path: String) -> [CarrierEndpoint] {
        carrierEndpoints(texts.map(Optional.some), at: path)
    }

    /// The same, where a nil element is one the caller refused already (a JSON value of the wrong type).
    mutating func carrierEndpoints(_ texts: [String?], at path: String) -> [CarrierEndpoint] {
        var out: [CarrierEndpoint] = []
        for (i, text) in texts.enumerated() {
            let p = "\(path)[\(i)]"
            guard let text else { markRefused(p); continue }
            switch CarrierEndpoint.parse(text) {
            case .success(var endpoint):
                endpoint.keyPath = p
                out.append(endpoint)
            case .failure(let reason): refuse(p, reason.message)
            }
        }
        return out
    }

    /// forwarding.sources: each `ADDRESS/LENGTH`.
    mutating func prefixes(_ texts: [String?], at path: String) -> [IPPrefix] {
        texts.enumerated().map { i, text in
            let p = "\(path)[\(i)]"
            let placeholder = IPPrefix(address: Self.placeholderAddress, length: 32)!
            guard let text else { markRefused(p); return placeholder }
            guard let prefix = IPPrefix(text) else { refuse(p, "\(quoted(text)) is not an address prefix (ADDRESS/LENGTH)"); return placeholder }
            return prefix
        }
    }
}

extension TunnelSettings {
    /// `tunnelRemoteAddress` is a carrier endpoint whether or not the configuration lists it: put
    /// first (key path `tunnelRemoteAddress`) unless a listed endpoint has that host. Nothing is
    /// added for a remote that is neither an address nor a host name (validation says so). The JSON
    /// format and the NetworkExtension conversion add it; a wg-quick file's carriers are its peers'
    /// endpoints, of which the remote is the first.
    public mutating func addRemoteAsCarrier() {
        let remote = tunnelRemoteAddress
        let host: CarrierEndpoint.Host
        if let a = IPAddress(remote) { host = .address(a) }
        else if HostName.problem(remote) == nil { host = .name(remote.lowercased()) }
        else { return }
        guard !carrierEndpoints.contains(where: { $0.host == host }) else { return }
        carrierEndpoints.insert(CarrierEndpoint(host: host, keyPath: "tunnelRemoteAddress"), at: 0)
    }
}

/// The order problems are reported in: the model's keys in their order (the order of
/// NEPacketTunnelNetworkSettings and of docs/configuration.md), an object's unknown keys first,
/// array elements by index, and what is said of a whole array after what is said of its elements.
enum KeyOrder {
    enum Component: Equatable {
        case key(String)
        case index(Int)
    }

    static func components(_ path: String) -> [Component] {
        var out: [Component] = []
        var current = ""
        var inIndex = false
        for c in path {
            switch c {
            case "." where !inIndex:
                if !current.isEmpty { out.append(.key(current)) }
                current = ""
            case "[" where !inIndex:
                if !current.isEmpty { out.append(.key(current)) }
                current = ""
                inIndex = true
            case "]" where inIndex:
                out.append(Int(current).map { .index($0) } ?? .key(current))
                current = ""
                inIndex = false
            default:
                current.append(c)
            }
        }
        if !current.isEmpty || out.isEmpty { out.append(.key(current)) }
        return out
    }

    static let ipv4Route = ["destinationAddress", "subnetMask", "gatewayAddress"]
    static let ipv6Route = ["destinationAddress", "networkPrefixLength", "gatewayAddress"]

    /// The keys of each object, by the key path of the object with indices written `[]`. `runtime`
    /// holds every kind's keys, in an order that keeps each kind's.
    static let keys: [String: [String]] = [
        "": TunnelSettings.topLevelKeys,
        "ipv4Settings": TunnelSettings.ipv4Keys,
        "ipv6Settings": TunnelSettings.ipv6Keys,
        "ipv4Settings.includedRoutes[]": ipv4Route, "ipv4Settings.excludedRoutes[]": ipv4Route,
        "ipv6Settings.includedRoutes[]": ipv6Route, "ipv6Settings.excludedRoutes[]": ipv6Route,
        "dnsSettings": TunnelSettings.dnsKeys,
        "forwarding": ["sources", "masquerade"],
        "restart": ["policy", "attempts"],
        "runtime": ["kind", "library", "symbols", "arguments", "secretEnvironment", "secretFile", "packetPath",
                    "resultCodes", "identitySeedFile", "generateIdentity", "privateKeyFile", "listenPort", "fwMark",
                    "seeds", "relay", "contacts", "contactsOnly", "peers", "keepaliveSeconds", "startTimeoutSeconds"],
        "runtime.symbols": ["start", "packetIn", "packetInBatch", "status", "stop", "appMessage"],
        "runtime.resultCodes": ["ok", "queueFull", "invalidState", "invalidArgument", "bufferTooSmall", "failed"],
        "runtime.contacts[]": ["identity", "wireguardKey"],
        // A WireGuard peer's keys, then a mesh peer route's.
        "runtime.peers[]": ["publicKey", "presharedKeyFile", "endpoint", "allowedIPs", "persistentKeepalive",
                            "identity", "prefixes"],
    ]

    /// A path as numbers to compare: each key's place among its object's keys (-1 for an unknown key,
    /// after the known ones for a key no table lists), each index itself.
    static func ranks(_ finding: SettingsTranslation.Finding) -> [Int] {
        let parts = components(finding.path)
        var pattern = ""
        var out: [Int] = []
        for (n, part) in parts.enumerated() {
            switch part {
            case .index(let i):
                out.append(i)
                pattern += "[]"
            case .key(let key):
                if finding.unknownKey && n == parts.count - 1 {
                    out.append(-1)
                } else {
                    out.append(keys[pattern]?.firstIndex(of: key) ?? 1_000_000)
                }
                pattern += pattern.isEmpty ? key : ".\(key)"
            }
        }
        return out
    }

    /// `a` before `b`: the first differing rank decides; a path inside another comes before it.
    static func precedes(_ a: [Int], _ b: [Int]) -> Bool {
        for (x, y) in zip(a, b) where x != y { return x < y }
        return a.count > b.count
    }

    /// Stable: problems at one path keep the order they were found in.
    static func sorted(_ findings: [SettingsTranslation.Finding]) -> [SettingsTranslation.Finding] {
        findings.enumerated().map { ($0.offset, ranks($0.element), $0.element) }
            .sorted { a, b in a.1 == b.1 ? a.0 < b.0 : precedes(a.1, b.1) }
            .map(\.2)
    }
}
