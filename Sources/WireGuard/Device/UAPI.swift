import TunnelgateSettings

/// The cross-platform userspace API that wg(8) speaks to userspace
/// implementations over /var/run/wireguard/NAME.sock: `get=1` answers the
/// device's state as `key=value` lines, `set=1` applies changes. Pure
/// parsing and formatting here; the device applies and answers.
///
/// Accepts and refuses what wireguard-go's device/uapi.go does, with the
/// same errno, except where noted at the key. One difference in kind: a
/// request is parsed whole before anything is applied, so a bad line
/// changes nothing (wireguard-go applies the lines before it).
enum UAPI {
    struct Failure: Error, CustomStringConvertible {
        /// The errno wg(8) prints (EINVAL for bad input, EPROTO for a bad request).
        var errno: Int32
        /// Names the key and what is wrong; never repeats a value (it may be a key).
        var description: String

        /// EINVAL (22): a value or key wireguard-go also refuses with IpcErrorInvalid.
        static func invalid(_ description: String) -> Failure { Failure(errno: 22, description: description) }
        /// EPROTO (71): not a request at all (IpcErrorProtocol).
        static func protocolError(_ description: String) -> Failure { Failure(errno: 71, description: description) }
    }

    enum Request: Equatable {
        case get
        case set(InterfaceChange)
    }

    struct InterfaceChange: Equatable {
        var privateKey: SecretKey??      // .some(nil): remove the key (all zero); in guarded memory
        var listenPort: UInt16?
        var fwmark: UInt32?
        var replacePeers = false
        var peers: [PeerChange] = []
    }

    struct PeerChange: Equatable {
        var publicKey: [UInt8]
        var remove = false
        var updateOnly = false
        var presharedKey: SecretKey??    // .some(nil): remove it (all zero); in guarded memory
        var endpoint: Endpoint?
        var persistentKeepalive: UInt16?
        /// Drop the peer's prefixes before applying `allowedIPChanges` (which then holds only the
        /// `allowed_ip` lines after the last `replace_allowed_ips`).
        var replaceAllowedIPs = false
        /// The `allowed_ip` lines in their order: PREFIX adds, -PREFIX removes (wg(8) ≥ 1.0.20250521).
        var allowedIPChanges: [AllowedIPChange] = []
        /// The prefixes added, in order.
        var allowedIPs: [IPPrefix] { allowedIPChanges.compactMap { if case .add(let p) = $0 { p } else { nil } } }
    }

    /// One `allowed_ip` line.
    enum AllowedIPChange: Equatable {
        case add(IPPrefix)
        /// Removes the prefix from this peer, if it is this peer's (another peer's prefix stays).
        case remove(IPPrefix)
    }

