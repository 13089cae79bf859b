/// The wg-quick(8) configuration format (`/etc/wireguard/wg0.conf`), mapped
/// onto `TunnelSettings` the way the iOS WireGuard app maps a tunnel onto
/// NEPacketTunnelNetworkSettings, with the `wireguard` runtime.
///
/// The file is translated straight into the model (no JSON is written or
/// read) and checked with the model's validation, the same as every format's;
/// every problem names the file, line and key, the validation's too (its key
/// paths mapped back to the lines they came from):
/// `wg0.conf:7: [Peer] AllowedIPs: 10.0.0.0/33 is not a valid prefix`.
/// Key material is never quoted back in a problem.
///
/// The keys never become Swift Strings: `parse(contents:name:secretMemory:)`
/// first decodes every `PrivateKey` and `PresharedKey` value straight from
/// the file's bytes into secret memory and overwrites its text there with a
/// marker (`WgQuickKeys`); only then is the file read as text.
public enum WgQuickConfig {
    /// Parses a wg-quick file held in a String (tests, tools): the text was a String already, so the
    /// keys go to unprotected memory. `name` is the file's name or path as the user gave it: problems
    /// start with it, and its last component without `.conf` is the tunnel's (interface) name.
    public static func parse(_ text: String, name: String) throws(ConfigurationError) -> TunnelSettings {
        let contents = UnprotectedSecretMemory(count: text.utf8.count)
        contents.withUnsafeMutableBytes { $0.copyBytes(from: text.utf8) }
        return try parse(contents: contents, name: name, secretMemory: UnprotectedSecretMemoryAllocator())
    }

    /// Parses a wg-quick file's bytes, as read into secret memory. Each key is decoded from `contents`
    /// into memory from `secretMemory`, and its text in `contents` replaced by a marker, before the
    /// rest is read as text: no String ever holds a key. `contents` is changed; the caller lets go of
    /// it (it is wiped then).
    public static func parse(contents: any SecretMemory, name: String,
                             secretMemory: some SecretMemoryAllocator) throws(ConfigurationError) -> TunnelSettings {
        let keys = contents.withUnsafeMutableBytes { WgQuickKeys.extract(from: $0, using: secretMemory) }
        guard let text = contents.withUnsafeBytes({ String(validating: $0, as: UTF8.self) }) else {
            throw ConfigurationError([ConfigProblem(path: name, reason: "not UTF-8 text")])
        }
        var parser = WgQuickParser(file: name, keys: keys)
        let settings = parser.parse(text)
        guard parser.problems.isEmpty, let settings else { throw ConfigurationError(parser.problemsInFileOrder) }
        return settings
    }

    /// True when the first line that is not blank or a comment is `[Interface]`.
    public static func looksLikeWgQuick(_ bytes: [UInt8]) -> Bool {
        bytes.withUnsafeBytes { looksLikeWgQuick($0) }
    }

    /// `looksLikeWgQuick` over bytes in place (a file read into secret memory): compares bytes, makes
    /// no String of the line (which could be a key's).
    public static func looksLikeWgQuick(_ bytes: UnsafeRawBufferPointer) -> Bool {
        let header = Array("[interface]".utf8)
        var found: Bool?
        WgQuickKeys.forEachLine(bytes) { line in
            guard found == nil else { return }
            var content: [UInt8] = []
            for c in line {
                if c == UInt8(ascii: "#") { break }
                if c == 0x20 || c == 0x09 || c >= 0x80 { continue }  // white space, a BOM
                content.append(c >= 0x41 && c <= 0x5a ? c + 0x20 : c)
                if content.count > header.count { break }
            }
            if !content.isEmpty { found = content == header }
        }
        return found ?? false
    }

    /// The tunnel name a file gives: its last path component without `.conf`.
    public static func tunnelName(fileName: String) -> String {
        let base = fileName.split(separator: "/", omittingEmptySubsequences: true).last.map(String.init) ?? fileName
        return base.hasSuffix(".conf") ? String(base.dropLast(5)) : base
    }

