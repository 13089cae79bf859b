import LinuxSystem
import TUN

// Sending: TUN → cryptokey routing → seal → UDP (wireguard-go's send.go). A packet read from the TUN
// (a TCP super-packet cut into its segments first) goes to the peer that owns its destination, is
// sealed in its current session straight into a slot of the outbound batch of its endpoint's family,
// and the batches go with one sendmmsg each. Without a session it is staged and a handshake starts.

extension WireGuardDevice {
    /// Reads what the TUN has, a batch at a time, and sends each packet to its peer: up to
    /// `readsPerWakeUp` reads and `packetsPerWakeUp` packets (a super-packet's segments counted), so
    /// that the UDP side (the peer's ACKs) gets its turn. With a virtio_net_hdr every read is one
    /// packet or super-packet, and the batch holds one, so the budget is checked after every read.
    func readTun(now: Double) {
        var packets = 0, reads = 0
        while reads < Self.readsPerWakeUp {
            let n: Int
            do throws(SystemCallError) { n = try tun.read(into: tunReads) } catch { return }
            counters.dropsMalformedPacket += UInt64(tunReads.droppedReads)
            reads += n + tunReads.droppedReads
            for i in 0..<n {
                let packet = tunReads.packet(i)
                if tunHeader {
                    switch tunReads.header(i).prepare(packet, maxSegmentLength: mtu) {
                    case .packet:
                        break
                    case .segments(let plan):
                        route(UnsafeRawBufferPointer(packet), as: plan, now: now)
                        packets += plan.count
                        continue
                    case .unsupported:
                        counters.dropsOffloadUnsupported += 1
                        continue
                    case .malformed:
                        counters.dropsOffloadMalformed += 1
                        continue
                    }
                }
                route(UnsafeRawBufferPointer(packet), now: now)
                packets += 1
            }
            // Fewer than a batch: the TUN has nothing more now.
            if packets >= Self.packetsPerWakeUp || n + tunReads.droppedReads < tunReads.capacity { return }
        }
    }

    /// Sends one packet read from the TUN to the peer its destination belongs to (staged while
    /// there is no session).
    func route(_ packet: UnsafeRawBufferPointer, now: Double) {
        guard let id = allowed.lookup(packet: packet, source: false), let peer = peers[id] else {
            counters.dropsNoPeer += 1
            return
        }
        guard peer.endpoint != nil else {
            counters.dropsNoEndpoint += 1
            return
        }
        if !sendData(peer, packet, now: now) {
            stage(peer, Array(packet))
            initiateHandshake(peer, now: now, retransmit: false)
        }
    }

    /// Sends a TCP super-packet read from the TUN as its segments: each is written straight into
    /// the outbound batch's next slot, where its transport message is then sealed in place. The
    /// sealed segments are of one size but the last, so the batch sends them with UDP_SEGMENT.
    func route(_ packet: UnsafeRawBufferPointer, as plan: TCPSegmentation, now: Double) {
        guard let id = allowed.lookup(packet: packet, source: false), let peer = peers[id] else {
            counters.dropsNoPeer += UInt64(plan.count)
            return
        }
        guard let endpoint = peer.endpoint else {
            counters.dropsNoEndpoint += UInt64(plan.count)
            return
        }
        counters.superPacketsRead += 1
        let batch = endpoint.address.family == .ipv4 ? outbound4 : outbound6
        // Sealed after the loop (and before any flush), on both threads when the device is saturated.
        let split = splitsCrypto(plan.count)
        var staged = false
        for i in 0..<plan.count {
            if batch.isFull { flushOutbound() }
            let payload = batch.nextSlot.baseAddress! + MessageType.transportHeaderLength
            let segment = UnsafeRawBufferPointer(start: payload, count: plan.writeSegment(i, of: packet, to: payload))
            if !sendData(peer, segment, now: now, sealLater: split) {
                stage(peer, Array(segment))
                staged = true
            }
        }
        sealStaged()
        if staged { initiateHandshake(peer, now: now, retransmit: false) }
    }

    /// Seals the messages `sendData(sealLater:)` left in the outbound batches, split between the device
    /// thread and its worker. A message that could not be sealed (its session wiped meanwhile) is zeroed,
    /// so that what goes out is never plaintext: the peer drops it as malformed.
    func sealStaged() {
        guard sealJobs.count > 0 else { return }
        cryptoWorker?.run(sealJobs, split: true) ?? sealJobs.run(0..<sealJobs.count, lane: 0)
        for i in 0..<sealJobs.count where sealJobs.result(i) == nil {
            let (start, length) = sealJobs.message(i)
            start.initializeMemory(as: UInt8.self, repeating: 0, count: length)
            counters.sendErrors += 1
        }
        sealJobs.removeAll()
    }

