extension TunnelSettings {
    /// The keys of the JSON format, by object. Anything else is an error.
    static let topLevelKeys = ["name", "tunnelRemoteAddress", "mtu", "ipv4Settings", "ipv6Settings",
                               "dnsSettings", "includeAllNetworks", "excludeLocalNetworks",
                               "carrierEndpoints", "runtime", "forwarding"]
    static let ipv4Keys = ["addresses", "subnetMasks", "includedRoutes", "excludedRoutes"]
    static let ipv6Keys = ["addresses", "networkPrefixLengths", "includedRoutes", "excludedRoutes"]
    static let ipv4RouteKeys = ["destinationAddress", "subnetMask", "gatewayAddress"]
    static let ipv6RouteKeys = ["destinationAddress", "networkPrefixLength", "gatewayAddress"]
    static let dnsKeys = ["servers", "searchDomains", "matchDomains", "matchDomainsNoSearch", "domainName"]
    static let runtimeKinds = ["none", "callback", "mesh", "wireguard"]

    /// Parses and validates a JSON configuration. Host names are checked for
    /// syntax only; `resolveCarrierEndpoints` checks that they resolve. Key
    /// files (`runtime.privateKeyFile`) are read through `secretFiles`.
    public static func parse(json bytes: [UInt8],
                             secretFiles: some SecretFileReader = NoSecretFiles()) throws(ConfigurationError) -> TunnelSettings {
        let root: JSONValue
        do {
            root = try JSONParser.parse(bytes)
        } catch {
            throw ConfigurationError([ConfigProblem(path: "", reason: "not valid JSON: \(error)")])
        }
        var reader = SettingsReader(secretFiles: secretFiles)
        let settings = reader.read(root)
        guard reader.problems.isEmpty, let settings else { throw ConfigurationError(reader.problems) }
        return settings
    }
}

/// Walks the JSON tree once, collecting every problem with its key path.
struct SettingsReader {
    var problems: [ConfigProblem] = []
    var secretFiles: any SecretFileReader = NoSecretFiles()
    /// Where `ipv4Settings.addresses` says "auto" (the mesh address).
    var meshAddress: (index: Int, path: String)?

    mutating func problem(_ path: String, _ reason: String) {
        problems.append(ConfigProblem(path: path, reason: reason))
    }

    /// The members of an object, with unknown keys reported.
    mutating func members(_ value: JSONValue, _ path: String, allowed: [String]) -> [String: (JSONValue, String)]? {
        guard case .object(let members) = value else {
            problem(path.isEmpty ? "(top level)" : path, "expected an object, found \(value.typeName)")
            return nil
        }
        var out: [String: (JSONValue, String)] = [:]
        for (key, v) in members {
            let p = path.isEmpty ? key : "\(path).\(key)"
            if allowed.contains(key) {
                out[key] = (v, p)
            } else {
                var reason = "unknown key"
                if let near = allowed.min(by: { editDistance($0, key) < editDistance($1, key) }),
                   editDistance(near, key) <= max(2, key.count / 4) {
                    reason += " (did you mean '\(near)'?)"
                } else {
                    reason += " (known here: \(allowed.joined(separator: ", ")))"
                }
                problem(p, reason)
            }
        }
        return out
    }

    mutating func string(_ entry: (JSONValue, String)?) -> String? {
        guard let (value, path) = entry else { return nil }
        guard case .string(let s) = value else { problem(path, "expected a string, found \(value.typeName)"); return nil }
        return s
    }

    mutating func bool(_ entry: (JSONValue, String)?) -> Bool? {
        guard let (value, path) = entry else { return nil }
        guard case .bool(let b) = value else { problem(path, "expected true or false, found \(value.typeName)"); return nil }
        return b
    }

    mutating func integer(_ entry: (JSONValue, String)?) -> Int? {
        guard let (value, path) = entry else { return nil }
        guard case .number(let d, let literal) = value, d.rounded() == d, abs(d) < 1e15,
              !literal.contains("."), !literal.lowercased().contains("e") else {
            problem(path, "expected a whole number, found \(value.typeName == "a number" ? value.literalText : value.typeName)")
            return nil
        }
        return Int(d)
    }