    static let interfaceKeys = ["PrivateKey", "ListenPort", "FwMark", "Address", "DNS", "MTU", "Table", "SaveConfig",
                                "PreUp", "PostUp", "PreDown", "PostDown"]
    static let peerKeys = ["PublicKey", "PresharedKey", "Endpoint", "AllowedIPs", "PersistentKeepalive"]
    static let repeatableKeys: Set = ["Address", "DNS", "AllowedIPs"]
    static let hookKeys: Set = ["PreUp", "PostUp", "PreDown", "PostDown"]
}

/// One pass over the lines into sections, then one over the sections into
/// settings; problems are collected with the line they belong to.
struct WgQuickParser {
    enum Section: String { case interface = "Interface", peer = "Peer" }

    struct Entry {
        var key: String
        var value: String
        var line: Int
    }

    struct Block {
        /// nil: an unknown or repeated section, reported once; its keys are skipped.
        var section: Section?
        var line: Int
        var entries: [Entry] = []
        func first(_ key: String) -> Entry? { entries.first { $0.key == key } }
        func all(_ key: String) -> [Entry] { entries.filter { $0.key == key } }
    }

    /// Why a value is refused.
    struct Reason: Error {
        var text: String
        init(_ text: String) { self.text = text }
    }

    /// Where a value of the model came from (a key path's line and label), for the validation's problems.
    struct Origin {
        var line: Int
        var label: String
    }

    let file: String
    /// The keys `WgQuickKeys.extract` took out of the file, by the index in their markers.
    let keys: [SecretKey]
    private(set) var problems: [(line: Int, problem: ConfigProblem)] = []

    init(file: String, keys: [SecretKey] = []) {
        self.file = file
        self.keys = keys
    }

    /// The key a PrivateKey or PresharedKey value's marker stands for, or why there is none.
    func key(_ value: String) -> Result<SecretKey, Reason> {
        let scalars = value.unicodeScalars
        switch scalars.first {
        case WgQuickKeys.keyMarker?:
            if let index = Int(String(scalars.dropFirst())), keys.indices.contains(index) { return .success(keys[index]) }
        case WgQuickKeys.noMemoryMarker?:
            return .failure(Reason("no secure memory could be mapped for the key"))
        default: break
        }
        return .failure(Reason(Base64Key.problem))
    }

    var problemsInFileOrder: [ConfigProblem] {
        problems.enumerated().sorted { ($0.element.line, $0.offset) < ($1.element.line, $1.offset) }.map(\.element.problem)
    }

    mutating func problem(_ line: Int, _ path: String, _ reason: String) {
        problems.append((line, ConfigProblem(path: path, reason: reason)))
    }

    func label(_ line: Int, _ section: Section, _ key: String) -> String { "\(file):\(line): [\(section.rawValue)] \(key)" }
    func label(_ entry: Entry, _ section: Section) -> String { label(entry.line, section, entry.key) }

    static func uncommented(_ line: Substring) -> Substring {
        line.firstIndex(of: "#").map { line[..<$0] } ?? line
    }

    static func trimmed(_ s: Substring) -> Substring {
        var s = s
        while let c = s.first, c.isWhitespace || c == "\u{FEFF}" { s.removeFirst() }
        while let c = s.last, c.isWhitespace { s.removeLast() }
        return s
    }

    /// wg(8) removes all white space from the values it reads.
    static func compact(_ s: String) -> String { s.filter { !$0.isWhitespace } }

    // MARK: Lines → sections

