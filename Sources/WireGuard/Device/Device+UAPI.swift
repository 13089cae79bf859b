import LinuxSystem
import TunnelgateSettings

// Serving wg(8) (wireguard-go's uapi.go): the UAPI socket's connections, one request each, read and
// parsed on the UAPI thread (UAPIServer); here, on the device thread, only the answer: `get` built in
// secure memory, `set` (parsed whole by UAPI.parse) applied. With the engine's
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
            // The handshake thread sends cookie replies on these sockets: not while they are replaced.
            let result = gate?.sendLock.withLock { _ in Result { () throws(BindError) in try bind.rebind(port: port) } }
                ?? Result { () throws(BindError) in try bind.rebind(port: port) }
            if case .failure(let error) = result {
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
            gate?.rekey(publicKey: publicKey, now: now)
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

    /// Answers a request the UAPI thread parsed (UAPIServer), on the device thread: a `get` answer
    /// built in secure memory, or a `set` applied. Then tells the UAPI thread, which writes the reply.
    func answer(_ exchange: UAPIServer.Exchange, server: UAPIServer, now: Double) {
        switch exchange.request {
        case .get:
            exchange.answer = uapiGet()
            exchange.reply = exchange.answer == nil ? "errno=\(Errno.outOfMemory.rawValue)\n\n" : "errno=0\n\n"
        case .set(let change):
            do throws(UAPI.Failure) {
                try apply(change, now: now)
                exchange.reply = "errno=0\n\n"
            } catch {
                log("wg API: \(error.description)")
                // wg(8) reads a set reply's errno as negative (as wireguard-go writes it).
                exchange.reply = "errno=\(-error.errno)\n\n"
            }
        }
        var one: UInt8 = 1
        _ = withUnsafeBytes(of: &one) { try? server.answeredWriter.write($0) }
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