    mutating func array(_ entry: (JSONValue, String)?) -> [(JSONValue, String)]? {
        guard let (value, path) = entry else { return nil }
        guard case .array(let elements) = value else { problem(path, "expected an array, found \(value.typeName)"); return nil }
        return elements.enumerated().map { ($1, "\(path)[\($0)]") }
    }

    mutating func read(_ root: JSONValue) -> TunnelSettings? {
        guard let top = members(root, "", allowed: TunnelSettings.topLevelKeys) else { return nil }

        let name = string(top["name"]) ?? (top["name"] == nil ? TunnelSettings.defaultName : nil)
        if let name, let reason = InterfaceName.problem(name) { problem("name", reason) }

        var remote: String?
        if top["tunnelRemoteAddress"] == nil {
            problem("tunnelRemoteAddress", "missing (the tunnel server's IP address or host name)")
        } else if let text = string(top["tunnelRemoteAddress"]) {
            if IPAddress(text) == nil, let reason = HostName.problem(text) {
                problem("tunnelRemoteAddress", "\(quoted(text)) is neither an IP address nor a valid host name (\(reason))")
            } else {
                remote = text
            }
        }

        var mtu = integer(top["mtu"])
        if let mtu, !TunnelSettings.mtuRange.contains(mtu) {
            problem("mtu", "\(mtu) is outside \(TunnelSettings.mtuRange.lowerBound)–\(TunnelSettings.mtuRange.upperBound)")
        }

        let ipv4 = top["ipv4Settings"].flatMap { readIPv4($0) }
        let ipv6 = top["ipv6Settings"].flatMap { readIPv6($0) }
        if let mtu, top["ipv6Settings"] != nil, TunnelSettings.mtuRange.contains(mtu), mtu < TunnelSettings.minimumIPv6MTU {
            problem("mtu", "\(mtu) is below \(TunnelSettings.minimumIPv6MTU), the minimum for IPv6 (ipv6Settings is configured)")
        }
        let dns = top["dnsSettings"].flatMap { readDNS($0) }
        let includeAll = bool(top["includeAllNetworks"]) ?? false
        let excludeLocal = bool(top["excludeLocalNetworks"]) ?? false

        var carriers: [CarrierEndpoint] = []
        for (value, path) in array(top["carrierEndpoints"]) ?? [] {
            guard case .string(let text) = value else { problem(path, "expected a string, found \(value.typeName)"); continue }
            switch CarrierEndpoint.parse(text) {
            case .success(var endpoint):
                endpoint.keyPath = path
                if carriers.contains(endpoint) { problem(path, "\(quoted(text)) is listed twice") }
                else { carriers.append(endpoint) }
            case .failure(let reason): problem(path, reason.message)
            }
        }
        if let remote, !carriers.contains(where: { $0.hostText == remote || $0.hostText == IPAddress(remote)?.description }) {
            let host: CarrierEndpoint.Host = IPAddress(remote).map { .address($0) } ?? .name(remote.lowercased())
            carriers.insert(CarrierEndpoint(host: host, keyPath: "tunnelRemoteAddress"), at: 0)
        }

        var runtime: RuntimeSettings?
        if let entry = top["runtime"] {
            runtime = readRuntime(entry)
            if case .mesh? = runtime { checkMeshMTU(mtu) }
        } else {
            runtime = RuntimeSettings.none
        }
        if case .wireguard(let wg)? = runtime {
            if mtu == nil { mtu = WireGuardSettings.defaultMTU }
            // The peers' endpoints are carriers: kept off the tunnel, let through the kill switch.
            for (i, peer) in wg.peers.enumerated() {
                guard let endpoint = peer.endpoint?.carrier(keyPath: "runtime.peers[\(i)].endpoint") else { continue }
                if !carriers.contains(where: { $0.covers(endpoint) }) { carriers.append(endpoint) }
            }
        }
        if let (_, p) = meshAddress, runtime != nil {
            if case .mesh? = runtime {} else {
                problem(p, "'auto' is this node's mesh address, derived from its MeshGuard identity: it needs runtime.kind mesh")
            }
        }

        let forwarding = top["forwarding"].flatMap { readForwarding($0) }

        guard let name, let remote, let runtime, problems.isEmpty else { return nil }
        return TunnelSettings(name: name, tunnelRemoteAddress: remote, mtu: mtu, ipv4Settings: ipv4,
                              ipv6Settings: ipv6, dnsSettings: dns, includeAllNetworks: includeAll,
                              excludeLocalNetworks: excludeLocal, carrierEndpoints: carriers, runtime: runtime,
                              forwarding: forwarding, meshAddressIndex: meshAddress?.index)
    }