    mutating func sections(_ text: String) -> [Block] {
        var blocks: [Block] = []
        // "\r\n" is one Character: split on either ending.
        for (index, raw) in text.split(omittingEmptySubsequences: false, whereSeparator: \.isNewline).enumerated() {
            let n = index + 1
            let line = Self.trimmed(Self.uncommented(raw))
            if line.isEmpty { continue }
            if line.hasPrefix("[") {
                blocks.append(header(line, n, after: blocks))
                continue
            }
            guard let eq = line.firstIndex(of: "=") else {
                problem(n, "\(file):\(n)", "expected KEY = VALUE or a [Interface] / [Peer] header")
                continue
            }
            let key = String(Self.trimmed(line[..<eq]))
            let value = String(Self.trimmed(line[line.index(after: eq)...]))
            // Only a plausible key name is quoted back: a stray line may be key material.
            guard !key.isEmpty, key.count <= 24, key.allSatisfy({ $0.isASCII && $0.isLetter }) else {
                problem(n, "\(file):\(n)", "expected KEY = VALUE, with a key name such as PrivateKey or AllowedIPs")
                continue
            }
            let allKeys = WgQuickConfig.interfaceKeys + WgQuickConfig.peerKeys
            guard let current = blocks.indices.last else {
                let shown = allKeys.first { $0.lowercased() == key.lowercased() } ?? key
                problem(n, "\(file):\(n): \(shown)", "outside a section (put it under [Interface] or [Peer])")
                continue
            }
            guard let section = blocks[current].section else { continue }
            let known = section == .interface ? WgQuickConfig.interfaceKeys : WgQuickConfig.peerKeys
            guard let canonical = known.first(where: { $0.lowercased() == key.lowercased() }) else {
                problem(n, label(n, section, key), unknownKey(key, in: section))
                continue
            }
            if WgQuickConfig.hookKeys.contains(canonical) {
                problem(n, label(n, section, canonical),
                        "refused: Tunnelgate never runs shell commands from a configuration (PreUp, PostUp, PreDown, PostDown); remove it and run the command outside tunnelgate")
                continue
            }
            if !WgQuickConfig.repeatableKeys.contains(canonical), let earlier = blocks[current].first(canonical) {
                problem(n, label(n, section, canonical), "given twice (also on line \(earlier.line))")
                continue
            }
            blocks[current].entries.append(Entry(key: canonical, value: value, line: n))
        }
        return blocks
    }

    mutating func header(_ line: Substring, _ n: Int, after blocks: [Block]) -> Block {
        guard line.hasSuffix("]"), line.count > 2 else {
            problem(n, "\(file):\(n)", "a section header is [Interface] or [Peer]")
            return Block(section: nil, line: n)
        }
        let name = line.dropFirst().dropLast().filter { !$0.isWhitespace }
        switch name.lowercased() {
        case "interface":
            if let first = blocks.first(where: { $0.section == .interface }) {
                problem(n, "\(file):\(n): [Interface]", "a second [Interface] section (the first is on line \(first.line))")
                return Block(section: nil, line: n)
            }
            return Block(section: .interface, line: n)
        case "peer":
            return Block(section: .peer, line: n)
        default:
            let near = ["Interface", "Peer"].min { editDistance($0, name) < editDistance($1, name) }!
            let hint = editDistance(near, name) <= max(2, name.count / 4) ? "did you mean [\(near)]?" : "known: [Interface], [Peer]"
            problem(n, "\(file):\(n): [\(name.count <= 24 ? name : "…")]", "unknown section (\(hint))")
            return Block(section: nil, line: n)
        }
    }

    func unknownKey(_ key: String, in section: Section) -> String {
        let mine = section == .interface ? WgQuickConfig.interfaceKeys : WgQuickConfig.peerKeys
        let other = section == .interface ? WgQuickConfig.peerKeys : WgQuickConfig.interfaceKeys
        if other.contains(where: { $0.lowercased() == key.lowercased() }) {
            return "belongs in [\(section == .interface ? "Peer" : "Interface")], not [\(section.rawValue)]"
        }
        if let near = mine.min(by: { editDistance($0, key) < editDistance($1, key) }),
           editDistance(near, key) <= max(2, key.count / 4) {
            return "unknown key (did you mean '\(near)'?)"
        }
        return "unknown key (known in [\(section.rawValue)]: \(mine.joined(separator: ", ")))"
    }

