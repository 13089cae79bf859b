extension TunnelSettings {
    /// The keys of the JSON format, by object. Anything else is an error.
    static let topLevelKeys = ["name", "tunnelRemoteAddress", "mtu", "ipv4Settings", "ipv6Settings",
                               "dnsSettings", "includeAllNetworks", "excludeLocalNetworks",
                               "carrierEndpoints", "runtime", "forwarding", "restart"]
    static let ipv4Keys = ["addresses", "subnetMasks", "includedRoutes", "excludedRoutes"]
    static let ipv6Keys = ["addresses", "networkPrefixLengths", "includedRoutes", "excludedRoutes"]
    static let ipv4RouteKeys = ["destinationAddress", "subnetMask", "gatewayAddress"]
    static let ipv6RouteKeys = ["destinationAddress", "networkPrefixLength", "gatewayAddress"]
    static let dnsKeys = ["servers", "searchDomains", "matchDomains", "matchDomainsNoSearch", "domainName"]
    static let runtimeKinds = ["none", "callback", "mesh", "wireguard"]

    /// Parses a JSON configuration into the model and validates it (`validate`'s rules). Host
    /// names are checked for syntax only; `resolveCarrierEndpoints` checks that they resolve. Key
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
        guard let settings = reader.read(root) else { throw ConfigurationError(reader.translation.problems) }
        return try reader.translation.finish(settings, naming: reader.jsonPath)
    }
}

/// The JSON format's reader: one walk over the JSON tree into the model, reporting what is wrong
/// with the JSON itself (unknown keys, types, values that are not what their key holds), each
/// with its key path. What the model's rules say (masks, MTU, duplicates…) is `validate`'s,
/// which `parse` calls on the result.
struct SettingsReader {
    var translation = SettingsTranslation()
    var secretFiles: any SecretFileReader = NoSecretFiles()
    /// Model key paths whose JSON key path differs: a route written `ADDRESS/LENGTH` has no
    /// `destinationAddress` of its own; a mesh peer route is a member named by its identity; an
    /// allowed IP after one dropped as a repeat of its peer's.
    var renamed: [String: String] = [:]

    /// A value the JSON does not give as its key needs: reported at `path`, which validation skips.
    mutating func problem(_ path: String, _ reason: String) {
        translation.refuse(path, reason)
    }