    mutating func readIPv4(_ entry: (JSONValue, String)) -> IPv4Settings? {
        let path = entry.1
        guard let m = members(entry.0, path, allowed: TunnelSettings.ipv4Keys) else { return nil }
        var addresses: [IPv4Address] = []
        let addressEntries = array(m["addresses"])
        if m["addresses"] == nil { problem("\(path).addresses", "missing (NEIPv4Settings needs at least one address)") }
        for (value, p) in addressEntries ?? [] {
            guard let text = string((value, p)) else { continue }
            if text == "auto" {
                // This node's mesh address, derived from its identity when planned (mesh runtime only).
                if meshAddress != nil { problem(p, "'auto' is listed twice") }
                else { meshAddress = (addresses.count, p) }
                addresses.append(IPv4Address(0))
                continue
            }
            guard let a = IPv4Address(text) else {
                problem(p, IPv6Address(text) != nil ? "\(text) is an IPv6 address in ipv4Settings" : "\(quoted(text)) is not an IPv4 address")
                continue
            }
            if a.isUnspecified || a.isMulticast || a.isLoopback || a.isBroadcast {
                problem(p, "\(text) cannot be an interface address (\(a.isMulticast ? "multicast" : a.isLoopback ? "loopback" : a.isBroadcast ? "broadcast" : "unspecified"))")
            }
            if addresses.contains(a) { problem(p, "\(text) is listed twice") }
            addresses.append(a)
        }
        if let addressEntries, addressEntries.isEmpty, !hasIncludedRoutes(m) {
            problem("\(path).addresses", "empty (NEIPv4Settings needs at least one address, or includedRoutes to route IPv4 without one)")
        }

        var masks: [IPv4Address] = []
        let maskEntries = array(m["subnetMasks"])
        if m["subnetMasks"] == nil { problem("\(path).subnetMasks", "missing (one mask per address)") }
        for (value, p) in maskEntries ?? [] {
            guard let text = string((value, p)) else { continue }
            guard let mask = IPv4Address(text) else { problem(p, "\(quoted(text)) is not a subnet mask"); continue }
            guard mask.maskLength != nil else { problem(p, "\(text) is not a contiguous mask"); continue }
            masks.append(mask)
        }
        if let addressEntries, let maskEntries, addressEntries.count != maskEntries.count {
            problem("\(path).subnetMasks", "\(maskEntries.count) mask\(maskEntries.count == 1 ? "" : "s") for \(addressEntries.count) address\(addressEntries.count == 1 ? "" : "es") (one mask per address)")
        }
        let included = readRoutes(m["includedRoutes"], family: .ipv4)
        let excluded = readRoutes(m["excludedRoutes"], family: .ipv4)
        return IPv4Settings(addresses: addresses, subnetMasks: masks, includedRoutes: included, excludedRoutes: excluded)
    }

