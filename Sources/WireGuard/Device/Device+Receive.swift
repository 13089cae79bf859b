import TUN
import TunnelgateSettings

// Receiving: UDP → open → cryptokey routing → TUN (wireguard-go's receive.go). A recvmmsg batch is
// dispatched by message type; a transport message is checked against its session's replay window,
// opened in place, and its packet, if the sender may use its source address, written to the TUN from
// where it lies, the whole batch's packets in one batch write.

extension WireGuardDevice {
    /// Up to two recvmmsg batches per wake-up, so the TUN side gets its turn. What a batch decrypted
    /// goes to the TUN as one batch write before the next recvmmsg reuses its slots.
    @discardableResult
    func receiveDatagrams(_ family: IPFamily, now: Double) -> Int {
        var total = 0
        for _ in 0..<2 {
            let n = bind.receive(family, into: received)
            total += n
            guard n > 0 else { return total }
            // On both threads when the device is saturated: every transport message of the batch is
            // checked here first, opened in two halves at once, and then taken in order.
            let split = cryptoWorker != nil && splitsCrypto(messages(in: n))
            for i in 0..<n {
                let (datagram, source) = received.datagram(i)
                guard let source else { continue }
                let size = received.segmentSize(i)
                guard size > 0, size < datagram.count else {
                    dispatch(datagram, from: source, now: now, openLater: split)
                    continue
                }
                // A run the kernel merged (UDP_GRO): each segment is one of the peer's datagrams.
                counters.mergedReceives += 1
                var offset = 0
                while offset < datagram.count {
                    let length = min(size, datagram.count - offset)
                    dispatch(UnsafeMutableRawBufferPointer(rebasing: datagram[offset..<(offset + length)]), from: source, now: now,
                             openLater: split)
                    offset += length
                }
            }
            if split { openStaged(now: now) }
            flushTunWrites()
            if n < received.capacity { return total }
        }
        return total
    }

    /// The messages the `n` datagrams just received hold (a merged run counts its segments).
    func messages(in n: Int) -> Int {
        var count = 0
        for i in 0..<n {
            let size = received.segmentSize(i), length = received.datagram(i).bytes.count
            count += size > 0 ? (length + size - 1) / size : 1
        }
        return count
    }

    /// Opens the transport messages `dispatch(openLater:)` queued, on both threads, then takes each in
    /// the order it arrived.
    func openStaged(now: Double) {
        guard openJobs.count > 0 else { return }
        cryptoWorker?.run(openJobs, split: true)
        for i in 0..<opened.count {
            finishTransport(opened[i], plaintextLength: openJobs.result(i), now: now)
        }
        openJobs.removeAll()
        opened.removeAll(keepingCapacity: true)
    }

    /// The handshake messages the handshake thread admitted, answered here (their Diffie-Hellman).
    func admittedHandshakes(now: Double) {
        guard let gate else { return }
        var handled = 0
        while handled < 64, gate.admitted.pop({ message, source in
            switch MessageType.classify(message) {
            case .initiation: handleInitiation(message, from: source, now: now)
            case .response: handleResponse(message, from: source, now: now)
            default: break
            }
        }) { handled += 1 }
        // More left: the next wake-up finds them (each admitted message wakes the thread).
        if handled == 64, !gate.admitted.isEmpty { wakeUp() }
    }

    func dispatch(_ datagram: UnsafeMutableRawBufferPointer, from source: Endpoint, now: Double, openLater: Bool = false) {
        let bytes = UnsafeRawBufferPointer(datagram)
        switch MessageType.classify(bytes) {
        // Admission is the handshake thread's; what it admits comes back through `admittedHandshakes`.
        case .initiation, .response: gate?.submit(bytes, from: source)
        case .cookieReply: handleCookieReply(bytes, now: now)
        case .transport:
            guard let prepared = prepareTransport(datagram, from: source, now: now) else { return }
            if openLater {
                // Full (never, at its size): what is queued goes first, so the order stays.
                if openJobs.isFull { openStaged(now: now) }
                openJobs.append(datagram.baseAddress! + MessageType.transportHeaderLength,
                                length: datagram.count - MessageType.transportHeaderLength, counter: prepared.counter,
                                cipher: prepared.cipher)
                opened.append(prepared)
            } else {
                let length = prepared.cipher.open(counter: prepared.counter, datagram.baseAddress! + MessageType.transportHeaderLength,
                                                  length: datagram.count - MessageType.transportHeaderLength)
                finishTransport(prepared, plaintextLength: length, now: now)
            }
        case nil: counters.dropsMalformedDatagram += 1
        }
    }

