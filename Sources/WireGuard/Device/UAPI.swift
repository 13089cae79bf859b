import TunnelgateSettings

/// The cross-platform userspace API that wg(8) speaks to userspace
/// implementations over /var/run/wireguard/NAME.sock: `get=1` answers the
/// device's state as `key=value` lines, `set=1` applies changes. Pure
/// parsing and formatting here; the device applies and answers.
enum UAPI {
    struct Failure: Error, CustomStringConvertible {
        /// The errno wg(8) prints (EINVAL for bad input, EPROTO for a bad request).
        var errno: Int32
        var description: String
    }

    enum Request: Equatable {
        case get
        case set(InterfaceChange)
    }

    struct InterfaceChange: Equatable {
        var privateKey: [UInt8]??        // .some(nil): remove the key (all zero)
        var listenPort: UInt16?
        var fwmark: UInt32?
        var replacePeers = false
        var peers: [PeerChange] = []
    }

    struct PeerChange: Equatable {
        var publicKey: [UInt8]
        var remove = false
        var updateOnly = false
        var presharedKey: [UInt8]??      // .some(nil): remove it (all zero)
        var endpoint: Endpoint?
        var persistentKeepalive: UInt16?
        var replaceAllowedIPs = false
        var allowedIPs: [IPPrefix] = []
    }

    /// Parses one request: its lines up to (not including) the blank line.
    static func parse(_ lines: [Substring]) throws(Failure) -> Request {
        guard let first = lines.first else { throw Failure(errno: 71, description: "empty request") }
        if first == "get=1" {
            guard lines.count == 1 else { throw Failure(errno: 22, description: "get=1 takes no keys") }
            return .get
        }
        guard first == "set=1" else { throw Failure(errno: 71, description: "unknown operation \(first.prefix(32))") }
        var change = InterfaceChange()
        var peer: PeerChange?
        for line in lines.dropFirst() {
            guard let eq = line.firstIndex(of: "=") else { throw Failure(errno: 22, description: "a line without '='") }
            let key = line[..<eq], value = line[line.index(after: eq)...]
            if key == "public_key" {
                if let peer { change.peers.append(peer) }
                peer = PeerChange(publicKey: try hexKey(value, key))
                continue
            }
            if var p = peer {
                switch key {
                case "remove": p.remove = try flag(value, key)
                case "update_only": p.updateOnly = try flag(value, key)
                case "preshared_key":
                    let k = try hexKey(value, key)
                    p.presharedKey = k.allSatisfy { $0 == 0 } ? .some(nil) : .some(k)
                case "endpoint":
                    guard let e = Endpoint(value) else { throw Failure(errno: 22, description: "endpoint: not IP:port") }
                    p.endpoint = e
                case "persistent_keepalive_interval":
                    guard let n = UInt16(value) else { throw Failure(errno: 22, description: "persistent_keepalive_interval: not 0–65535") }
                    p.persistentKeepalive = n
                case "replace_allowed_ips": p.replaceAllowedIPs = try flag(value, key)
                case "allowed_ip":
                    guard let prefix = IPPrefix(value) else { throw Failure(errno: 22, description: "allowed_ip: not a prefix") }
                    p.allowedIPs.append(prefix.network)
                case "protocol_version":
                    guard value == "1" else { throw Failure(errno: 22, description: "protocol_version: only 1 exists") }
                default:
                    throw Failure(errno: 22, description: "unknown peer key \(key.prefix(40))")
                }
                peer = p
                continue
            }
            switch key {
            case "private_key":
                let k = try hexKey(value, key)
                change.privateKey = k.allSatisfy { $0 == 0 } ? .some(nil) : .some(k)
            case "listen_port":
                guard let n = UInt16(value) else { throw Failure(errno: 22, description: "listen_port: not 0–65535") }
                change.listenPort = n
            case "fwmark":
                guard let n = value.isEmpty ? 0 : UInt32(value) else { throw Failure(errno: 22, description: "fwmark: not a 32-bit number") }
                change.fwmark = n
            case "replace_peers": change.replacePeers = try flag(value, key)
            default:
                throw Failure(errno: 22, description: "unknown interface key \(key.prefix(40))")
            }
        }
        if let peer { change.peers.append(peer) }
        return .set(change)
    }

    /// The `set=1` request for `change` as wg(8) writes it (ipc-uapi.h's `userspace_set_device`):
    /// interface keys, then each peer's section in order. `parse(format(c)) == .set(c)` for any
    /// change `parse` produced; the fuzz target checks it.
    static func format(_ change: InterfaceChange) -> [String] {
        var lines = ["set=1"]
        if let key = change.privateKey { lines.append("private_key=\(hex(key ?? zeroKey))") }
        if let port = change.listenPort { lines.append("listen_port=\(port)") }
        if let mark = change.fwmark { lines.append("fwmark=\(mark)") }
        if change.replacePeers { lines.append("replace_peers=true") }
        for peer in change.peers {
            lines.append("public_key=\(hex(peer.publicKey))")
            if peer.remove { lines.append("remove=true") }
            if peer.updateOnly { lines.append("update_only=true") }
            if let psk = peer.presharedKey { lines.append("preshared_key=\(hex(psk ?? zeroKey))") }
            if let endpoint = peer.endpoint { lines.append("endpoint=\(endpoint)") }
            if let interval = peer.persistentKeepalive { lines.append("persistent_keepalive_interval=\(interval)") }
            if peer.replaceAllowedIPs { lines.append("replace_allowed_ips=true") }
            for prefix in peer.allowedIPs { lines.append("allowed_ip=\(prefix)") }
        }
        return lines
    }

    private static let zeroKey = [UInt8](repeating: 0, count: 32)

    static func hexKey(_ value: Substring, _ key: Substring) throws(Failure) -> [UInt8] {
        let digits = Array(value.utf8)
        guard digits.count == 64 else { throw Failure(errno: 22, description: "\(key): not 64 hex digits") }
        var out = [UInt8](repeating: 0, count: 32)
        for i in 0..<32 {
            guard let hi = hexValue(digits[2 * i]), let lo = hexValue(digits[2 * i + 1]) else {
                throw Failure(errno: 22, description: "\(key): not 64 hex digits")
            }
            out[i] = hi << 4 | lo
        }
        return out
    }

    static func hex(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var out = [UInt8]()
        out.reserveCapacity(bytes.count * 2)
        for b in bytes { out.append(digits[Int(b >> 4)]); out.append(digits[Int(b & 15)]) }
        return String(decoding: out, as: UTF8.self)
    }

    private static func hexValue(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): c - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): c - UInt8(ascii: "A") + 10
        default: nil
        }
    }

    private static func flag(_ value: Substring, _ key: Substring) throws(Failure) -> Bool {
        guard value == "true" else { throw Failure(errno: 22, description: "\(key): only 'true' is meaningful") }
        return true
    }
}