    mutating func readIPv6(_ entry: (JSONValue, String)) -> IPv6Settings? {
        let path = entry.1
        guard let m = members(entry.0, path, allowed: TunnelSettings.ipv6Keys) else { return nil }
        var addresses: [IPv6Address] = []
        let addressEntries = array(m["addresses"])
        if m["addresses"] == nil { problem("\(path).addresses", "missing (NEIPv6Settings needs at least one address)") }
        for (value, p) in addressEntries ?? [] {
            guard let text = string((value, p)) else { continue }
            guard let a = IPv6Address(text) else {
                problem(p, IPv4Address(text) != nil ? "\(text) is an IPv4 address in ipv6Settings" : "\(quoted(text)) is not an IPv6 address")
                continue
            }
            if a.isUnspecified || a.isMulticast || a.isLoopback {
                problem(p, "\(text) cannot be an interface address (\(a.isMulticast ? "multicast" : a.isLoopback ? "loopback" : "unspecified"))")
            }
            if addresses.contains(a) { problem(p, "\(text) is listed twice") }
            addresses.append(a)
        }
        if let addressEntries, addressEntries.isEmpty, !hasIncludedRoutes(m) {
            problem("\(path).addresses", "empty (NEIPv6Settings needs at least one address, or includedRoutes to route IPv6 without one)")
        }

        var lengths: [Int] = []
        let lengthEntries = array(m["networkPrefixLengths"])
        if m["networkPrefixLengths"] == nil { problem("\(path).networkPrefixLengths", "missing (one prefix length per address)") }
        for (value, p) in lengthEntries ?? [] {
            guard let n = integer((value, p)) else { continue }
            guard (0...128).contains(n) else { problem(p, "prefix length \(n) is outside 0–128"); continue }
            lengths.append(n)
        }
        if let addressEntries, let lengthEntries, addressEntries.count != lengthEntries.count {
            problem("\(path).networkPrefixLengths", "\(lengthEntries.count) prefix length\(lengthEntries.count == 1 ? "" : "s") for \(addressEntries.count) address\(addressEntries.count == 1 ? "" : "es") (one per address)")
        }
        let included = readRoutes(m["includedRoutes"], family: .ipv6)
        let excluded = readRoutes(m["excludedRoutes"], family: .ipv6)
        return IPv6Settings(addresses: addresses, networkPrefixLengths: lengths, includedRoutes: included, excludedRoutes: excluded)
    }

    /// True when `includedRoutes` is a non-empty array: the family is routed
    /// even without an address of its own (as iOS allows: NEIPv6Settings(addresses: [])).
    func hasIncludedRoutes(_ m: [String: (JSONValue, String)]) -> Bool {
        if case .array(let routes)? = m["includedRoutes"]?.0 { return !routes.isEmpty }
        return false
    }

    mutating func readRoutes(_ entry: (JSONValue, String)?, family: IPFamily) -> [Route] {
        var routes: [Route] = []
        var byDestination: [IPPrefix: Route] = [:]
        for (value, path) in array(entry) ?? [] {
            guard let route = readRoute(value, path, family: family) else { continue }
            if let previous = byDestination[route.destination] {
                if previous.gateway != route.gateway {
                    problem(path, "\(route.destination) is listed twice with different gateways")
                }
                continue
            }
            byDestination[route.destination] = route
            routes.append(route)
        }
        return routes
    }

