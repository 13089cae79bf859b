// Timers (whitepaper §6; wireguard-go's timers.go): each peer's deadlines (retransmit, new
// handshake, keepalive, persistent keepalive, key zeroing), the nearest of which is the device
// thread's poll timeout, and the packet events that arm and disarm them.

extension WireGuardDevice {
    func nextTimerDeadline() -> Double? {
        var earliest: Double?
        for peer in peers.values {
            if let d = peer.nextDeadline, d < (earliest ?? .infinity) { earliest = d }
        }
        return earliest
    }

    func runTimers(now: Double) {
        for peer in peers.values {
            guard let deadline = peer.nextDeadline, deadline <= now else { continue }
            if let t = peer.zeroKeysAt, t <= now {
                peer.zeroKeysAt = nil
                unregister(peer)
                peer.clearKeys()
                peer.staged.removeAll()
            }
            if let t = peer.retransmitAt, t <= now {
                peer.retransmitAt = nil
                if peer.attempts >= timers.maximumAttempts {
                    // Gave up: what waited is dropped, and the keys go after the usual time.
                    counters.dropsStagedOverflow += UInt64(peer.staged.count)
                    peer.staged.removeAll()
                    if let index = peer.initiationIndex { indexTable[index] = nil }
                    peer.initiation = nil
                    peer.initiationIndex = nil
                    if peer.zeroKeysAt == nil { peer.zeroKeysAt = now + timers.zeroKeysAfter }
                } else {
                    initiateHandshake(peer, now: now, retransmit: true)
                }
            }
            if let t = peer.newHandshakeAt, t <= now {
                // Sent data and heard nothing back: the session may be dead on the other side.
                peer.newHandshakeAt = nil
                initiateHandshake(peer, now: now, retransmit: false)
            }
            if let t = peer.keepaliveAt, t <= now {
                peer.keepaliveAt = nil
                sendData(peer, UnsafeRawBufferPointer(start: nil, count: 0), now: now)
            }
            if let t = peer.persistentKeepaliveAt, t <= now {
                peer.persistentKeepaliveAt = nil
                sendKeepalive(peer, now: now)
            }
        }
    }

    func authenticatedPacketSent(_ peer: Peer, now: Double) {
        peer.keepaliveAt = nil
        if peer.persistentKeepalive > 0 { peer.persistentKeepaliveAt = now + Double(peer.persistentKeepalive) }
    }

    func authenticatedPacketReceived(_ peer: Peer, from source: Endpoint, now: Double) {
        peer.newHandshakeAt = nil
        peer.endpoint = source
        if peer.persistentKeepalive > 0 { peer.persistentKeepaliveAt = now + Double(peer.persistentKeepalive) }
    }
}
