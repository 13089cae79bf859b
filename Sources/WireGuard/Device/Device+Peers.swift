// Peers (wireguard-go's peer.go): adding and removing them with their allowed IPs and receive
// indices, and pinning a configured host name's endpoint to the address the engine resolved.

extension WireGuardDevice {
    @discardableResult
    func addPeer(_ key: WireGuardKey) -> Peer {
        if let id = peerByKey[key], let peer = peers[id] { return peer }
        let peer = Peer(id: nextPeerID, publicKey: key)
        nextPeerID += 1
        peers[peer.id] = peer
        peerByKey[key] = peer.id
        return peer
    }

    func removePeer(_ peer: Peer) {
        unregister(peer)
        peer.clearKeys()
        allowed.removeAll(peer: peer.id)
        peers[peer.id] = nil
        peerByKey[peer.publicKey] = nil
    }

    func unregister(_ peer: Peer) {
        for index in peer.indices { indexTable[index] = nil }
    }

    /// Sets a peer's endpoint before the device starts: a host name the engine resolved once and pinned
    /// for the tunnel's life (the address its carrier exemption names).
    public func pin(endpoint: Endpoint, forPeer key: WireGuardKey) {
        guard let id = peerByKey[key], let peer = peers[id] else { return }
        peer.endpoint = endpoint
        publish()
    }
}