    mutating func readRoute(_ value: JSONValue, _ path: String, family: IPFamily) -> Route? {
        let section = family == .ipv4 ? "ipv4Settings" : "ipv6Settings"
        func familyMismatch(_ prefixFamily: IPFamily, _ text: String) -> Bool {
            guard prefixFamily != family else { return false }
            problem(path, "\(text) is an \(prefixFamily) route in \(section)")
            return true
        }
        switch value {
        case .string(let text):
            guard let prefix = IPPrefix(text) else {
                let parts = text.split(separator: "/", maxSplits: 1)
                if parts.count == 2, let a = IPAddress(parts[0]) {
                    problem(path, "\(quoted(text)): prefix length must be 0–\(a.family.bitWidth)")
                } else {
                    problem(path, "\(quoted(text)) is not an address prefix (ADDRESS/LENGTH)")
                }
                return nil
            }
            if familyMismatch(prefix.family, text) { return nil }
            guard prefix.isCanonical else {
                problem(path, "\(text) has host bits set (the network is \(prefix.network))")
                return nil
            }
            return Route(destination: prefix)
        case .object:
            let keys = family == .ipv4 ? TunnelSettings.ipv4RouteKeys : TunnelSettings.ipv6RouteKeys
            guard let m = members(value, path, allowed: keys) else { return nil }
            guard let destinationText = string(m["destinationAddress"]) else {
                if m["destinationAddress"] == nil { problem("\(path).destinationAddress", "missing") }
                return nil
            }
            guard let destination = IPAddress(destinationText) else {
                problem("\(path).destinationAddress", "\(quoted(destinationText)) is not an IP address")
                return nil
            }
            if familyMismatch(destination.family, destinationText) { return nil }
            var length: Int?
            switch family {
            case .ipv4:
                if let maskText = string(m["subnetMask"]) {
                    if let mask = IPv4Address(maskText) {
                        if let l = mask.maskLength { length = l } else { problem("\(path).subnetMask", "\(maskText) is not a contiguous mask") }
                    } else {
                        problem("\(path).subnetMask", "\(quoted(maskText)) is not a subnet mask")
                    }
                } else if m["subnetMask"] == nil {
                    problem("\(path).subnetMask", "missing (NEIPv4Route needs destinationAddress and subnetMask)")
                }
            case .ipv6:
                if let n = integer(m["networkPrefixLength"]) {
                    if (0...128).contains(n) { length = n } else { problem("\(path).networkPrefixLength", "prefix length \(n) is outside 0–128") }
                } else if m["networkPrefixLength"] == nil {
                    problem("\(path).networkPrefixLength", "missing (NEIPv6Route needs destinationAddress and networkPrefixLength)")
                }
            }
            var gateway: IPAddress?
            if let gatewayText = string(m["gatewayAddress"]) {
                if let g = IPAddress(gatewayText), g.family == family, !g.isUnspecified, !g.isMulticast {
                    gateway = g
                } else {
                    problem("\(path).gatewayAddress", "\(quoted(gatewayText)) is not a usable \(family) gateway address")
                }
            }
            guard let length, let prefix = IPPrefix(address: destination, length: length) else { return nil }
            guard prefix.isCanonical else {
                problem("\(path).destinationAddress", "\(prefix) has host bits set (the network is \(prefix.network))")
                return nil
            }
            return Route(destination: prefix, gateway: gateway)
        default:
            problem(path, "expected a route (an object or an ADDRESS/LENGTH string), found \(value.typeName)")
            return nil
        }
    }

    mutating func readDNS(_ entry: (JSONValue, String)) -> DNSSettings? {
        let path = entry.1
        guard let m = members(entry.0, path, allowed: TunnelSettings.dnsKeys) else { return nil }
        var servers: [IPAddress] = []
        let serverEntries = array(m["servers"])
        if m["servers"] == nil { problem("\(path).servers", "missing (NEDNSSettings needs at least one server)") }
        for (value, p) in serverEntries ?? [] {
            guard let text = string((value, p)) else { continue }
            guard let a = IPAddress(text), !a.isUnspecified, !a.isMulticast else {
                problem(p, "\(quoted(text)) is not a DNS server address"); continue
            }
            servers.append(a)
        }
        if let serverEntries, serverEntries.isEmpty { problem("\(path).servers", "empty (NEDNSSettings needs at least one server)") }

        func domains(_ key: String, allowEmpty: Bool) -> [String]? {
            guard m[key] != nil else { return nil }
            var out: [String] = []
            for (value, p) in array(m[key]) ?? [] {
                guard let text = string((value, p)) else { continue }
                if text.isEmpty && allowEmpty { out.append(text); continue }
                if let reason = HostName.problem(text) { problem(p, "\(quoted(text)) is not a domain (\(reason))"); continue }
                out.append(text.lowercased())
            }
            return out
        }
        let search = domains("searchDomains", allowEmpty: false) ?? []
        let match = domains("matchDomains", allowEmpty: true)
        let noSearch = bool(m["matchDomainsNoSearch"]) ?? false
        var domainName: String?
        if let text = string(m["domainName"]) {
            if let reason = HostName.problem(text) { problem("\(path).domainName", "\(quoted(text)) is not a domain (\(reason))") }
            else { domainName = text.lowercased() }
        }
        return DNSSettings(servers: servers, searchDomains: search, matchDomains: match,
                           matchDomainsNoSearch: noSearch, domainName: domainName)
    }