    /// Parses one request: its lines up to (not including) the blank line.
    static func parse(_ lines: [Substring]) throws(Failure) -> Request {
        guard let first = lines.first else { throw .protocolError("empty request") }
        if first == "get=1" {
            guard lines.count == 1 else { throw .invalid("get=1 takes no keys") }
            return .get
        }
        guard first == "set=1" else { throw .protocolError("unknown operation \(printable(first.prefix { $0 != "=" }))") }
        var change = InterfaceChange()
        var peer: PeerChange?
        for line in lines.dropFirst() {
            // wireguard-go: "failed to parse line", IpcErrorProtocol.
            guard let eq = line.firstIndex(of: "=") else { throw .protocolError("a line without '='") }
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
                    p.presharedKey = .some(try secretHexKey(value, key, clamp: false))
                case "endpoint":
                    // An IP literal and a port, [IPv6] bracketed, as netip.ParseAddrPort takes them.
                    // Port 0 is refused (wireguard-go accepts it and then cannot send), and so is an
                    // IPv6 zone (%eth0), which an Endpoint has no room for.
                    guard let e = Endpoint(value) else { throw .invalid("endpoint: not IP:port or [IPv6]:port, port 1–65535") }
                    p.endpoint = e
                case "persistent_keepalive_interval":
                    guard let n = decimal(value, max: UInt16.max) else {
                        throw .invalid("persistent_keepalive_interval: not a number of seconds 0–65535")
                    }
                    p.persistentKeepalive = UInt16(n)
                case "replace_allowed_ips":
                    // Takes effect where it stands, as in wireguard-go: prefixes listed before it go too.
                    p.replaceAllowedIPs = try flag(value, key)
                    p.allowedIPChanges.removeAll()
                case "allowed_ip":
                    if value.hasPrefix("-") {
                        p.allowedIPChanges.append(.remove(try allowedIP(value.dropFirst())))
                    } else {
                        p.allowedIPChanges.append(.add(try allowedIP(value)))
                    }
                case "protocol_version":
                    guard value == "1" else { throw .invalid("protocol_version: only 1 exists") }
                default:
                    throw .invalid("unknown peer key \(printable(key))")
                }
                peer = p
                continue
            }
            switch key {
            case "private_key":
                // Clamped as X25519 uses it and as wireguard-go stores it, so `get` shows the same key.
                change.privateKey = .some(try secretHexKey(value, key, clamp: true))
            case "listen_port":
                // 0 asks for any free port, as in wireguard-go.
                guard let n = decimal(value, max: UInt16.max) else { throw .invalid("listen_port: not a port 0–65535") }
                change.listenPort = UInt16(n)
            case "fwmark":
                // wg(8) sends 0 to clear the mark; an empty value is refused, as by wireguard-go.
                guard let n = decimal(value, max: UInt32.max) else { throw .invalid("fwmark: not a number 0–4294967295") }
                change.fwmark = UInt32(n)
            case "replace_peers": change.replacePeers = try flag(value, key)
            default:
                throw .invalid("unknown interface key \(printable(key))")
            }
        }
        if let peer { change.peers.append(peer) }
        return .set(change)
    }

    /// An `allowed_ip` value (after the "-" of a removal): ADDRESS/LENGTH, the length in decimal
    /// without leading zeros, as netip.ParsePrefix takes it. Host bits are cleared, as wireguard-go's
    /// table does.
    static func allowedIP(_ value: Substring) throws(Failure) -> IPPrefix {
        guard let slash = value.firstIndex(of: "/"),
              case let lengthText = value[value.index(after: slash)...],
              lengthText == "0" || !lengthText.hasPrefix("0"),
              let length = decimal(lengthText, max: 128),
              let prefix = IPPrefix(value), prefix.length == Int(length)
        else { throw .invalid("allowed_ip: not ADDRESS/LENGTH with LENGTH up to 32 (IPv4) or 128 (IPv6)") }
        return prefix.network
    }

    /// A decimal number 0...max as strconv.ParseUint(value, 10, bits) reads it: ASCII digits only,
    /// no sign, no spaces, at least one digit (leading zeros allowed). Nil otherwise.
    static func decimal(_ value: Substring, max: some FixedWidthInteger) -> UInt64? {
        guard !value.isEmpty else { return nil }
        var n: UInt64 = 0
        for c in value.utf8 {
            guard c >= UInt8(ascii: "0"), c <= UInt8(ascii: "9") else { return nil }
            let (times10, o1) = n.multipliedReportingOverflow(by: 10)
            let (sum, o2) = times10.addingReportingOverflow(UInt64(c - UInt8(ascii: "0")))
            guard !o1, !o2, sum <= UInt64(max) else { return nil }
            n = sum
        }
        return n
    }

    /// A key or operation name for an error message: shown only when it looks like one (up to 32
    /// lower-case letters and underscores), so a value pasted into the wrong place, which may be a
    /// key, never reaches a log.
    static func printable(_ name: Substring) -> String {
        let looksLikeName = !name.isEmpty && name.utf8.count <= 32
            && name.utf8.allSatisfy { ($0 >= UInt8(ascii: "a") && $0 <= UInt8(ascii: "z")) || $0 == UInt8(ascii: "_") }
        return looksLikeName ? "'\(name)'" : "(not shown)"
    }

    /// The `set=1` request for `change` as wg(8) writes it (ipc-uapi.h's `userspace_set_device`):
    /// interface keys, then each peer's section in order. `parse(format(c)) == .set(c)` for any
    /// change `parse` produced; the fuzz target checks it.
    static func format(_ change: InterfaceChange) -> [String] {
        var lines = ["set=1"]
        if let key = change.privateKey { lines.append("private_key=\(key.map(secretHex) ?? hex(zeroKey))") }
        if let port = change.listenPort { lines.append("listen_port=\(port)") }
        if let mark = change.fwmark { lines.append("fwmark=\(mark)") }
        if change.replacePeers { lines.append("replace_peers=true") }
        for peer in change.peers {
            lines.append("public_key=\(hex(peer.publicKey))")
            if peer.remove { lines.append("remove=true") }
            if peer.updateOnly { lines.append("update_only=true") }
            if let psk = peer.presharedKey { lines.append("preshared_key=\(psk.map(secretHex) ?? hex(zeroKey))") }
            if let endpoint = peer.endpoint { lines.append("endpoint=\(endpoint)") }
            if let interval = peer.persistentKeepalive { lines.append("persistent_keepalive_interval=\(interval)") }
            if peer.replaceAllowedIPs { lines.append("replace_allowed_ips=true") }
            for change in peer.allowedIPChanges {
                switch change {
                case .add(let prefix): lines.append("allowed_ip=\(prefix)")
                case .remove(let prefix): lines.append("allowed_ip=-\(prefix)")
                }
            }
        }
        return lines
    }

    private static let zeroKey = [UInt8](repeating: 0, count: 32)

    static func hexKey(_ value: Substring, _ key: Substring) throws(Failure) -> [UInt8] {
        let digits = Array(value.utf8)
        guard digits.count == 64 else { throw .invalid("\(key): not 64 hex digits") }
        var out = [UInt8](repeating: 0, count: 32)
        for i in 0..<32 {
            guard let hi = hexValue(digits[2 * i]), let lo = hexValue(digits[2 * i + 1]) else {
                throw .invalid("\(key): not 64 hex digits")
            }
            out[i] = hi << 4 | lo
        }
        return out
    }

    /// A secret key's 64 hex digits, decoded digit by digit straight into guarded memory (no array of
    /// the key is made); nil for the all-zero key (removal). `clamp`: as an X25519 private key.
    static func secretHexKey(_ value: Substring, _ key: Substring, clamp: Bool) throws(Failure) -> SecretKey? {
        let digits = value.utf8
        guard digits.count == 64 else { throw .invalid("\(key): not 64 hex digits") }
        guard let memory = SodiumSecretMemory(count: 32) else { throw .invalid("\(key): no memory for the key") }
        let ok = memory.withUnsafeMutableBytes { out -> Bool in
            var i = digits.startIndex
            for n in 0..<32 {
                guard let hi = hexValue(digits[i]) else { return false }
                i = digits.index(after: i)
                guard let lo = hexValue(digits[i]) else { return false }
                i = digits.index(after: i)
                out[n] = hi << 4 | lo
            }
            return true
        }
        guard ok else {
            memory.wipe()
            throw .invalid("\(key): not 64 hex digits")
        }
        let zero = memory.withUnsafeBytes { $0.allSatisfy { $0 == 0 } }
        if zero { return nil }
        if clamp {
            memory.withUnsafeMutableBytes { k in
                k[0] &= 248
                k[31] = (k[31] & 127) | 64
            }
        }
        return SecretKey(memory: memory)
    }

    /// The hex of a secret key, as a String: for `format` (tests, the fuzz target), never the device.
    static func secretHex(_ key: SecretKey) -> String {
        key.withUnsafeBytes { hex(Array($0)) }
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
        guard value == "true" else { throw .invalid("\(key): only 'true' is meaningful") }
        return true
    }
}