    // MARK: Values

    /// A decimal number of at most `maximum`, or "off" (→ 0) where allowed.
    static func number(_ text: String, maximum: Int, off: Bool = false) -> Int? {
        if off, text.lowercased() == "off" { return 0 }
        guard !text.isEmpty, text.count <= 10, text.allSatisfy({ $0.isASCII && $0.isNumber }),
              let n = Int(text), n <= maximum else { return nil }
        return n
    }

    /// `off`, decimal or 0x hexadecimal; a leading 0 (octal to wg) is refused as ambiguous.
    static func fwMark(_ text: String) -> Result<UInt32, Reason> {
        let t = text.lowercased()
        if t == "off" { return .success(0) }
        if t.hasPrefix("0x") {
            let digits = t.dropFirst(2)
            guard (1...8).contains(digits.count), let v = UInt32(digits, radix: 16) else {
                return .failure(Reason("\(text) is not a 32-bit mark (decimal, 0x hexadecimal or off)"))
            }
            return .success(v)
        }
        if t.count > 1, t.hasPrefix("0"), t.allSatisfy({ $0.isNumber }) {
            return .failure(Reason("\(text) is ambiguous (wg reads a leading 0 as octal); write it in decimal or as 0x hexadecimal"))
        }
        guard t.allSatisfy({ $0.isASCII && $0.isNumber }), t.count <= 10, let v = UInt32(t) else {
            return .failure(Reason("\(text) is not a 32-bit mark (decimal, 0x hexadecimal or off)"))
        }
        return .success(v)
    }

    /// An address with an optional prefix length: `10.0.0.2/24`, `fd00::2` (→ /128).
    func interfaceAddress(_ text: String) -> Result<IPPrefix, Reason> {
        if let prefix = IPPrefix(text) { return .success(prefix) }
        let parts = text.split(separator: "/", maxSplits: 1)
        if parts.count == 2, let a = IPAddress(parts[0]) {
            return .failure(Reason("\(text): prefix length must be 0–\(a.family.bitWidth)"))
        }
        return .failure(Reason("\(text) is not an address (ADDRESS or ADDRESS/LENGTH)"))
    }

    // MARK: Sections → settings