    mutating func readForwarding(_ entry: (JSONValue, String)) -> ForwardingSettings? {
        let path = entry.1
        guard let m = members(entry.0, path, allowed: ["sources", "masquerade"]) else { return nil }
        var sources: [IPPrefix] = []
        let entries = array(m["sources"])
        if m["sources"] == nil { problem("\(path).sources", "missing (the prefixes of the hosts that route through this one)") }
        for (value, p) in entries ?? [] {
            guard let text = string((value, p)) else { continue }
            guard let prefix = IPPrefix(text) else { problem(p, "\(quoted(text)) is not an address prefix (ADDRESS/LENGTH)"); continue }
            guard prefix.isCanonical else { problem(p, "\(text) has host bits set (the network is \(prefix.network))"); continue }
            guard prefix.length > 0 else { problem(p, "\(text) would forward for every address; name the hosts' prefixes"); continue }
            sources.append(prefix)
        }
        if let entries, entries.isEmpty { problem("\(path).sources", "empty (name at least one prefix)") }
        let masquerade = bool(m["masquerade"]) ?? true
        return ForwardingSettings(sources: sources, masquerade: masquerade)
    }

    mutating func readRuntime(_ entry: (JSONValue, String)) -> RuntimeSettings? {
        let path = entry.1
        guard case .object(let raw) = entry.0 else {
            problem(path, "expected an object, found \(entry.0.typeName)")
            return nil
        }
        guard let kindValue = raw.first(where: { $0.key == "kind" })?.value else {
            problem("\(path).kind", "missing (one of: \(TunnelSettings.runtimeKinds.joined(separator: ", ")))")
            return nil
        }
        guard let kind = string((kindValue, "\(path).kind")) else { return nil }
        switch kind {
        case "none":
            _ = members(entry.0, path, allowed: ["kind"])
            return RuntimeSettings.none
        case "callback":
            return readCallbackRuntime(entry).map { .callback($0) }
        case "mesh": return readMeshRuntime(entry).map { .mesh($0) }
        case "wireguard": return readWireGuardRuntime(entry).map { .wireguard($0) }
        default:
            problem("\(path).kind", "unknown runtime kind \(quoted(kind)) (supported: \(TunnelSettings.runtimeKinds.joined(separator: ", ")))")
            return nil
        }
    }

