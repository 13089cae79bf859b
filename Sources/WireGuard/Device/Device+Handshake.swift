import CSodium
import LinuxSystem

// Handshakes (whitepaper §5.4; wireguard-go's noise-protocol.go and the handshake half of
// receive.go): initiations sent and retried, initiations answered, responses consumed. Their admission
// (MAC1; under load, more than `loadLimitPerWindow` handshake messages in 100 ms, a valid MAC2 or a
// cookie reply, and the source's token bucket) is the handshake thread's (HandshakeGate).

extension WireGuardDevice {
    func newIndex(for peer: Peer) -> UInt32 {
        while true {
            var index: UInt32 = 0
            randombytes_buf(&index, 4)
            if index != 0, indexTable[index] == nil {
                indexTable[index] = peer.id
                return index
            }
        }
    }

    func timestamp() -> [UInt8] {
        let clock = ProcessControl.wallClock()
        var stamp = WireGuardCrypto.tai64n(unixSeconds: UInt64(max(0, clock.seconds)), nanoseconds: UInt32(clock.nanoseconds))
        // Strictly increasing even if the clock steps back: peers refuse an initiation that is not newer.
        if !stamp.lexicographicallyPrecedes(lastTimestamp) && stamp != lastTimestamp {
            lastTimestamp = stamp
        } else {
            stamp = lastTimestamp
            var i = 11
            while i >= 0 { stamp[i] &+= 1; if stamp[i] != 0 { break }; i -= 1 }
            lastTimestamp = stamp
        }
        return stamp
    }

    /// Sends a handshake initiation. A new attempt (not a retransmit) is
    /// not started while one is in flight and younger than the rekey timeout.
    func initiateHandshake(_ peer: Peer, now: Double, retransmit: Bool) {
        guard let endpoint = peer.endpoint else { return }
        if !retransmit {
            if peer.initiation != nil, now - peer.lastInitiationSent < timers.rekeyTimeout { return }
            peer.attempts = 0
        }
        if let old = peer.initiationIndex { indexTable[old] = nil }
        let index = newIndex(for: peer)
        let message: [UInt8], state: InitiatorState
        do {
            (message, state) = try Handshake.createInitiation(
                localStatic: privateKey, remoteStatic: peer.publicKey, presharedKey: peer.presharedKey,
                senderIndex: index, timestamp: timestamp(),
                cookie: peer.freshCookie(now: now, lifetime: timers.cookieRefreshTime))
        } catch {
            indexTable[index] = nil
            peer.initiationIndex = nil
            counters.dropsHandshake += 1
            return
        }
        peer.initiation = state
        peer.initiationIndex = index
        peer.lastMAC1 = Array(message[116..<132])
        peer.lastInitiationSent = now
        peer.attempts += 1
        var jitter: UInt32 = 0
        randombytes_buf(&jitter, 4)
        peer.retransmitAt = now + timers.rekeyTimeout + Double(jitter % 334) / 1000 * timers.scale
        counters.initiationsSent += 1
        _ = message.withUnsafeBytes { send($0, to: endpoint) }
        authenticatedPacketSent(peer, now: now)
    }

    /// An initiation the handshake thread admitted (HandshakeGate: MAC1, and under load MAC2 and the
    /// source's bucket): its Diffie-Hellman, against the peers' state this thread owns.
    func handleInitiation(_ message: UnsafeRawBufferPointer, from source: Endpoint, now: Double) {
        let received: ReceivedInitiation
        do { received = try Handshake.consumeInitiation(message, localStatic: privateKey) } catch {
            counters.dropsHandshake += 1
            return
        }
        guard let id = peerByKey[received.remoteStatic], let peer = peers[id] else {
            counters.dropsUnknownPeer += 1
            return
        }
        guard peer.greatestTimestamp.lexicographicallyPrecedes(received.timestamp) else {
            counters.dropsReplayedInitiation += 1
            return
        }
        // At most 50 initiations a second per peer are answered (each costs Diffie-Hellman operations).
        guard now - peer.lastInitiationConsumed >= 0.02 else {
            counters.dropsInitiationRate += 1
            return
        }
        peer.greatestTimestamp = received.timestamp
        peer.lastInitiationConsumed = now
        let index = newIndex(for: peer)
        let response: [UInt8], keypair: Keypair
        do {
            (response, keypair) = try Handshake.createResponse(
                to: received, presharedKey: peer.presharedKey, senderIndex: index,
                cookie: peer.freshCookie(now: now, lifetime: timers.cookieRefreshTime))
        } catch {
            indexTable[index] = nil
            counters.dropsHandshake += 1
            return
        }
        if let old = peer.next {
            indexTable[old.localIndex] = nil
            peer.next?.keypair.zero()
        }
        peer.next = Session(keypair: keypair, created: now)
        peer.lastMAC1 = Array(response[60..<76])
        authenticatedPacketReceived(peer, from: source, now: now)
        counters.responsesSent += 1
        _ = response.withUnsafeBytes { send($0, to: source) }
        authenticatedPacketSent(peer, now: now)
        peer.zeroKeysAt = now + timers.zeroKeysAfter
    }

    /// A response the handshake thread admitted, as an initiation.
    func handleResponse(_ message: UnsafeRawBufferPointer, from source: Endpoint, now: Double) {
        let receiver = message.loadUnaligned(fromByteOffset: 8, as: UInt32.self).littleEndian
        guard let id = indexTable[receiver], let peer = peers[id], peer.initiationIndex == receiver,
              let state = peer.initiation else {
            counters.dropsUnknownIndex += 1
            return
        }
        let keypair: Keypair
        do {
            keypair = try Handshake.consumeResponse(message, state: state, localStatic: privateKey,
                                                   presharedKey: peer.presharedKey)
        } catch {
            counters.dropsHandshake += 1
            return
        }
        peer.initiation = nil
        peer.initiationIndex = nil  // the index now belongs to the session
        if let next = peer.next {
            indexTable[next.localIndex] = nil
            peer.next?.keypair.zero()
            peer.next = nil
        }
        rotate(peer, in: Session(keypair: keypair, created: now))
        handshakeCompleted(peer, now: now)
        authenticatedPacketReceived(peer, from: source, now: now)
        // Confirm the session to the responder: staged packets, or else a keepalive.
        if !sendStaged(peer, now: now) { sendData(peer, UnsafeRawBufferPointer(start: nil, count: 0), now: now) }
    }

    func rotate(_ peer: Peer, in session: Session) {
        if let old = peer.previous {
            indexTable[old.localIndex] = nil
            peer.previous?.keypair.zero()
        }
        peer.previous = peer.current
        peer.current = session
    }

    func handshakeCompleted(_ peer: Peer, now: Double) {
        peer.retransmitAt = nil
        peer.attempts = 0
        peer.lastHandshake = ProcessControl.wallClock()
        peer.handshakesCompleted += 1
        counters.handshakesCompleted += 1
        peer.zeroKeysAt = now + timers.zeroKeysAfter
    }

    func handleCookieReply(_ message: UnsafeRawBufferPointer, now: Double) {
        let receiver = message.loadUnaligned(fromByteOffset: 4, as: UInt32.self).littleEndian
        guard let id = indexTable[receiver], let peer = peers[id], let mac1 = peer.lastMAC1 else {
            counters.dropsUnknownIndex += 1
            return
        }
        guard let cookie = try? Handshake.consumeCookieReply(message, remotePublic: peer.publicKey, lastMAC1: mac1) else {
            counters.dropsHandshake += 1
            return
        }
        peer.cookie = cookie
        peer.cookieReceived = now
        counters.cookieRepliesReceived += 1
    }
}