    mutating func parse(_ text: String) -> TunnelSettings? {
        let blocks = sections(text)
        guard let interface = blocks.first(where: { $0.section == .interface }) else {
            problem(0, file, "no [Interface] section (a wg-quick file has one, with the PrivateKey)")
            return nil
        }
        let s = Section.interface

        var privateKey: SecretKey?
        if let e = interface.first("PrivateKey") {
            switch key(e.value) {
            case .success(let k): privateKey = k
            case .failure(let reason): problem(e.line, label(e, s), reason.text)
            }
        } else {
            problem(interface.line, label(interface.line, s, "PrivateKey"), "missing (the interface's base64 private key, as `wg genkey` prints it)")
        }
        var listenPort: UInt16?
        if let e = interface.first("ListenPort") {
            let text = Self.compact(e.value)
            if let n = Self.number(text, maximum: 65535) { listenPort = n == 0 ? nil : UInt16(n) }
            else { problem(e.line, label(e, s), "\(text) is not a port (0–65535)") }
        }
        var fwMark: UInt32?
        if let e = interface.first("FwMark") {
            switch Self.fwMark(Self.compact(e.value)) {
            case .success(let mark): fwMark = mark == 0 ? nil : mark
            case .failure(let reason): problem(e.line, label(e, s), reason.text)
            }
        }
        var mtu: (value: Int, line: Int)?
        if let e = interface.first("MTU") {
            if let n = Self.number(e.value, maximum: .max) { mtu = (n, e.line) }
            else { problem(e.line, label(e, s), "\(e.value) is not a number") }
        }
        var routeAllowedIPs = true
        if let e = interface.first("Table") {
            switch e.value.lowercased() {
            case "auto": break
            case "off": routeAllowedIPs = false
            default:
                problem(e.line, label(e, s), "refused: Tunnelgate routes each tunnel through a table of its own (7460 + slot, chosen at up); use auto (the default) or off (no routes for AllowedIPs)")
            }
        }
        if let e = interface.first("SaveConfig") {
            switch e.value.lowercased() {
            case "false": break
            case "true": problem(e.line, label(e, s), "refused: Tunnelgate never writes the configuration back; remove SaveConfig or set it to false")
            default: problem(e.line, label(e, s), "\(e.value) is not true or false")
            }
        }

        // Address and DNS are split on commas and white space, as wg-quick splits them.
        func items(_ e: Entry) -> [String] {
            e.value.split(whereSeparator: { $0 == "," || $0.isWhitespace }).map(String.init)
        }
        var addresses: [(prefix: IPPrefix, line: Int)] = []
        for e in interface.all("Address") {
            for item in items(e) {
                switch interfaceAddress(item) {
                case .success(let prefix): addresses.append((prefix, e.line))
                case .failure(let reason): problem(e.line, label(e, s), reason.text)
                }
            }
        }
        // DNS: addresses are servers, anything else a search domain (as wg-quick does).
        var servers: [(address: IPAddress, line: Int)] = []
        var searchDomains: [(name: String, line: Int)] = []
        for e in interface.all("DNS") {
            for item in items(e) {
                if let a = IPAddress(item) { servers.append((a, e.line)) } else { searchDomains.append((item, e.line)) }
            }
        }
        if servers.isEmpty, let first = searchDomains.first {
            problem(first.line, label(first.line, s, "DNS"), "search domains but no server address (give at least one IP address)")
        }

        // Peers. A peer whose public key could not be read keeps its place (a placeholder key the
        // validation skips), so that its AllowedIPs are still compared with the others'.
        var origins: [String: Origin] = [:]
        var refused: Set<String> = []
        var peerLines: [String: Int] = [:]
        var peers: [WireGuardSettings.Peer] = []
        var routes: [(prefix: IPPrefix, line: Int)] = []
        var endpoints: [(endpoint: WireGuardSettings.Endpoint, line: Int)] = []
        let p = Section.peer
        for block in blocks where block.section == .peer {
            let path = "runtime.peers[\(peers.count)]"
            peerLines[path] = block.line
            origins[path] = Origin(line: block.line, label: "\(file):\(block.line): [Peer]")
            var publicKey = WireGuardSettings.placeholderPublicKey
            if let e = block.first("PublicKey") {
                origins["\(path).publicKey"] = Origin(line: e.line, label: label(e, p))
                if let key = Base64Key.decode(Self.compact(e.value)) { publicKey = key } else {
                    problem(e.line, label(e, p), Base64Key.problem)
                    refused.insert("\(path).publicKey")
                }
            } else {
                problem(block.line, label(block.line, p, "PublicKey"), "missing (the peer's base64 public key)")
                refused.insert("\(path).publicKey")
            }
            var presharedKey: SecretKey?
            if let e = block.first("PresharedKey") {
                switch key(e.value) {
                case .success(let k): presharedKey = k
                case .failure(let reason): problem(e.line, label(e, p), reason.text)
                }
            }
            var endpoint: WireGuardSettings.Endpoint?
            if let e = block.first("Endpoint") {
                switch WireGuardSettings.Endpoint.parse(Self.compact(e.value)) {
                case .success(let parsed):
                    endpoint = parsed
                    endpoints.append((parsed, e.line))
                    origins["\(path).endpoint"] = Origin(line: e.line, label: label(e, p))
                case .failure(let reason): problem(e.line, label(e, p), reason.message)
                }
            }
            var allowed: [IPPrefix] = []
            for e in block.all("AllowedIPs") {
                for item in Self.compact(e.value).split(separator: ",") {
                    guard let parsed = IPPrefix(item) else {
                        problem(e.line, label(e, p), "\(item) is not a valid prefix")
                        continue
                    }
                    // Host bits are cleared, as wg(8) clears them; a prefix given twice for a peer is one.
                    let prefix = parsed.network
                    if allowed.contains(prefix) { continue }
                    origins["\(path).allowedIPs[\(allowed.count)]"] = Origin(line: e.line, label: label(e, p))
                    allowed.append(prefix)
                    // The routes are the union of every peer's AllowedIPs.
                    if !routes.contains(where: { $0.prefix == prefix }) { routes.append((prefix, e.line)) }
                }
            }
            var keepalive: UInt16?
            if let e = block.first("PersistentKeepalive") {
                let text = Self.compact(e.value)
                if let n = Self.number(text, maximum: 65535, off: true) { keepalive = n == 0 ? nil : UInt16(n) }
                else { problem(e.line, label(e, p), "\(text) is not a number of seconds (0–65535) or off") }
            }
            peers.append(.init(publicKey: publicKey, presharedKey: presharedKey, endpoint: endpoint,
                               allowedIPs: allowed, persistentKeepalive: keepalive))
        }

        // The model, as the iOS app maps a tunnel onto NEPacketTunnelNetworkSettings; `origins` says
        // which line each key path came from, for the validation's problems.
        let tunnelName = WgQuickConfig.tunnelName(fileName: file)
        origins["name"] = Origin(line: 0, label: "\(file): tunnel name (from the file name)")
        // Like the iOS app: the first endpoint, or a placeholder when no peer has one.
        let remote = endpoints.first.map { CarrierEndpoint(host: $0.endpoint.host).hostText } ?? Self.noRemote
        if let first = endpoints.first { origins["tunnelRemoteAddress"] = Origin(line: first.line, label: label(first.line, p, "Endpoint")) }
        origins["mtu"] = mtu.map { Origin(line: $0.line, label: label($0.line, s, "MTU")) }
            ?? Origin(line: 0, label: "\(file): MTU (default \(WireGuardSettings.defaultMTU))")

        var ipv4: IPv4Settings?, ipv6: IPv6Settings?
        for family in IPFamily.allCases {
            let mine = addresses.filter { $0.prefix.family == family }
            let included = routeAllowedIPs ? routes.filter { $0.prefix.family == family } : []
            if mine.isEmpty && included.isEmpty { continue }
            let key = family == .ipv4 ? "ipv4Settings" : "ipv6Settings"
            let lengthsKey = family == .ipv4 ? "subnetMasks" : "networkPrefixLengths"
            for (i, a) in mine.enumerated() {
                origins["\(key).addresses[\(i)]"] = Origin(line: a.line, label: label(a.line, s, "Address"))
                origins["\(key).\(lengthsKey)[\(i)]"] = origins["\(key).addresses[\(i)]"]
            }
            for (i, r) in included.enumerated() {
                origins["\(key).includedRoutes[\(i)]"] = Origin(line: r.line, label: label(r.line, p, "AllowedIPs"))
            }
            origins[key] = origins["\(key).addresses[0]"] ?? origins["\(key).includedRoutes[0]"]
            let routesOfFamily = included.map { Route(destination: $0.prefix) }
            switch family {
            case .ipv4:
                ipv4 = IPv4Settings(addresses: mine.compactMap { $0.prefix.address.ipv4 },
                                    subnetMasks: mine.map { IPv4Address(maskLength: $0.prefix.length) },
                                    includedRoutes: routesOfFamily)
            case .ipv6:
                ipv6 = IPv6Settings(addresses: mine.compactMap { $0.prefix.address.ipv6 },
                                    networkPrefixLengths: mine.map(\.prefix.length), includedRoutes: routesOfFamily)
            }
        }

        var dns: DNSSettings?
        if let firstServer = servers.first {
            origins["dnsSettings"] = Origin(line: firstServer.line, label: label(firstServer.line, s, "DNS"))
            for (i, server) in servers.enumerated() {
                origins["dnsSettings.servers[\(i)]"] = Origin(line: server.line, label: label(server.line, s, "DNS"))
            }
            for (i, domain) in searchDomains.enumerated() {
                origins["dnsSettings.searchDomains[\(i)]"] = Origin(line: domain.line, label: label(domain.line, s, "DNS"))
            }
            // matchDomains [""]: the tunnel's servers are the default resolver, as the iOS app sets them.
            dns = DNSSettings(servers: servers.map(\.address), searchDomains: searchDomains.map { SettingsTranslation.domain($0.name) },
                              matchDomains: [""])
        }

        // Every endpoint is a carrier: kept off the tunnel, resolved as carriers are; UDP to the
        // peer's port, the only carrier traffic a WireGuard peer has.
        var carriers: [CarrierEndpoint] = []
        for e in endpoints {
            let keyPath = "carrierEndpoints[\(carriers.count)]"
            let carrier = e.endpoint.carrier(keyPath: keyPath)
            if carriers.contains(carrier) { continue }
            origins[keyPath] = Origin(line: e.line, label: label(e.line, p, "Endpoint"))
            carriers.append(carrier)
        }

        var settings = TunnelSettings(
            name: tunnelName, tunnelRemoteAddress: remote, mtu: mtu?.value ?? WireGuardSettings.defaultMTU,
            ipv4Settings: ipv4, ipv6Settings: ipv6, dnsSettings: dns, carrierEndpoints: carriers,
            runtime: .wireguard(WireGuardSettings(privateKey: privateKey ?? WireGuardSettings.placeholderPrivateKey,
                                                  listenPort: listenPort, fwMark: fwMark, peers: peers)))

        // The model's rules, named by line: the same validation as every other format's.
        let named = { [file, origins, peerLines] (path: String) -> String in
            peerLines[path].map { "the [Peer] on line \($0)" } ?? Self.origin(of: path, in: origins, file: file).label
        }
        var validator = SettingsValidator(settings, refused: refused, refer: named)
        for found in validator.run() {
            let origin = self.origin(of: found.path, in: origins)
            problem(origin.line, origin.label, found.reason)
        }

        guard problems.isEmpty, privateKey != nil else { return nil }
        for i in settings.carrierEndpoints.indices {
            if let origin = origins[settings.carrierEndpoints[i].keyPath] { settings.carrierEndpoints[i].keyPath = origin.label }
        }
        return settings
    }