    mutating func readCallbackRuntime(_ entry: (JSONValue, String)) -> CallbackRuntimeSettings? {
        let path = entry.1
        guard let m = members(entry.0, path, allowed: ["kind", "library", "symbols", "arguments", "secretFile",
                                                       "secretEnvironment", "packetPath", "resultCodes", "startTimeoutSeconds"]) else { return nil }
        guard let library = string(m["library"]) else {
            if m["library"] == nil { problem("\(path).library", "missing (the path of the runtime's shared library)") }
            return nil
        }
        if library.isEmpty { problem("\(path).library", "empty") }
        var settings = CallbackRuntimeSettings(library: library)
        if let entry = m["symbols"], let sm = members(entry.0, entry.1, allowed: ["start", "packetIn", "packetInBatch", "status", "stop", "appMessage"]) {
            func symbol(_ key: String) -> String? {
                // null is "none", which only the optional two (handled below before this) can be.
                if let (value, p) = sm[key], value == .null {
                    problem(p, "null, but \(key) is required; only the optional appMessage and packetInBatch may be null (none)")
                    return nil
                }
                guard let text = string(sm[key]) else { return nil }
                if text.isEmpty || !text.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_") }) {
                    problem("\(entry.1).\(key)", "\(quoted(text)) is not a C symbol name")
                    return nil
                }
                return text
            }
            if let v = symbol("start") { settings.symbols.start = v }
            if let v = symbol("packetIn") { settings.symbols.packetIn = v }
            if let (value, _) = sm["packetInBatch"], value == .null { settings.symbols.packetInBatch = nil }
            else if let v = symbol("packetInBatch") { settings.symbols.packetInBatch = v }
            if let v = symbol("status") { settings.symbols.status = v }
            if let v = symbol("stop") { settings.symbols.stop = v }
            if let (value, _) = sm["appMessage"], value == .null { settings.symbols.appMessage = nil }
            else if let v = symbol("appMessage") { settings.symbols.appMessage = v }
        }
        for (value, p) in array(m["arguments"]) ?? [] {
            if let text = string((value, p)) { settings.arguments.append(text) }
        }
        if m["secretEnvironment"] != nil {
            // Refused, not ignored: docs/configuration.md, "secretEnvironment".
            problem("\(path).secretEnvironment", "refused: a secret in the environment reaches every process started "
                    + "with that environment and stays in the process's initial environment block; put it in an owner-only "
                    + "file (chmod 600) and name it with secretFile (under systemd: LoadCredential= and the file in "
                    + "$CREDENTIALS_DIRECTORY)")
        }
        if let file = string(m["secretFile"]) {
            if !file.hasPrefix("/") { problem("\(path).secretFile", "\(quoted(file)) is not an absolute path") }
            settings.secret = .file(file)
        }
        if let text = string(m["packetPath"]) {
            if let p = PacketPath(rawValue: text) { settings.packetPath = p }
            else { problem("\(path).packetPath", "\(quoted(text)) is not callback or fd") }
        }
        if let entry = m["resultCodes"], let rm = members(entry.0, entry.1, allowed: ["ok", "queueFull", "invalidState",
                                                                                   "invalidArgument", "bufferTooSmall", "failed"]) {
            func code(_ key: String) -> Int32? {
                guard let n = integer(rm[key]) else { return nil }
                guard let v = Int32(exactly: n) else {
                    problem("\(entry.1).\(key)", "\(n) is outside int32_t, the type the runtime returns (\(Int32.min)…\(Int32.max))")
                    return nil
                }
                return v
            }
            let keys: [(String, WritableKeyPath<CallbackRuntimeSettings.ResultCodes, Int32>)] =
                [("ok", \.ok), ("queueFull", \.queueFull), ("invalidState", \.invalidState),
                 ("invalidArgument", \.invalidArgument), ("bufferTooSmall", \.bufferTooSmall), ("failed", \.failed)]
            var configured: Set<String> = []
            for (key, field) in keys {
                if let v = code(key) { settings.resultCodes[keyPath: field] = v; configured.insert(key) }
            }
            // Every code needs a value of its own, or the host could not tell them apart. A configured value may
            // also collide with a default the configuration left in place.
            let c = settings.resultCodes
            for (j, (key, field)) in keys.enumerated() {
                guard let (other, _) = keys[..<j].first(where: { c[keyPath: $0.1] == c[keyPath: field] }) else { continue }
                let (at, with) = configured.contains(key) ? (key, other) : (other, key)
                problem("\(entry.1).\(at)", "\(c[keyPath: field]) is also \(with)'s value"
                        + (configured.contains(with) ? "" : " (its default)") + "; every code needs a value of its own")
            }
        }
        if let n = integer(m["startTimeoutSeconds"]) {
            if (1...600).contains(n) { settings.startTimeoutSeconds = Double(n) } else { problem("\(path).startTimeoutSeconds", "\(n) is outside 1–600") }
        }
        return settings
    }
}

extension JSONValue {
    var literalText: String {
        if case .number(_, let literal) = self { return literal }
        return typeName
    }
}

func quoted(_ s: String) -> String { "'\(s)'" }

/// Levenshtein distance, for "did you mean" hints on unknown keys.
func editDistance(_ a: String, _ b: String) -> Int {
    let a = Array(a.lowercased()), b = Array(b.lowercased())
    if a.isEmpty { return b.count }
    if b.isEmpty { return a.count }
    var previous = Array(0...b.count)
    var current = previous
    for i in 1...a.count {
        current[0] = i
        for j in 1...b.count {
            current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1))
        }
        swap(&previous, &current)
    }
    return previous[b.count]
}
