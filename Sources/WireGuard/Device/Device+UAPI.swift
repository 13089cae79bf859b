import LinuxSystem
import TunnelgateSettings

// Serving wg(8) (wireguard-go's uapi.go): the UAPI socket's connections, one request each; `get`
// answered in secure memory, `set` parsed whole (UAPI.parse) and then applied. With the engine's
// carrier sockets, `listen_port` and `fwmark` are refused (EPERM): the engine bound and marked them.

extension WireGuardDevice {
    /// Applies a UAPI `set`; the device thread calls it.
    func apply(_ change: UAPI.InterfaceChange, now: Double) throws(UAPI.Failure) {
        // What would be refused is refused before anything changes.
        if let mark = change.fwmark, mark != bind.mark, let managed = managedMark {
            throw UAPI.Failure(errno: Errno.permissionDenied.rawValue,
                               description: "fwmark: the sockets carry 0x\(String(managed, radix: 16)), "
                                   + "the tunnel's carrier identity, which Tunnelgate sets")
        }
        if let port = change.listenPort, port != bind.port {
            do throws(BindError) { try bind.rebind(port: port) } catch {
                throw UAPI.Failure(errno: error.errno.rawValue, description: error.description)
            }
        }
        if let mark = change.fwmark, mark != bind.mark {
            do throws(BindError) { try bind.setMark(mark) } catch {
                throw UAPI.Failure(errno: error.errno.rawValue, description: error.description)
            }
        }
        if let key = change.privateKey {
            guard let key, let newKey = PrivateKey(key) else {
                throw UAPI.Failure(errno: Errno.invalidArgument.rawValue, description: "private_key: removing the key is not supported")
            }
            privateKey = newKey
            publicKey = newKey.publicKey
            cookies = CookieGenerator(localPublic: publicKey, now: now)
            for peer in peers.values {
                unregister(peer)
                peer.clearKeys()
            }
            // A peer with our own public key cannot exist.
            if let id = peerByKey[publicKey], let peer = peers[id] { removePeer(peer) }
        }
        if change.replacePeers { for peer in Array(peers.values) { removePeer(peer) } }
        for p in change.peers {
            guard let key = WireGuardKey(p.publicKey) else { continue }
            if p.remove {
                if let id = peerByKey[key], let peer = peers[id] { removePeer(peer) }
                continue
            }
            if p.updateOnly && peerByKey[key] == nil { continue }
            if key == publicKey { continue }
            let peer = addPeer(key)
            if let psk = p.presharedKey { peer.presharedKey = psk }
            if let endpoint = p.endpoint { peer.endpoint = endpoint }
            if p.replaceAllowedIPs { allowed.removeAll(peer: peer.id) }
            for change in p.allowedIPChanges {
                switch change {
                case .add(let prefix): allowed.insert(prefix, peer: peer.id)
                case .remove(let prefix): allowed.remove(prefix, peer: peer.id)
                }
            }
            if let keepalive = p.persistentKeepalive {
                let wasOff = peer.persistentKeepalive == 0
                peer.persistentKeepalive = keepalive
                peer.persistentKeepaliveAt = nil
                if keepalive > 0, wasOff, peer.endpoint != nil { sendKeepalive(peer, now: now) }
            }
        }
        publish()
    }

    func serveUAPI(now: Double) {
        guard let listener = uapi else { return }
        while let connection = try? UnixSocket.accept(listener) {
            defer { connection.close() }
            // A client may take a second per read and write, no more; one that cannot be bounded is not served.
            do throws(SystemCallError) { try connection.setTimeouts(seconds: 1) } catch {
                log("wg API: \(error)")
                continue
            }
            guard let peer = try? UnixSocket.peerCredentials(connection),
                  peer.uid == 0 || peer.uid == ProcessControl.effectiveUserID else {
                continue
            }
            var lines: [Substring] = []
            var total = 0
            while let line = UnixSocket.readLine(connection, limit: 4096) {
                total += line.count
                if line.isEmpty || total > 1 << 20 { break }
                lines.append(Substring(String(decoding: line, as: UTF8.self)))
            }
            // wg(8) connects and closes without a word to see whether an interface is there.
            if lines.isEmpty { continue }
            var reply: String
            // A get answer carries the keys in hex: built in secure memory, wiped once sent.
            var answer: SecretText?
            // wg(8) reads a set reply's errno as negative (as wireguard-go writes it), a get reply's as digits.
            let isSet = lines.first == "set=1"
            do throws(UAPI.Failure) {
                switch try UAPI.parse(lines) {
                case .get:
                    answer = uapiGet()
                    reply = answer == nil ? "errno=\(Errno.outOfMemory.rawValue)\n\n" : "errno=0\n\n"
                case .set(let change):
                    try apply(change, now: now)
                    reply = "errno=0\n\n"
                }
            } catch {
                log("wg API: \(error.description)")
                reply = "errno=\(isSet ? -error.errno : error.errno)\n\n"
            }
            if let answer, (try? answer.append(reply)) != nil {
                answer.withUnsafeBytes { send(connection, $0) }
            } else {
                Array(reply.utf8).withUnsafeBytes { send(connection, $0) }
            }
        }
    }

    /// Writes all of `bytes` to a UAPI client. MSG_NOSIGNAL: a client that hung up must not SIGPIPE
    /// the tunnel's process.
    func send(_ connection: FileDescriptor, _ bytes: UnsafeRawBufferPointer) {
        var offset = 0
        while offset < bytes.count {
            guard let n = try? connection.send(UnsafeRawBufferPointer(rebasing: bytes[offset...])), n > 0 else { break }
            offset += n
        }
    }

    /// The `get=1` answer (without its errno line), in secure memory; nil when none could be mapped.
    func uapiGet() -> SecretText? {
        do throws(SystemCallError) {
            let out = try SecretText(capacity: 4096 + 1024 * peers.count)
            try out.append("private_key=")
            let result = privateKey.withUnsafeBytes { key in Result { () throws(SystemCallError) in try out.appendHex(key) } }
            try result.get()
            try out.append("\nlisten_port=\(bind.port)\n")
            if bind.mark != 0 { try out.append("fwmark=\(bind.mark)\n") }
            for peer in peers.values.sorted(by: { $0.id < $1.id }) {
                try out.append("public_key=\(UAPI.hex(peer.publicKey.bytes))\npreshared_key=")
                if let psk = peer.presharedKey {
                    try psk.withUnsafeBytes { key in Result { () throws(SystemCallError) in try out.appendHex(key) } }.get()
                } else {
                    try out.append(String(repeating: "0", count: 64))
                }
                try out.append("\n" + uapiPeerLines(peer))
            }
            return out
        } catch {
            log("wg API: no secure memory for the get answer: \(error)")
            return nil
        }
    }

    /// A peer's public `get` lines after its preshared key.
    func uapiPeerLines(_ peer: Peer) -> String {
        var out = "protocol_version=1\n"
        if let endpoint = peer.endpoint { out += "endpoint=\(endpoint)\n" }
        out += "last_handshake_time_sec=\(peer.lastHandshake.seconds)\n"
        out += "last_handshake_time_nsec=\(peer.lastHandshake.nanoseconds)\n"
        out += "tx_bytes=\(peer.txBytes)\nrx_bytes=\(peer.rxBytes)\n"
        out += "persistent_keepalive_interval=\(peer.persistentKeepalive)\n"
        for prefix in allowed.prefixes(of: peer.id) { out += "allowed_ip=\(prefix)\n" }
        return out
    }
}