    /// `tunnelRemoteAddress` when no peer has an endpoint (the iOS app's
    /// placeholder); not kept as a carrier.
    static let noRemote = "0.0.0.0"

    /// The origin of a model key path, or of the nearest enclosing one.
    func origin(of path: String, in origins: [String: Origin]) -> Origin {
        Self.origin(of: path, in: origins, file: file)
    }

    static func origin(of path: String, in origins: [String: Origin], file: String) -> Origin {
        var p = Substring(path)
        while !p.isEmpty {
            if let o = origins[String(p)] { return o }
            guard let cut = p.lastIndex(where: { $0 == "." || $0 == "[" }) else { break }
            p = p[..<cut]
        }
        return Origin(line: 0, label: "\(file): \(path)")
    }
}

/// The byte-level pass that takes the keys out of a wg-quick file before it is read as text.
///
/// A line is split where the text parser splits it (LF, VT, FF, CR, NEL, LINE and PARAGRAPH
/// SEPARATOR) and cut at its first `#`; when what comes before its first `=`, without white space
/// and non-ASCII bytes, is `privatekey` or `presharedkey` in any case, the value after the `=` is
/// decoded as a base64 key (spaces and tabs skipped) into secret memory, and every byte of the value
/// is overwritten: U+0001 and the key's index when it decoded, U+0002 when it is not a key, U+0003
/// when no memory could be had, then spaces. The rule takes at least every line the text parser
/// reads as one of those keys, wherever it stands (a key in the wrong section is still taken out, and
/// then refused by the text parser without its value).
enum WgQuickKeys {
    static let keyMarker: Unicode.Scalar = "\u{1}"
    static let notAKeyMarker: Unicode.Scalar = "\u{2}"
    static let noMemoryMarker: Unicode.Scalar = "\u{3}"
    static let names: [[UInt8]] = [Array("privatekey".utf8), Array("presharedkey".utf8)]

