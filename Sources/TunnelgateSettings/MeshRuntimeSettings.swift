/// `{"kind": "mesh", …}`: a MeshGuard mesh (libmeshguard-ffi.so, loaded with
/// dlopen) whose userspace WireGuard data tunnels carry the TUN's packets.
public struct MeshRuntimeSettings: Sendable, Equatable, Codable {
    /// MeshGuard's tunnel payload limit (a 1,400-byte frame minus its 4-byte
    /// header): the TUN's MTU may not exceed it.
    public static let maximumMTU = 1396

    /// A seed peer to join through: an IPv4 address (meshguard_join) or a
    /// host name (meshguard_join_host, or resolved to IPv4 when the library
    /// has no join_host).
    public struct Seed: Sendable, Equatable, CustomStringConvertible, Codable {
        public var host: String
        public var port: UInt16
        public var ipv4: IPv4Address? { IPv4Address(host) }
        public var description: String { "\(host):\(port)" }
        public init(host: String, port: UInt16) { self.host = host; self.port = port }
    }

    /// A registered contact: its Ed25519 identity and WireGuard public key.
    public struct Contact: Sendable, Equatable, Codable {
        public var identity: [UInt8]
        public var wireguardKey: [UInt8]
        public init(identity: [UInt8], wireguardKey: [UInt8]) { self.identity = identity; self.wireguardKey = wireguardKey }
    }

    /// One peer and the prefixes routed to it (also the sources it may send from).
    public struct PeerRoute: Sendable, Equatable, Codable {
        public var identity: [UInt8]
        public var prefixes: [IPPrefix]
        public init(identity: [UInt8], prefixes: [IPPrefix]) { self.identity = identity; self.prefixes = prefixes }
    }

    public enum Peers: Sendable, Equatable, Codable {
        /// Every alive peer's mesh IPv4 (from its peer info) is a /32 to it.
        case auto
        /// Identity → allowed prefixes, in configuration order.
        case routes([PeerRoute])
    }

    public var library: String
    /// Owner-only file holding the 32-byte identity seed (raw bytes).
    public var identitySeedFile: String
    /// Create the seed file (0600, 32 random bytes) when it does not exist.
    public var generateIdentity = false
    /// The UDP port MeshGuard binds (0: any).
    public var listenPort: UInt16 = 0
    public var seeds: [Seed] = []
    /// A pinned relay identity (meshguard_set_app_relay, not forced).
    public var relay: [UInt8]?
    public var contacts: [Contact] = []
    /// Accept application traffic from registered contacts only (meshguard_set_contacts_only).
    public var contactsOnly: Bool?
    public var peers: Peers = .auto
    /// meshguard_set_keepalive_interval, in seconds (1–600).
    public var keepaliveSeconds: Int?
    /// How long `up` waits for the mesh to join and a peer to be alive.
    public var startTimeoutSeconds: Double = 30

    public init(library: String, identitySeedFile: String) {
        self.library = library
        self.identitySeedFile = identitySeedFile
    }

    /// Parses a 32-byte identity or key: 64 hex digits, or base64 (44
    /// characters with padding, 43 without). nil when it is neither.
    public static func parseKey(_ text: String) -> [UInt8]? {
        let chars = Array(text.utf8)
        if chars.count == 64 {
            var out: [UInt8] = []
            out.reserveCapacity(32)
            var i = 0
            while i < 64 {
                guard let hi = hexValue(chars[i]), let lo = hexValue(chars[i + 1]) else { out = []; break }
                out.append(hi << 4 | lo)
                i += 2
            }
            if out.count == 32 { return out }
        }
        guard let bytes = decodeBase64(chars), bytes.count == 32 else { return nil }
        return bytes
    }

    static func hexValue(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): c - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): c - UInt8(ascii: "A") + 10
        default: nil
        }
    }

    /// Standard or URL-safe base64, padding optional.
    static func decodeBase64(_ chars: [UInt8]) -> [UInt8]? {
        var body = chars
        while body.last == UInt8(ascii: "=") { body.removeLast() }
        guard chars.count - body.count <= 2, body.count % 4 != 1 else { return nil }
        if chars.count != body.count, chars.count % 4 != 0 { return nil }
        var out: [UInt8] = []
        var acc: UInt32 = 0, bits = 0
        for c in body {
            let v: UInt8
            switch c {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"): v = c - UInt8(ascii: "A")
            case UInt8(ascii: "a")...UInt8(ascii: "z"): v = c - UInt8(ascii: "a") + 26
            case UInt8(ascii: "0")...UInt8(ascii: "9"): v = c - UInt8(ascii: "0") + 52
            case UInt8(ascii: "+"), UInt8(ascii: "-"): v = 62
            case UInt8(ascii: "/"), UInt8(ascii: "_"): v = 63
            default: return nil
            }
            acc = acc << 6 | UInt32(v)
            bits += 6
            if bits >= 8 {
                bits -= 8
                out.append(UInt8(truncatingIfNeeded: acc >> UInt32(bits)))
            }
        }
        return out
    }

    /// Lowercase hex of a key, for status and messages (identities are public).
    public static func hex(_ key: [UInt8]) -> String {
        let digits = Array("0123456789abcdef")
        return String(key.flatMap { [digits[Int($0 >> 4)], digits[Int($0 & 0xf)]] })
    }
}