    /// The JSON key path of a model key path: the nearest renamed enclosing path, with the rest kept.
    func jsonPath(_ path: String) -> String {
        if renamed.isEmpty { return path }
        var p = Substring(path)
        while true {
            if let r = renamed[String(p)] { return r + path.dropFirst(p.count) }
            guard let cut = p.lastIndex(where: { $0 == "." || $0 == "[" }) else { return path }
            p = p[..<cut]
        }
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
                translation.unknownKey(p, reason)
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

    /// An array of strings; nil for an element that is not one (reported).
    mutating func strings(_ entry: (JSONValue, String)?) -> [String?] {
        (array(entry) ?? []).map { string($0) }
    }

    /// The settings the tree stands for, placeholders where a value could not be read; nil when the
    /// top level is not an object.
    mutating func read(_ root: JSONValue) -> TunnelSettings? {
        JSONFormatProbe.note(.settingsRead)
        guard let top = members(root, "", allowed: TunnelSettings.topLevelKeys) else { return nil }

        let name = top["name"] == nil ? TunnelSettings.defaultName : string(top["name"]) ?? ""
        if top["tunnelRemoteAddress"] == nil {
            problem("tunnelRemoteAddress", "missing (the tunnel server's IP address or host name)")
        }
        let remote = string(top["tunnelRemoteAddress"]) ?? ""
        var mtu = integer(top["mtu"])
        var meshAddressIndex: Int?
        let ipv4 = top["ipv4Settings"].map { entry in
            let (v4, mesh) = readIPv4(entry)
            meshAddressIndex = mesh
            return v4
        }
        let ipv6 = top["ipv6Settings"].map { readIPv6($0) }
        let dns = top["dnsSettings"].map { readDNS($0) }
        let includeAll = bool(top["includeAllNetworks"]) ?? false
        let excludeLocal = bool(top["excludeLocalNetworks"]) ?? false
        let carriers = translation.carrierEndpoints(strings(top["carrierEndpoints"]), at: "carrierEndpoints")
        let runtime = top["runtime"].map { readRuntime($0) } ?? RuntimeSettings.none
        let forwarding = top["forwarding"].map { readForwarding($0) }
        let restart = top["restart"].map { readRestart($0) }

        if case .wireguard = runtime, mtu == nil { mtu = WireGuardSettings.defaultMTU }
        var settings = TunnelSettings(name: name, tunnelRemoteAddress: remote, mtu: mtu, ipv4Settings: ipv4,
                                      ipv6Settings: ipv6, dnsSettings: dns, includeAllNetworks: includeAll,
                                      excludeLocalNetworks: excludeLocal, carrierEndpoints: carriers, runtime: runtime,
                                      forwarding: forwarding, restart: restart, meshAddressIndex: meshAddressIndex)
        settings.addRemoteAsCarrier()
        if case .wireguard(let wg) = runtime {
            // The peers' endpoints are carriers: kept off the tunnel, let through the kill switch.
            for (i, peer) in wg.peers.enumerated() {
                guard let endpoint = peer.endpoint?.carrier(keyPath: "runtime.peers[\(i)].endpoint") else { continue }
                if !settings.carrierEndpoints.contains(where: { $0.covers(endpoint) }) { settings.carrierEndpoints.append(endpoint) }
            }
        }
        return settings
    }

    mutating func readIPv4(_ entry: (JSONValue, String)) -> (IPv4Settings, meshAddressIndex: Int?) {
        let path = entry.1
        guard let m = members(entry.0, path, allowed: TunnelSettings.ipv4Keys) else {
            return (IPv4Settings(addresses: [], subnetMasks: []), nil)
        }
        if m["addresses"] == nil { problem("\(path).addresses", "missing (NEIPv4Settings needs at least one address)") }
        let (addresses, mesh) = translation.ipv4Addresses(strings(m["addresses"]), at: "\(path).addresses")
        if m["subnetMasks"] == nil { problem("\(path).subnetMasks", "missing (one mask per address)") }
        let masks = translation.subnetMasks(strings(m["subnetMasks"]), at: "\(path).subnetMasks")
        let included = readRoutes(m["includedRoutes"], family: .ipv4)
        let excluded = readRoutes(m["excludedRoutes"], family: .ipv4)
        return (IPv4Settings(addresses: addresses, subnetMasks: masks, includedRoutes: included, excludedRoutes: excluded), mesh)
    }

    mutating func readIPv6(_ entry: (JSONValue, String)) -> IPv6Settings {
        let path = entry.1
        guard let m = members(entry.0, path, allowed: TunnelSettings.ipv6Keys) else {
            return IPv6Settings(addresses: [], networkPrefixLengths: [])
        }
        if m["addresses"] == nil { problem("\(path).addresses", "missing (NEIPv6Settings needs at least one address)") }
        let addresses = translation.ipv6Addresses(strings(m["addresses"]), at: "\(path).addresses")
        if m["networkPrefixLengths"] == nil { problem("\(path).networkPrefixLengths", "missing (one prefix length per address)") }
        let lengths = (array(m["networkPrefixLengths"]) ?? []).map { integer($0) ?? 0 }
        let included = readRoutes(m["includedRoutes"], family: .ipv6)
        let excluded = readRoutes(m["excludedRoutes"], family: .ipv6)
        return IPv6Settings(addresses: addresses, networkPrefixLengths: lengths, includedRoutes: included, excludedRoutes: excluded)
    }

    mutating func readRoutes(_ entry: (JSONValue, String)?, family: IPFamily) -> [Route] {
        (array(entry) ?? []).map { readRoute($0, $1, family: family) }
    }

    /// A route: `"ADDRESS/LENGTH"`, or an object with NEIPv4Route's / NEIPv6Route's members.
    mutating func readRoute(_ value: JSONValue, _ path: String, family: IPFamily) -> Route {
        switch value {
        case .string(let text):
            renamed["\(path).destinationAddress"] = path
            return translation.route(prefix: text, family: family, at: path)
        case .object:
            let keys = family == .ipv4 ? TunnelSettings.ipv4RouteKeys : TunnelSettings.ipv6RouteKeys
            guard let m = members(value, path, allowed: keys) else { return SettingsTranslation.placeholderRoute(family) }
            if m["destinationAddress"] == nil { problem("\(path).destinationAddress", "missing") }
            let destination = string(m["destinationAddress"])
            let gateway = string(m["gatewayAddress"])
            switch family {
            case .ipv4:
                let mask: SettingsTranslation.Given<String> = m["subnetMask"] == nil
                    ? .missing("missing (NEIPv4Route needs destinationAddress and subnetMask)")
                    : string(m["subnetMask"]).map { .value($0) } ?? .refused
                return translation.ipv4Route(destination: destination, subnetMask: mask, gateway: gateway, at: path)
            case .ipv6:
                let length: SettingsTranslation.Given<Int> = m["networkPrefixLength"] == nil
                    ? .missing("missing (NEIPv6Route needs destinationAddress and networkPrefixLength)")
                    : integer(m["networkPrefixLength"]).map { .value($0) } ?? .refused
                return translation.ipv6Route(destination: destination, networkPrefixLength: length, gateway: gateway, at: path)
            }
        default:
            problem(path, "expected a route (an object or an ADDRESS/LENGTH string), found \(value.typeName)")
            return SettingsTranslation.placeholderRoute(family)
        }
    }

    mutating func readDNS(_ entry: (JSONValue, String)) -> DNSSettings {
        let path = entry.1
        guard let m = members(entry.0, path, allowed: TunnelSettings.dnsKeys) else { return DNSSettings(servers: []) }
        if m["servers"] == nil { problem("\(path).servers", "missing (NEDNSSettings needs at least one server)") }
        let servers = translation.dnsServers(strings(m["servers"]), at: "\(path).servers")
        func domains(_ key: String) -> [String]? {
            guard m[key] != nil else { return nil }
            return strings(m[key]).map { $0.map(SettingsTranslation.domain) ?? "" }
        }
        let search = domains("searchDomains") ?? []
        let match = domains("matchDomains")
        let noSearch = bool(m["matchDomainsNoSearch"]) ?? false
        let domainName = string(m["domainName"]).map(SettingsTranslation.domain)
        return DNSSettings(servers: servers, searchDomains: search, matchDomains: match,
                           matchDomainsNoSearch: noSearch, domainName: domainName)
    }

    mutating func readForwarding(_ entry: (JSONValue, String)) -> ForwardingSettings {
        let path = entry.1
        guard let m = members(entry.0, path, allowed: ["sources", "masquerade"]) else { return ForwardingSettings(sources: []) }
        if m["sources"] == nil { problem("\(path).sources", "missing (the prefixes of the hosts that route through this one)") }
        let sources = translation.prefixes(strings(m["sources"]), at: "\(path).sources")
        let masquerade = bool(m["masquerade"]) ?? true
        return ForwardingSettings(sources: sources, masquerade: masquerade)
    }

    /// `"restart": {"policy": "never" | "on-failure", "attempts": N}`.
    mutating func readRestart(_ entry: (JSONValue, String)) -> RestartSettings {
        let path = entry.1
        guard let m = members(entry.0, path, allowed: ["policy", "attempts"]) else { return RestartSettings(policy: .never) }
        var policy = RestartSettings.Policy.never
        if m["policy"] == nil {
            problem("\(path).policy", "missing (never or on-failure)")
        } else if let text = string(m["policy"]) {
            if let p = RestartSettings.Policy(rawValue: text) { policy = p } else {
                problem("\(path).policy", "'\(text)' is not a restart policy (never or on-failure)")
            }
        }
        let attempts = m["attempts"] == nil ? RestartSettings.defaultAttempts : integer(m["attempts"]) ?? RestartSettings.defaultAttempts
        return RestartSettings(policy: policy, attempts: attempts)
    }

    /// The runtime of the kind named; `.none` in place of one whose kind is missing or unknown
    /// (refused, so validation does not look at it).
    mutating func readRuntime(_ entry: (JSONValue, String)) -> RuntimeSettings {
        let path = entry.1
        guard case .object(let raw) = entry.0 else {
            problem(path, "expected an object, found \(entry.0.typeName)")
            return .none
        }
        guard let kindValue = raw.first(where: { $0.key == "kind" })?.value else {
            problem("\(path).kind", "missing (one of: \(TunnelSettings.runtimeKinds.joined(separator: ", ")))")
            return .none
        }
        guard let kind = string((kindValue, "\(path).kind")) else { return .none }
        switch kind {
        case "none":
            _ = members(entry.0, path, allowed: ["kind"])
            return .none
        case "callback": return .callback(readCallbackRuntime(entry))
        case "mesh": return .mesh(readMeshRuntime(entry))
        case "wireguard": return .wireguard(readWireGuardRuntime(entry))
        default:
            problem("\(path).kind", "unknown runtime kind \(quoted(kind)) (supported: \(TunnelSettings.runtimeKinds.joined(separator: ", ")))")
            return .none
        }
    }

    mutating func readCallbackRuntime(_ entry: (JSONValue, String)) -> CallbackRuntimeSettings {
        let path = entry.1
        let m = members(entry.0, path, allowed: ["kind", "library", "symbols", "arguments", "secretFile",
                                                 "secretEnvironment", "packetPath", "resultCodes", "startTimeoutSeconds"]) ?? [:]
        if m["library"] == nil { problem("\(path).library", "missing (the path of the runtime's shared library)") }
        var settings = CallbackRuntimeSettings(library: string(m["library"]) ?? "")
        if let entry = m["symbols"], let sm = members(entry.0, entry.1, allowed: ["start", "packetIn", "packetInBatch", "status", "stop", "appMessage"]) {
            func symbol(_ key: String) -> String? {
                // null is "none", which only the optional two (handled below before this) can be.
                if let (value, p) = sm[key], value == .null {
                    problem(p, "null, but \(key) is required; only the optional appMessage and packetInBatch may be null (none)")
                    return nil
                }
                return string(sm[key])
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
        settings.arguments = strings(m["arguments"]).compactMap { $0 }
        if m["secretEnvironment"] != nil {
            // Refused, not ignored: docs/configuration.md, "secretEnvironment".
            problem("\(path).secretEnvironment", "refused: a secret in the environment reaches every process started "
                    + "with that environment and stays in the process's initial environment block; put it in an owner-only "
                    + "file (chmod 600) and name it with secretFile (under systemd: LoadCredential= and the file in "
                    + "$CREDENTIALS_DIRECTORY)")
        }
        if let file = string(m["secretFile"]) { settings.secret = .file(file) }
        if let text = string(m["packetPath"]) {
            if let p = PacketPath(rawValue: text) { settings.packetPath = p }
            else { problem("\(path).packetPath", "\(quoted(text)) is not callback or fd") }
        }
        if let entry = m["resultCodes"], let rm = members(entry.0, entry.1, allowed: SettingsValidator.resultCodeKeys.map(\.0)) {
            let fields: [WritableKeyPath<CallbackRuntimeSettings.ResultCodes, Int32>] =
                [\.ok, \.queueFull, \.invalidState, \.invalidArgument, \.bufferTooSmall, \.failed]
            for ((key, _), field) in zip(SettingsValidator.resultCodeKeys, fields) {
                guard let n = integer(rm[key]) else { continue }
                guard let v = Int32(exactly: n) else {
                    problem("\(entry.1).\(key)", "\(n) is outside int32_t, the type the runtime returns (\(Int32.min)…\(Int32.max))")
                    continue
                }
                settings.resultCodes[keyPath: field] = v
            }
        }
        if let n = integer(m["startTimeoutSeconds"]) { settings.startTimeoutSeconds = Double(n) }
        return settings
    }
}

extension JSONValue {
    var literalText: String {
        if case .number(_, let literal) = self { return literal }
        return typeName
    }
}

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