    /// A transport message checked before it is opened: for a session this peer has, not expired, not
    /// a replay. Nil when it is none of that (counted).
    func prepareTransport(_ datagram: UnsafeMutableRawBufferPointer, from source: Endpoint, now: Double) -> OpenedTransport? {
        let receiver = datagram.loadUnaligned(fromByteOffset: 4, as: UInt32.self).littleEndian
        let counter = datagram.loadUnaligned(fromByteOffset: 8, as: UInt64.self).littleEndian
        guard let id = indexTable[receiver], let peer = peers[id], let slot = peer.slot(of: receiver) else {
            counters.dropsUnknownIndex += 1
            return nil
        }
        // The session is copied only inside this block: a copy still alive when acceptCounter marks the
        // window would make the window's storage copy itself (copy-on-write) for every packet.
        let cipher: TransportCipher
        do {
            guard let session = peer.session(slot) else {
                counters.dropsUnknownIndex += 1
                return nil
            }
            guard now - session.created < timers.rejectAfterTime else {
                counters.dropsExpiredSession += 1
                return nil
            }
            guard counter < WireGuardProtocol.rejectAfterMessages, session.replay.wouldAccept(counter) else {
                counters.dropsReplay += 1
                return nil
            }
            cipher = session.keypair.cipher
        }
        return OpenedTransport(datagram: datagram, source: source, peer: id, receiver: receiver, counter: counter, cipher: cipher)
    }

    /// A transport message after its opening (`plaintextLength` nil: it did not authenticate): the
    /// replay window, the session's confirmation, timers, and its packet to the TUN. The session is
    /// looked up again by its index: an earlier message of the batch may have confirmed (rotated) it.
    func finishTransport(_ message: OpenedTransport, plaintextLength: Int?, now: Double) {
        guard let length = plaintextLength else {
            counters.dropsAuthentication += 1
            return
        }
        guard let peer = peers[message.peer], let slot = peer.slot(of: message.receiver) else {
            counters.dropsUnknownIndex += 1
            return
        }
        guard peer.acceptCounter(message.counter, in: slot) else {
            counters.dropsReplay += 1
            return
        }
        let datagram = message.datagram
        peer.rxBytes += UInt64(datagram.count)
        if slot == .next {
            // The initiator used the new session: it is confirmed, and becomes current.
            let confirmed = peer.next!
            peer.next = nil
            rotate(peer, in: confirmed)
            handshakeCompleted(peer, now: now)
            _ = sendStaged(peer, now: now)
        }
        authenticatedPacketReceived(peer, from: message.source, now: now)
        if length == 0 {
            counters.keepalivesReceived += 1
        } else {
            if peer.keepaliveAt == nil { peer.keepaliveAt = now + timers.keepaliveTimeout }
            let start = MessageType.transportHeaderLength
            deliver(datagram, plaintext: start..<(start + length), from: peer)
        }
        if let current = peer.current, current.keypair.isInitiator,
           now - current.created >= timers.rekeyOnReceiveAge {
            initiateHandshake(peer, now: now, retransmit: false)
        }
    }

    /// Queues a decrypted packet (`plaintext` in `datagram`) for the TUN when it is one IP packet
    /// (its padding cut off) whose source the sender is allowed to use. It stays where it was
    /// decrypted: a TUN with offloads gets a zeroed virtio_net_hdr (GSO_NONE) written over the spent
    /// transport header just before the plaintext, so the packet and its header go in one write
    /// without a copy (`flushTunWrites`).
    func deliver(_ datagram: UnsafeMutableRawBufferPointer, plaintext range: Range<Int>, from peer: Peer) {
        let plaintext = UnsafeRawBufferPointer(rebasing: datagram[range])
        let length: Int
        switch plaintext[0] >> 4 {
        case 4 where plaintext.count >= 20:
            length = Int(plaintext[2]) << 8 | Int(plaintext[3])
        case 6 where plaintext.count >= 40:
            length = (Int(plaintext[4]) << 8 | Int(plaintext[5])) + 40
        default:
            counters.dropsMalformedPacket += 1
            return
        }
        guard length <= plaintext.count, length >= 20 else {
            counters.dropsMalformedPacket += 1
            return
        }
        let packet = UnsafeRawBufferPointer(rebasing: plaintext[0..<length])
        guard allowed.lookup(packet: packet, source: true) == peer.id else {
            counters.dropsSpoofedSource += 1
            return
        }
        precondition(range.lowerBound >= (tunHeader ? VirtioNetHeader.size : 0), "the transport header leaves room for the virtio_net_hdr")
        if tunWrites.isFull { flushTunWrites() }
        tunWrites.append(UnsafeMutableRawBufferPointer(start: datagram.baseAddress! + range.lowerBound, count: length))
    }

    /// Writes the packets `deliver` queued, in order: on a TUN with offloads, a flow's in-order
    /// segments as one super-packet (`PacketCoalescer`).
    func flushTunWrites() {
        guard !tunWrites.isEmpty else { return }
        let written = coalescesTunWrites ? coalescer.write(tunWrites, to: tun) : tun.write(tunWrites)
        counters.superPacketsWritten = coalescer.superPackets
        counters.coalescedSegments = coalescer.coalescedSegments
        counters.refusedSuperPackets = coalescer.refusedSuperPackets
        counters.packetsReceived += UInt64(written.packets)
        counters.bytesReceived += UInt64(written.bytes)
        counters.tunWriteErrors += UInt64(tunWrites.count - written.packets)
        tunWrites.removeAll()
    }
}

/// A transport message between its checks and its opening: where it lies, who sent it, and the session
/// that opens it (kept alive by its peer while the batch is handled).
struct OpenedTransport {
    var datagram: UnsafeMutableRawBufferPointer
    var source: Endpoint
    var peer: Int
    var receiver: UInt32
    var counter: UInt64
    var cipher: TransportCipher
}