    static func extract(from buffer: UnsafeMutableRawBufferPointer, using allocator: some SecretMemoryAllocator) -> [SecretKey] {
        var keys: [SecretKey] = []
        var lines: [Range<Int>] = []
        forEachLineRange(UnsafeRawBufferPointer(buffer)) { lines.append($0) }
        for line in lines {
            var end = line.upperBound
            if let hash = buffer[line].firstIndex(of: UInt8(ascii: "#")) { end = hash }
            guard let eq = buffer[line.lowerBound..<end].firstIndex(of: UInt8(ascii: "=")) else { continue }
            var name: [UInt8] = []
            for c in buffer[line.lowerBound..<eq] where c < 0x80 && c != 0x20 && c != 0x09 {
                name.append(c >= 0x41 && c <= 0x5a ? c + 0x20 : c)
                if name.count > 12 { break }
            }
            guard names.contains(name) else { continue }
            let value = UnsafeMutableRawBufferPointer(rebasing: buffer[(eq + 1)..<end])
            guard let decoded = SecretKey.decode(base64: UnsafeRawBufferPointer(value), using: allocator) else { continue }
            var marker: [UInt8]
            switch decoded {
            case .key(let key):
                marker = [UInt8(keyMarker.value)] + Array(String(keys.count).utf8)
                keys.append(key)
            case .notAKey: marker = [UInt8(notAKeyMarker.value)]
            case .noMemory: marker = [UInt8(noMemoryMarker.value)]
            }
            for i in value.indices { value[i] = i - value.startIndex < marker.count ? marker[i - value.startIndex] : 0x20 }
        }
        return keys
    }