extension SettingsReader {
    static let meshKeys = ["kind", "library", "identitySeedFile", "generateIdentity", "listenPort", "seeds", "relay",
                           "contacts", "contactsOnly", "peers", "keepaliveSeconds", "startTimeoutSeconds"]

    /// A 32-byte identity or key at `entry`, with a problem naming its path.
    mutating func meshKey(_ entry: (JSONValue, String)?, what: String) -> [UInt8]? {
        guard let entry, let text = string(entry) else { return nil }
        guard let key = MeshRuntimeSettings.parseKey(text) else {
            problem(entry.1, "\(quoted(text)) is not a 32-byte \(what) (64 hex digits or base64)")
            return nil
        }
        return key
    }

    mutating func readMeshRuntime(_ entry: (JSONValue, String)) -> MeshRuntimeSettings {
        let path = entry.1
        let m = members(entry.0, path, allowed: Self.meshKeys) ?? [:]
        if m["library"] == nil { problem("\(path).library", "missing (the path of libmeshguard-ffi.so)") }
        let library = string(m["library"])
        if m["identitySeedFile"] == nil {
            problem("\(path).identitySeedFile", "missing (an owner-only file holding the 32-byte identity seed)")
        }
        let seedFile = string(m["identitySeedFile"])
        var s = MeshRuntimeSettings(library: library ?? "", identitySeedFile: seedFile ?? "")
        s.generateIdentity = bool(m["generateIdentity"]) ?? false
        if let port = integer(m["listenPort"]) {
            if let p = UInt16(exactly: port) { s.listenPort = p } else { problem("\(path).listenPort", "\(port) is outside 0–65535") }
        }
        if m["seeds"] == nil {
            problem("\(path).seeds", "missing (seed peers to join through, \"IP:port\" or \"host:port\")")
        }
        for (i, text) in strings(m["seeds"]).enumerated() {
            let p = "\(path).seeds[\(i)]"
            let placeholder = MeshRuntimeSettings.Seed(host: "", port: 0)
            guard let text else { s.seeds.append(placeholder); continue }
            // Whether the host is one MeshGuard can join, and the port not 0, is validation's.
            guard let colon = text.lastIndex(of: ":"), let port = UInt16(text[text.index(after: colon)...]) else {
                problem(p, "\(quoted(text)) is not IP:port or host:port (port 1–65535)")
                s.seeds.append(placeholder)
                continue
            }
            s.seeds.append(.init(host: String(text[..<colon]), port: port))
        }
        s.relay = meshKey(m["relay"], what: "relay identity")
        for (value, p) in array(m["contacts"]) ?? [] {
            guard let cm = members(value, p, allowed: ["identity", "wireguardKey"]) else { continue }
            if cm["identity"] == nil { problem("\(p).identity", "missing") }
            if cm["wireguardKey"] == nil { problem("\(p).wireguardKey", "missing") }
            let identity = meshKey(cm["identity"], what: "identity")
            let key = meshKey(cm["wireguardKey"], what: "WireGuard public key")
            if let identity, let key { s.contacts.append(.init(identity: identity, wireguardKey: key)) }
        }
        s.contactsOnly = bool(m["contactsOnly"])
        if let (value, p) = m["peers"] {
            switch value {
            case .string(let text):
                if text == "auto" { s.peers = .auto } else { problem(p, "\(quoted(text)) is not \"auto\" or an object of identity → prefixes") }
            case .object(let members):
                // In the model, the n-th member is `runtime.peers[n]`, its prefixes `runtime.peers[n].prefixes`.
                var routes: [MeshRuntimeSettings.PeerRoute] = []
                for (n, (key, prefixesValue)) in members.enumerated() {
                    let kp = "\(p).\(key)", mp = "\(p)[\(n)]"
                    renamed[mp] = kp
                    renamed["\(mp).prefixes"] = kp
                    guard let identity = MeshRuntimeSettings.parseKey(key) else {
                        problem(mp, "\(quoted(key)) is not a 32-byte identity (64 hex digits or base64)")
                        routes.append(.init(identity: Array(repeating: 0, count: 32), prefixes: []))
                        continue
                    }
                    var prefixes: [IPPrefix] = []
                    for (pv, pp) in array((prefixesValue, "\(mp).prefixes")) ?? [] {
                        let placeholder = IPPrefix(address: SettingsTranslation.placeholderAddress, length: 32)!
                        guard let text = string((pv, pp)) else { prefixes.append(placeholder); continue }
                        guard let prefix = IPPrefix(text) ?? IPAddress(text).flatMap({ IPPrefix(address: $0, length: $0.family.bitWidth) }) else {
                            problem(pp, "\(quoted(text)) is not an IP prefix")
                            prefixes.append(placeholder)
                            continue
                        }
                        prefixes.append(prefix)
                    }
                    routes.append(.init(identity: identity, prefixes: prefixes))
                }
                s.peers = .routes(routes)
            default:
                problem(p, "expected \"auto\" or an object of identity → prefixes, found \(value.typeName)")
            }
        }
        s.keepaliveSeconds = integer(m["keepaliveSeconds"])
        if let n = integer(m["startTimeoutSeconds"]) { s.startTimeoutSeconds = Double(n) }
        return s
    }
}
