/// `{"kind": "wireguard", …}`: the JSON form of the WireGuard runtime.
/// Keys live in owner-only files, never in the configuration itself.
extension SettingsReader {
    static let wireguardKeys = ["kind", "privateKeyFile", "listenPort", "fwMark", "peers"]
    static let wireguardPeerKeys = ["publicKey", "presharedKeyFile", "endpoint", "allowedIPs", "persistentKeepalive"]

    mutating func readWireGuardRuntime(_ entry: (JSONValue, String)) -> WireGuardSettings {
        let path = entry.1
        let m = members(entry.0, path, allowed: Self.wireguardKeys) ?? [:]
        if m["privateKeyFile"] == nil {
            problem("\(path).privateKeyFile", "missing (an owner-only file holding the base64 private key, as `wg genkey` writes it)")
        }
        let privateKey = secretKeyFile(m["privateKeyFile"], what: "private key", writer: "wg genkey")
        var listenPort: UInt16?
        if let n = integer(m["listenPort"]) {
            if let port = UInt16(exactly: n) { listenPort = port == 0 ? nil : port }
            else { problem("\(path).listenPort", "\(n) is outside 0–65535 (0: any port)") }
        }
        var fwMark: UInt32?
        if let n = integer(m["fwMark"]) {
            if let mark = UInt32(exactly: n) { fwMark = mark == 0 ? nil : mark }
            else { problem("\(path).fwMark", "\(n) is outside 0–4294967295 (0: the tunnel's own mark)") }
        }
        var peers: [WireGuardSettings.Peer] = []
        for (value, p) in array(m["peers"]) ?? [] {
            guard let pm = members(value, p, allowed: Self.wireguardPeerKeys) else {
                peers.append(WireGuardSettings.Peer(publicKey: WireGuardSettings.placeholderPublicKey))
                continue
            }
            var publicKey = WireGuardSettings.placeholderPublicKey
            if let text = string(pm["publicKey"]) {
                // Not quoted back: a private key pasted here by mistake must not reach a terminal or log.
                if let key = Base64Key.decode(text) { publicKey = key } else { problem("\(p).publicKey", Base64Key.problem) }
            } else if pm["publicKey"] == nil {
                problem("\(p).publicKey", "missing (the peer's base64 public key)")
            }
            let presharedKey = secretKeyFile(pm["presharedKeyFile"], what: "preshared key", writer: "wg genpsk")
            var endpoint: WireGuardSettings.Endpoint?
            if let text = string(pm["endpoint"]) {
                switch WireGuardSettings.Endpoint.parse(text) {
                case .success(let e): endpoint = e
                case .failure(let reason): problem("\(p).endpoint", reason.message)
                }
            }
            // A prefix given twice for one peer is one: kept once, so later ones' model indices are
            // not their JSON indices.
            var allowed: [IPPrefix] = []
            var refusedAllowed: Set<Int> = []
            for (pv, pp) in array(pm["allowedIPs"]) ?? [] {
                let modelPath = "\(p).allowedIPs[\(allowed.count)]"
                if modelPath != pp { renamed[modelPath] = pp }
                guard let text = string((pv, modelPath)), let prefix = IPPrefix(text) else {
                    if case .string(let text) = pv { problem(modelPath, "\(quoted(text)) is not an address prefix (ADDRESS/LENGTH)") }
                    refusedAllowed.insert(allowed.count)
                    allowed.append(IPPrefix(address: SettingsTranslation.placeholderAddress, length: 32)!)
                    continue
                }
                if allowed.indices.contains(where: { allowed[$0] == prefix && !refusedAllowed.contains($0) }) {
                    renamed[modelPath] = nil
                    continue
                }
                allowed.append(prefix)
            }
            var keepalive: UInt16?
            if let n = integer(pm["persistentKeepalive"]) {
                if let seconds = UInt16(exactly: n) { keepalive = seconds == 0 ? nil : seconds }
                else { problem("\(p).persistentKeepalive", "\(n) is outside 0–65535 seconds (0: off)") }
            }
            peers.append(WireGuardSettings.Peer(publicKey: publicKey, presharedKey: presharedKey, endpoint: endpoint,
                                                allowedIPs: allowed, persistentKeepalive: keepalive))
        }
        return WireGuardSettings(privateKey: privateKey ?? WireGuardSettings.placeholderPrivateKey, listenPort: listenPort,
                                 fwMark: fwMark, peers: peers)
    }

    /// The key in the owner-only file named at `entry`, read through `secretFiles`.
    mutating func secretKeyFile(_ entry: (JSONValue, String)?, what: String, writer: String) -> SecretKey? {
        guard let entry, let path = string(entry) else { return nil }
        guard path.hasPrefix("/") else { problem(entry.1, "\(quoted(path)) is not an absolute path"); return nil }
        switch secretFiles.readSecretFile(path) {
        case .failure(let failure):
            problem(entry.1, failure.reason)
            return nil
        case .success(let file):
            // A key file holds the base64 text `wg genkey` / `wg genpsk` print, with its newline. The key
            // is decoded from the file's bytes (wiped when `file` goes) straight into secret memory.
            let decoded: SecretKey.Decoded? = file.withUnsafeBytes { raw in
                var end = raw.count
                while end > 0, [0x0a, 0x0d, 0x20, 0x09].contains(raw[end - 1]) { end -= 1 }
                var start = 0
                while start < end, raw[start] == 0x20 || raw[start] == 0x09 { start += 1 }
                let text = UnsafeRawBufferPointer(rebasing: raw[start..<end])
                // Inner white space is not skipped here: a key file holds exactly one key.
                guard !text.contains(where: { $0 == 0x20 || $0 == 0x09 }) else { return .notAKey }
                return SecretKey.decode(base64: text, using: secretFiles.secretMemory)
            }
            switch decoded {
            case .key(let key)?:
                return key
            case .noMemory?:
                problem(entry.1, "no secure memory could be mapped for the \(what) in \(path)")
                return nil
            case .notAKey?, nil:
                problem(entry.1, "\(path) does not hold a base64 32-byte \(what) (as `\(writer)` writes it)")
                return nil
            }
        }
    }
}