    /// Calls `body` with each line of `bytes` (without its line break), as the text parser splits them.
    static func forEachLine(_ bytes: UnsafeRawBufferPointer, _ body: (UnsafeRawBufferPointer) -> Void) {
        forEachLineRange(bytes) { body(UnsafeRawBufferPointer(rebasing: bytes[$0])) }
    }

    static func forEachLineRange(_ bytes: UnsafeRawBufferPointer, _ body: (Range<Int>) -> Void) {
        var start = 0, i = 0
        while i < bytes.count {
            let n = lineBreakLength(bytes, at: i)
            if n == 0 { i += 1; continue }
            body(start..<i)
            // CR LF is one line break.
            i += bytes[i] == 0x0d && i + 1 < bytes.count && bytes[i + 1] == 0x0a ? 2 : n
            start = i
        }
        body(start..<bytes.count)
    }

    /// 0, or the length of the line break at `i`: LF VT FF CR, NEL (C2 85), U+2028 / U+2029 (E2 80 A8/A9).
    static func lineBreakLength(_ b: UnsafeRawBufferPointer, at i: Int) -> Int {
        switch b[i] {
        case 0x0a, 0x0b, 0x0c, 0x0d: return 1
        case 0xc2 where i + 1 < b.count && b[i + 1] == 0x85: return 2
        case 0xe2 where i + 2 < b.count && b[i + 1] == 0x80 && (b[i + 2] == 0xa8 || b[i + 2] == 0xa9): return 3
        default: return 0
        }
    }
}