    func stage(_ peer: Peer, _ packet: [UInt8]) {
        if peer.staged.count >= Peer.stagedLimit {
            peer.staged.removeFirst()
            counters.dropsStagedOverflow += 1
        }
        peer.staged.append(packet)
    }

    /// Sends what the outbound batches hold, one sendmmsg per socket.
    func flushOutbound() {
        // Nothing leaves unsealed.
        sealStaged()
        guard !outbound4.isEmpty || !outbound6.isEmpty else { return }
        let segmenting = outbound4.segmentation && outbound6.segmentation
        if !outbound4.isEmpty { counters.sendErrors += UInt64(bind.send(outbound4, family: .ipv4)) }
        if !outbound6.isEmpty { counters.sendErrors += UInt64(bind.send(outbound6, family: .ipv6)) }
        counters.segmentedSends = outbound4.segmentedSends + outbound6.segmentedSends
        if segmenting && !(outbound4.segmentation && outbound6.segmentation) {
            log("UDP segmentation offload (UDP_SEGMENT) refused: one datagram per send from now on")
        }
    }

    /// Seals `packet` (empty: a keepalive) in the current session into the
    /// outbound batch of its endpoint's family (sent by the next flush);
    /// false when there is no session that may send. With `sealLater`, the message is only staged and
    /// its sealing queued (`sealStaged`, which every flush runs first).
    @discardableResult
    func sendData(_ peer: Peer, _ packet: UnsafeRawBufferPointer, now: Double, sealLater: Bool = false) -> Bool {
        guard let endpoint = peer.endpoint, let session = peer.current,
              now - session.created < timers.rejectAfterTime,
              session.sendCounter < WireGuardProtocol.rejectAfterMessages else { return false }
        let batch = endpoint.address.family == .ipv4 ? outbound4 : outbound6
        guard packet.count + Transport.overhead + 16 <= batch.slotSize else {
            counters.dropsMalformedPacket += 1
            return true
        }
        if batch.isFull { flushOutbound() }
        let counter = session.sendCounter
        peer.current!.sendCounter = counter + 1
        // Padding stops at the MTU: `into` is sized MTU + the 32 bytes of header and tag.
        let slot = batch.nextSlot
        let out = UnsafeMutableRawBufferPointer(rebasing: slot[0..<(max(mtu, packet.count) + Transport.overhead)])
        let length: Int
        if sealLater, !sealJobs.isFull {
            guard let padded = Transport.stageTransport(keypair: session.keypair, counter: counter, packet: packet, into: out)
            else { return false }
            sealJobs.append(out.baseAddress! + MessageType.transportHeaderLength, length: padded, counter: counter,
                            cipher: session.keypair.cipher)
            length = Transport.overhead + padded
        } else {
            guard let sealed = Transport.encodeTransport(keypair: session.keypair, counter: counter, packet: packet, into: out)
            else { return false }
            length = sealed
        }
        batch.commit(length: length, to: endpoint)
        peer.txBytes += UInt64(length)
        if packet.isEmpty {
            counters.keepalivesSent += 1
        } else {
            counters.packetsSent += 1
            counters.bytesSent += UInt64(packet.count)
            // Data sent: expect something back within keepalive + rekey timeout, else handshake anew.
            if peer.newHandshakeAt == nil { peer.newHandshakeAt = now + timers.keepaliveTimeout + timers.rekeyTimeout }
        }
        authenticatedPacketSent(peer, now: now)
        if (session.keypair.isInitiator && now - session.created >= timers.rekeyAfterTime)
            || counter >= timers.rekeyAfterMessages {
            initiateHandshake(peer, now: now, retransmit: false)
        }
        return true
    }

    func sendKeepalive(_ peer: Peer, now: Double) {
        if !sendData(peer, UnsafeRawBufferPointer(start: nil, count: 0), now: now) {
            if peer.staged.isEmpty { stage(peer, []) }
            initiateHandshake(peer, now: now, retransmit: false)
        }
    }

    func sendStaged(_ peer: Peer, now: Double) -> Bool {
        var sent = false
        while let first = peer.staged.first {
            let ok = first.withUnsafeBytes { sendData(peer, $0, now: now) }
            guard ok else { break }
            peer.staged.removeFirst()
            sent = true
        }
        return sent
    }

    /// Sends one datagram (a handshake message, a cookie reply) to `endpoint` at once.
    func send(_ datagram: UnsafeRawBufferPointer, to endpoint: Endpoint) -> Bool {
        if bind.send(datagram, to: endpoint) { return true }
        counters.sendErrors += 1
        return false
    }
}
