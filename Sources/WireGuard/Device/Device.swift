import CSodium
import CTunnelgateShims
import RuntimeABI
import TUN
import Glibc
import LinuxSystem

import Synchronization
import TunnelgateSettings

/// A userspace WireGuard interface on a TUN: peers, handshakes, sessions,
/// timers, cryptokey routing, roaming, cookies, and the UAPI socket.
///
/// One thread (the device thread) owns all of it and polls the TUN, the
/// UDP sockets (IPv4 and IPv6 on one port), the UAPI listener and a wake-up
/// eventfd, with the nearest timer as the timeout. Nothing on the packet
/// path takes a lock. Other threads see the device only through `snapshot`,
/// which the device thread publishes, and `stop()`.
public final class WireGuardDevice: @unchecked Sendable {
    // @unchecked Sendable: everything but `snapshot` (a Mutex) and `wake` (an eventfd) is touched only by
    // the device thread between start() and stop(), or by the owner before start / after the join.

    public struct PeerStatus: Sendable, Equatable {
        public var publicKey: WireGuardKey
        public var endpoint: Endpoint?
        public var allowedIPs: [IPPrefix]
        public var lastHandshake: Int
        public var rxBytes: UInt64
        public var txBytes: UInt64
        public var persistentKeepalive: UInt16
        public var hasSession: Bool
        public var handshakeAttempts: Int
    }

    public struct Snapshot: Sendable {
        public var running = false
        public var listenPort: UInt16 = 0
        public var peers: [PeerStatus] = []
        public var counters = DeviceCounters()
        public var failure: String?
        /// The TUN carries a virtio_net_hdr: TCP comes as super-packets the device segments (TSO).
        public var tunOffloads = false
    }

    private let published = Mutex(Snapshot())
    /// Set by stop(); the device thread exits when it sees it.
    private let stopping = Atomic<Bool>(false)
    /// Snapshot requests made and answered: a reader asks, wakes the thread, and waits for the answer.
    private let requested = Atomic<UInt64>(0)
    private let answered = Atomic<UInt64>(0)
    let timers: WireGuardTimers
    let log: @Sendable (String) -> Void

    private var privateKey: PrivateKey
    private var publicKey: WireGuardKey
    private var listenPort: UInt16
    private var fwmark: UInt32
    /// The slot's mark when Tunnelgate's routing and kill switch exempt the sockets by it: `wg set fwmark`
    /// cannot change it then.
    private var managedMark: UInt32?
    private var udp4: FileDescriptor?
    private var udp6: FileDescriptor?
    private var tun = FileDescriptor(rawValue: -1)
    /// Whether every TUN read and write starts with a struct virtio_net_hdr (the TUN was made with
    /// offloads: reads may be TCP super-packets to segment, or need their checksum completed).
    private var tunHeader = false
    private var mtu = 1420
    private var uapi: FileDescriptor?
    private var uapiPath: String?
    /// The stop signal: stop() writes a byte to `wakeWriter`, the device thread polls `wake`.
    private let wake: FileDescriptor
    private let wakeWriter: FileDescriptor
    private var thread: SystemThread?

    private var peers: [Int: Peer] = [:]
    private var peerByKey: [WireGuardKey: Int] = [:]
    private var nextPeerID = 0
    private var allowed = AllowedIPs()
    /// Receive index → peer: handshakes in flight and sessions.
    private var indexTable: [UInt32: Int] = [:]
    private var cookies: CookieGenerator
    private var counters = DeviceCounters()
    private var lastTimestamp = [UInt8](repeating: 0, count: 12)

    // Load: handshake messages counted per 100 ms window; above the limit, MAC2 is required for 1 s.
    private var loadWindowStart = 0.0
    private var loadWindowCount = 0
    private var underLoadUntil = -Double.infinity
    static let loadLimitPerWindow = 32

    // Buffers: datagrams in (one recvmmsg), datagrams out per socket family (one sendmmsg each), one TUN
    // read: a virtio_net_hdr and a packet of up to 64 KB (an IPv6 super-packet is 40 + 65,535 bytes).
    private static let bufferSize = 65536 + 64
    /// TUN reads per wake-up stop after this many packets (segments counted), so that the UDP side
    /// (the peer's ACKs) gets its turn.
    static let packetsPerWakeUp = 128
    private let received = DatagramBatch(slotSize: 65536)
    private var outbound4 = DatagramBatch(slotSize: 1420 + 32)
    private var outbound6 = DatagramBatch(slotSize: 1420 + 32)
    private let tunBuffer = UnsafeMutableRawBufferPointer.allocate(byteCount: bufferSize, alignment: 16)

    /// Binds the UDP port (so a port in use is an error before anything
    /// else happens) and takes the configuration's peers.
    public init(_ configuration: DeviceConfiguration, timers: WireGuardTimers,
                log: @escaping @Sendable (String) -> Void) throws(RuntimeError) {
        _ = sodium_init()
        self.timers = timers
        self.log = log
        privateKey = configuration.privateKey
        publicKey = configuration.privateKey.publicKey
        listenPort = configuration.listenPort
        fwmark = configuration.fwmark
        cookies = CookieGenerator(localPublic: configuration.privateKey.publicKey, now: ProcessControl.monotonicSeconds())
        do throws(SystemCallError) {
            (wake, wakeWriter) = try FileDescriptor.pipe()
        } catch { throw RuntimeError("pipe: \(error)") }
        do throws(RuntimeError) {
            try bindSockets(port: configuration.listenPort)
        } catch {
            wake.close()
            wakeWriter.close()
            throw error
        }
        for p in configuration.peers {
            let peer = addPeer(p.publicKey)
            peer.presharedKey = p.presharedKey
            peer.endpoint = p.endpoint
            peer.persistentKeepalive = p.persistentKeepalive
            for prefix in p.allowedIPs { allowed.insert(prefix.network, peer: peer.id) }
        }
        publish()
    }

    deinit {
        tunBuffer.deallocate()
        wake.close()
        wakeWriter.close()
    }

    public var boundPort: UInt16 { listenPort }

    /// Starts the device thread on `tun`; the UAPI socket is created at
    /// `uapiPath` when given (its directory is created owner-writable). With
    /// `udpSegmentation`, runs of same-size datagrams to one peer (a TCP
    /// super-packet's segments) are sent with UDP_SEGMENT.
    public func start(tun: FileDescriptor, mtu: Int, fwmark: UInt32?, uapiPath: String?,
                      udpSegmentation: Bool = true) throws(RuntimeError) {
        self.tun = tun
        self.mtu = mtu
        tunHeader = TunDevice.carriesVirtioHeader(tun)
        // A slot holds the largest packet the TUN gives (the MTU) sealed: header, padding, tag.
        outbound4 = DatagramBatch(slotSize: mtu + Transport.overhead + 16, segmentation: udpSegmentation)
        outbound6 = DatagramBatch(slotSize: mtu + Transport.overhead + 16, segmentation: udpSegmentation)
        if let fwmark, self.fwmark == 0 { self.fwmark = fwmark }
        managedMark = fwmark
        do throws(SystemCallError) {
            try tun.setNonBlocking(true)
        } catch { throw RuntimeError("the TUN: \(error)") }
        try applyMark()
        if let uapiPath {
            let directory = String(uapiPath[..<(uapiPath.lastIndex(of: "/") ?? uapiPath.endIndex)])
            _ = mkdir(directory, 0o755)
            do throws(SystemCallError) {
                uapi = try UnixSocket.listen(at: uapiPath)
                self.uapiPath = uapiPath
            } catch {
                throw RuntimeError("the WireGuard API socket \(uapiPath): \(error)")
            }
        }
        let offloads = tunHeader
        published.withLock {
            $0.running = true
            $0.tunOffloads = offloads
        }
        // Peers with a persistent keepalive start their handshake at once (as a kernel interface does on up).
        let now = ProcessControl.monotonicSeconds()
        for peer in peers.values where peer.persistentKeepalive > 0 && peer.endpoint != nil {
            sendKeepalive(peer, now: now)
        }
        do throws(SystemCallError) {
            thread = try SystemThread.spawn { [self] in run() }
        } catch {
            throw RuntimeError("starting the WireGuard thread: \(error)")
        }
    }

    /// Stops the device thread, wipes every key, closes the sockets and
    /// removes the UAPI socket. Once; later calls do nothing.
    public func stop() {
        if let thread {
            stopping.store(true, ordering: .releasing)
            var one: UInt8 = 1
            _ = Glibc.write(wakeWriter.rawValue, &one, 1)
            thread.join()
        }
        thread = nil
        for peer in peers.values { peer.clearKeys() }
        udp4?.close(); udp4 = nil
        udp6?.close(); udp6 = nil
        uapi?.close(); uapi = nil
        if let uapiPath { FileSystem.remove(uapiPath) }
        uapiPath = nil
        published.withLock { $0.running = false }
    }

    /// The device's state now: the device thread publishes it on request
    /// (within 200 ms, else the last one published is returned).
    public func snapshot() -> Snapshot {
        guard thread != nil else { return published.withLock { $0 } }
        let ticket = requested.add(1, ordering: .acquiringAndReleasing).newValue
        var one: UInt8 = 0
        _ = Glibc.write(wakeWriter.rawValue, &one, 1)
        let deadline = ProcessControl.monotonicSeconds() + 0.2
        var pause = 0.0001
        while answered.load(ordering: .acquiring) < ticket, ProcessControl.monotonicSeconds() < deadline {
            ProcessControl.sleep(seconds: pause)
            pause = min(pause * 2, 0.005)
        }
        return published.withLock { $0 }
    }

    // MARK: - The device thread

    private func run() {
        var fds = [pollfd](repeating: pollfd(fd: -1, events: Int16(POLLIN), revents: 0), count: 5)
        var drain = [UInt8](repeating: 0, count: 64)
        while true {
            fds[0].fd = tun.rawValue
            fds[1].fd = udp4?.rawValue ?? -1
            fds[2].fd = udp6?.rawValue ?? -1
            fds[3].fd = uapi?.rawValue ?? -1
            fds[4].fd = wake.rawValue
            var now = ProcessControl.monotonicSeconds()
            let deadline = nextTimerDeadline() ?? .infinity
            let timeout = max(0, deadline - now)
            let rc = fds.withUnsafeMutableBufferPointer {
                CTunnelgateShims_poll_nanoseconds($0.baseAddress, 5, timeout.isFinite ? Int64(timeout * 1e9) : -1)
            }
            if rc < 0 && errno != EINTR {
                published.withLock { $0.failure = "poll: \(Errno.current)" }
                return
            }
            if fds[4].revents != 0 {
                if stopping.load(ordering: .acquiring) { return }
                _ = drain.withUnsafeMutableBytes { Glibc.read(wake.rawValue, $0.baseAddress, $0.count) }
            }
            now = ProcessControl.monotonicSeconds()
            if fds[1].revents != 0, let udp4 { receiveDatagrams(udp4, now: now) }
            if fds[2].revents != 0, let udp6 { receiveDatagrams(udp6, now: now) }
            flushOutbound()
            if fds[0].revents & Int16(POLLIN) != 0 { readTun(now: now) }
            if fds[3].revents != 0 { serveUAPI(now: now) }
            runTimers(now: ProcessControl.monotonicSeconds())
            flushOutbound()
            let asked = requested.load(ordering: .acquiring)
            if asked > answered.load(ordering: .relaxed) {
                publish()
                answered.store(asked, ordering: .releasing)
            }
        }
    }

    private func nextTimerDeadline() -> Double? {
        var earliest: Double?
        for peer in peers.values {
            if let d = peer.nextDeadline, d < (earliest ?? .infinity) { earliest = d }
        }
        return earliest
    }

    // MARK: Outbound: TUN → peer

    private func readTun(now: Double) {
        let headerSize = tunHeader ? VirtioNetHeader.size : 0
        var packets = 0
        for _ in 0..<64 {
            let n = Glibc.read(tun.rawValue, tunBuffer.baseAddress, tunBuffer.count)
            if n < 0 {
                if errno == EINTR { continue }
                return
            }
            if n == 0 { return }
            guard n > headerSize else {
                counters.dropsMalformedPacket += 1
                continue
            }
            let packet = UnsafeMutableRawBufferPointer(rebasing: tunBuffer[headerSize..<n])
            if tunHeader {
                switch VirtioNetHeader(loadingFrom: tunBuffer.baseAddress!).prepare(packet, maxSegmentLength: mtu) {
                case .packet:
                    break
                case .segments(let plan):
                    route(UnsafeRawBufferPointer(packet), as: plan, now: now)
                    packets += plan.count
                    if packets >= Self.packetsPerWakeUp { return }
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
            if packets >= Self.packetsPerWakeUp { return }
        }
    }

    /// Sends one packet read from the TUN to the peer its destination belongs to (staged while
    /// there is no session).
    private func route(_ packet: UnsafeRawBufferPointer, now: Double) {
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
    private func route(_ packet: UnsafeRawBufferPointer, as plan: TCPSegmentation, now: Double) {
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
        var staged = false
        for i in 0..<plan.count {
            if batch.isFull { flushOutbound() }
            let payload = batch.nextSlot.baseAddress! + MessageType.transportHeaderLength
            let segment = UnsafeRawBufferPointer(start: payload, count: plan.writeSegment(i, of: packet, to: payload))
            if !sendData(peer, segment, now: now) {
                stage(peer, Array(segment))
                staged = true
            }
        }
        if staged { initiateHandshake(peer, now: now, retransmit: false) }
    }

    private func stage(_ peer: Peer, _ packet: [UInt8]) {
        if peer.staged.count >= Peer.stagedLimit {
            peer.staged.removeFirst()
            counters.dropsStagedOverflow += 1
        }
        peer.staged.append(packet)
    }

    /// Sends what the outbound batches hold, one sendmmsg per socket.
    private func flushOutbound() {
        guard !outbound4.isEmpty || !outbound6.isEmpty else { return }
        let segmenting = outbound4.segmentation && outbound6.segmentation
        if !outbound4.isEmpty { counters.sendErrors += UInt64(outbound4.flush(udp4?.rawValue ?? -1)) }
        if !outbound6.isEmpty { counters.sendErrors += UInt64(outbound6.flush(udp6?.rawValue ?? -1)) }
        counters.segmentedSends = outbound4.segmentedSends + outbound6.segmentedSends
        if segmenting && !(outbound4.segmentation && outbound6.segmentation) {
            log("UDP segmentation offload (UDP_SEGMENT) refused: one datagram per send from now on")
        }
    }

    /// Seals `packet` (empty: a keepalive) in the current session into the
    /// outbound batch of its endpoint's family (sent by the next flush);
    /// false when there is no session that may send.
    @discardableResult
    private func sendData(_ peer: Peer, _ packet: UnsafeRawBufferPointer, now: Double) -> Bool {
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
        guard let length = Transport.encodeTransport(
            keypair: session.keypair, counter: counter, packet: packet,
            into: UnsafeMutableRawBufferPointer(rebasing: slot[0..<(max(mtu, packet.count) + Transport.overhead)]))
        else { return false }
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

    private func sendKeepalive(_ peer: Peer, now: Double) {
        if !sendData(peer, UnsafeRawBufferPointer(start: nil, count: 0), now: now) {
            if peer.staged.isEmpty { stage(peer, []) }
            initiateHandshake(peer, now: now, retransmit: false)
        }
    }

    private func sendStaged(_ peer: Peer, now: Double) -> Bool {
        var sent = false
        while let first = peer.staged.first {
            let ok = first.withUnsafeBytes { sendData(peer, $0, now: now) }
            guard ok else { break }
            peer.staged.removeFirst()
            sent = true
        }
        return sent
    }

    private func authenticatedPacketSent(_ peer: Peer, now: Double) {
        peer.keepaliveAt = nil
        if peer.persistentKeepalive > 0 { peer.persistentKeepaliveAt = now + Double(peer.persistentKeepalive) }
    }

    private func authenticatedPacketReceived(_ peer: Peer, from source: Endpoint, now: Double) {
        peer.newHandshakeAt = nil
        peer.endpoint = source
        if peer.persistentKeepalive > 0 { peer.persistentKeepaliveAt = now + Double(peer.persistentKeepalive) }
    }

    // MARK: Handshakes

    private func newIndex(for peer: Peer) -> UInt32 {
        while true {
            var index: UInt32 = 0
            randombytes_buf(&index, 4)
            if index != 0, indexTable[index] == nil {
                indexTable[index] = peer.id
                return index
            }
        }
    }

    private func timestamp() -> [UInt8] {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        var stamp = WireGuardCrypto.tai64n(unixSeconds: UInt64(max(0, ts.tv_sec)), nanoseconds: UInt32(ts.tv_nsec))
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
    private func initiateHandshake(_ peer: Peer, now: Double, retransmit: Bool) {
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

    private func noteHandshakeMessage(now: Double) -> Bool {
        if now - loadWindowStart > 0.1 {
            loadWindowStart = now
            loadWindowCount = 0
        }
        loadWindowCount += 1
        if loadWindowCount > Self.loadLimitPerWindow { underLoadUntil = now + 1 }
        return now < underLoadUntil
    }

    /// Under load, a handshake message needs a valid MAC2 for its source;
    /// without one it gets a cookie reply instead of a Diffie-Hellman.
    private func admitHandshake(_ message: UnsafeRawBufferPointer, from source: Endpoint, now: Double) -> Bool {
        guard Handshake.verifyMAC1(message, localPublic: publicKey) else {
            counters.dropsMAC += 1
            return false
        }
        guard noteHandshakeMessage(now: now) else { return true }
        let input = source.cookieInput
        if cookies.verifyMAC2(message, endpoint: input, now: now) { return true }
        guard let reply = cookies.createReply(to: message, endpoint: input, now: now) else { return false }
        counters.cookieRepliesSent += 1
        _ = reply.withUnsafeBytes { send($0, to: source) }
        return false
    }

    private func handleInitiation(_ message: UnsafeRawBufferPointer, from source: Endpoint, now: Double) {
        guard admitHandshake(message, from: source, now: now) else { return }
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

    private func handleResponse(_ message: UnsafeRawBufferPointer, from source: Endpoint, now: Double) {
        guard admitHandshake(message, from: source, now: now) else { return }
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

    private func rotate(_ peer: Peer, in session: Session) {
        if let old = peer.previous {
            indexTable[old.localIndex] = nil
            peer.previous?.keypair.zero()
        }
        peer.previous = peer.current
        peer.current = session
    }

    private func handshakeCompleted(_ peer: Peer, now: Double) {
        peer.retransmitAt = nil
        peer.attempts = 0
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        peer.lastHandshake = (ts.tv_sec, ts.tv_nsec)
        peer.handshakesCompleted += 1
        counters.handshakesCompleted += 1
        peer.zeroKeysAt = now + timers.zeroKeysAfter
    }

    private func handleCookieReply(_ message: UnsafeRawBufferPointer, now: Double) {
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

    // MARK: Inbound: peer → TUN

    /// Up to two recvmmsg batches per wake-up, so the TUN side gets its turn.
    private func receiveDatagrams(_ socket: FileDescriptor, now: Double) {
        for _ in 0..<2 {
            let n = received.receive(socket.rawValue)
            guard n > 0 else { return }
            for i in 0..<n {
                let (datagram, source) = received.datagram(i)
                guard let source else { continue }
                dispatch(datagram, from: source, now: now)
            }
            if n < DatagramBatch.capacity { return }
        }
    }

    private func dispatch(_ datagram: UnsafeMutableRawBufferPointer, from source: Endpoint, now: Double) {
        let bytes = UnsafeRawBufferPointer(datagram)
        switch MessageType.classify(bytes) {
        case .initiation: handleInitiation(bytes, from: source, now: now)
        case .response: handleResponse(bytes, from: source, now: now)
        case .cookieReply: handleCookieReply(bytes, now: now)
        case .transport: handleTransport(datagram, from: source, now: now)
        case nil: counters.dropsMalformedDatagram += 1
        }
    }

    private func handleTransport(_ datagram: UnsafeMutableRawBufferPointer, from source: Endpoint, now: Double) {
        let receiver = datagram.loadUnaligned(fromByteOffset: 4, as: UInt32.self).littleEndian
        let counter = datagram.loadUnaligned(fromByteOffset: 8, as: UInt64.self).littleEndian
        guard let id = indexTable[receiver], let peer = peers[id], let slot = peer.slot(of: receiver) else {
            counters.dropsUnknownIndex += 1
            return
        }
        // The session is copied only inside this block: a copy still alive when acceptCounter marks the
        // window would make the window's storage copy itself (copy-on-write) for every packet.
        let keypair: Keypair
        do {
            guard let session = peer.session(slot) else {
                counters.dropsUnknownIndex += 1
                return
            }
            guard now - session.created < timers.rejectAfterTime else {
                counters.dropsExpiredSession += 1
                return
            }
            guard session.replay.wouldAccept(counter) else {
                counters.dropsReplay += 1
                return
            }
            keypair = session.keypair
        }
        guard let opened = Transport.decodeTransport(keypair: keypair, datagram: datagram) else {
            counters.dropsAuthentication += 1
            return
        }
        guard peer.acceptCounter(opened.counter, in: slot) else {
            counters.dropsReplay += 1
            return
        }
        peer.rxBytes += UInt64(datagram.count)
        if slot == .next {
            // The initiator used the new session: it is confirmed, and becomes current.
            let confirmed = peer.next!
            peer.next = nil
            rotate(peer, in: confirmed)
            handshakeCompleted(peer, now: now)
            _ = sendStaged(peer, now: now)
        }
        authenticatedPacketReceived(peer, from: source, now: now)
        if opened.plaintext.isEmpty {
            counters.keepalivesReceived += 1
        } else {
            if peer.keepaliveAt == nil { peer.keepaliveAt = now + timers.keepaliveTimeout }
            deliver(datagram, plaintext: opened.plaintext, from: peer)
        }
        if let current = peer.current, current.keypair.isInitiator,
           now - current.created >= timers.rekeyOnReceiveAge {
            initiateHandshake(peer, now: now, retransmit: false)
        }
    }

    /// Writes a decrypted packet (`plaintext` in `datagram`) to the TUN when it is one IP packet
    /// (its padding cut off) whose source the sender is allowed to use. A TUN with offloads gets a
    /// zeroed virtio_net_hdr (GSO_NONE) first, written over the spent transport header just before
    /// the plaintext, so the packet and its header go in one write without a copy.
    private func deliver(_ datagram: UnsafeMutableRawBufferPointer, plaintext range: Range<Int>, from peer: Peer) {
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
        let headerSize = tunHeader ? VirtioNetHeader.size : 0
        precondition(range.lowerBound >= headerSize, "the transport header leaves room for the virtio_net_hdr")
        let start = datagram.baseAddress! + range.lowerBound - headerSize
        if tunHeader { VirtioNetHeader().store(to: start) }
        let n = Glibc.write(tun.rawValue, start, headerSize + length)
        guard n == headerSize + length else {
            counters.tunWriteErrors += 1
            return
        }
        counters.packetsReceived += 1
        counters.bytesReceived += UInt64(length)
    }

    // MARK: Timers

    private func runTimers(now: Double) {
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

    private func unregister(_ peer: Peer) {
        for index in peer.indices { indexTable[index] = nil }
    }

    // MARK: Sockets

    private func bindSockets(port: UInt16) throws(RuntimeError) {
        func open(_ family: Int32) throws(RuntimeError) -> FileDescriptor {
            let fd = socket(family, Int32(SOCK_DGRAM.rawValue | SOCK_CLOEXEC.rawValue), 0)
            guard fd >= 0 else { throw RuntimeError("socket: \(Errno.current)") }
            return FileDescriptor(rawValue: fd)
        }
        func bind(_ fd: FileDescriptor, _ endpoint: Endpoint) throws(RuntimeError) {
            let rc = endpoint.withSockaddr { Glibc.bind(fd.rawValue, $0, $1) }
            guard rc == 0 else {
                let e = Errno.current
                fd.close()
                throw RuntimeError("binding UDP port \(endpoint.port == 0 ? "(any)" : String(endpoint.port)): \(e)")
            }
        }
        let v4 = try open(AF_INET)
        try bind(v4, Endpoint(address: .v4(IPv4Address(0)), port: port))
        var bound = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &bound) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(v4.rawValue, $0, &length) } }
        let actual = UInt16(bigEndian: bound.sin_port)
        udp4?.close()
        udp4 = v4
        listenPort = actual
        udp6?.close()
        udp6 = nil
        // IPv6 is optional: a namespace may have it disabled.
        if let v6 = try? open(AF_INET6) {
            var one: Int32 = 1
            setsockopt(v6.rawValue, Int32(IPPROTO_IPV6), IPV6_V6ONLY, &one, socklen_t(MemoryLayout<Int32>.size))
            if (try? bind(v6, Endpoint(address: .v6(IPv6Address(high: 0, low: 0)), port: actual))) != nil {
                udp6 = v6
            } else {
                log("IPv6 carrier unavailable on port \(actual); IPv4 only")
            }
        }
        for fd in [udp4, udp6].compactMap({ $0 }) {
            var size: Int32 = 4 << 20
            setsockopt(fd.rawValue, SOL_SOCKET, SO_RCVBUFFORCE, &size, socklen_t(MemoryLayout<Int32>.size))
            setsockopt(fd.rawValue, SOL_SOCKET, SO_SNDBUFFORCE, &size, socklen_t(MemoryLayout<Int32>.size))
        }
        try applyMark()
    }

    /// Marks the carrier sockets so the tunnel's rule (`not fwmark T`) never captures them: the mark is
    /// their identity, the one the routing rules and the kill switch exempt. A socket the kernel refuses
    /// to mark is an error, never ignored: unmarked, its packets would go into the tunnel (or nowhere).
    private func applyMark() throws(RuntimeError) {
        guard fwmark != 0 else { return }
        for fd in [udp4, udp6].compactMap({ $0 }) {
            do throws(SystemCallError) {
                try fd.setSocketOption(level: SOL_SOCKET, name: SO_MARK, value: Int32(bitPattern: fwmark))
            } catch {
                throw RuntimeError("marking the carrier socket with fwmark 0x\(String(fwmark, radix: 16)): \(error)")
            }
        }
    }

    /// Sets a peer's endpoint before the device starts: a host name the engine resolved once and pinned
    /// for the tunnel's life (the address its carrier exemption names).
    public func pin(endpoint: Endpoint, forPeer key: WireGuardKey) {
        guard let id = peerByKey[key], let peer = peers[id] else { return }
        peer.endpoint = endpoint
        publish()
    }

    private func send(_ datagram: UnsafeRawBufferPointer, to endpoint: Endpoint) -> Bool {
        guard let fd = endpoint.address.family == .ipv4 ? udp4 : udp6 else {
            counters.sendErrors += 1
            return false
        }
        while true {
            let n = endpoint.withSockaddr { sendto(fd.rawValue, datagram.baseAddress, datagram.count, 0, $0, $1) }
            if n == datagram.count { return true }
            if n < 0 && errno == EINTR { continue }
            counters.sendErrors += 1
            return false
        }
    }

    // MARK: Peers and configuration

    @discardableResult
    private func addPeer(_ key: WireGuardKey) -> Peer {
        if let id = peerByKey[key], let peer = peers[id] { return peer }
        let peer = Peer(id: nextPeerID, publicKey: key)
        nextPeerID += 1
        peers[peer.id] = peer
        peerByKey[key] = peer.id
        return peer
    }

    private func removePeer(_ peer: Peer) {
        unregister(peer)
        peer.clearKeys()
        allowed.removeAll(peer: peer.id)
        peers[peer.id] = nil
        peerByKey[peer.publicKey] = nil
    }

    /// Applies a UAPI `set`; the device thread calls it.
    func apply(_ change: UAPI.InterfaceChange, now: Double) throws(UAPI.Failure) {
        if let port = change.listenPort, port != listenPort {
            do throws(RuntimeError) { try bindSockets(port: port) } catch {
                throw UAPI.Failure(errno: EADDRINUSE, description: error.description)
            }
        }
        if let mark = change.fwmark, mark != fwmark {
            if let managed = managedMark {
                throw UAPI.Failure(errno: EPERM, description: "fwmark: the sockets carry 0x\(String(managed, radix: 16)), "
                                   + "the tunnel's carrier identity, which Tunnelgate sets")
            }
            fwmark = mark
            do throws(RuntimeError) { try applyMark() } catch {
                throw UAPI.Failure(errno: EPERM, description: error.description)
            }
        }
        if let key = change.privateKey {
            guard let key, let newKey = PrivateKey(key) else {
                throw UAPI.Failure(errno: EINVAL, description: "private_key: removing the key is not supported")
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
            for prefix in p.allowedIPs { allowed.insert(prefix, peer: peer.id) }
            if let keepalive = p.persistentKeepalive {
                let wasOff = peer.persistentKeepalive == 0
                peer.persistentKeepalive = keepalive
                peer.persistentKeepaliveAt = nil
                if keepalive > 0, wasOff, peer.endpoint != nil { sendKeepalive(peer, now: now) }
            }
        }
        publish()
    }

    // MARK: UAPI

    private func serveUAPI(now: Double) {
        guard let listener = uapi else { return }
        while let connection = try? UnixSocket.accept(listener) {
            defer { connection.close() }
            UnixSocket.setTimeout(connection, seconds: 1)
            guard let peer = try? UnixSocket.peerCredentials(connection), peer.uid == 0 || peer.uid == geteuid() else {
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
                    reply = answer == nil ? "errno=\(ENOMEM)\n\n" : "errno=0\n\n"
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
    private func send(_ connection: FileDescriptor, _ bytes: UnsafeRawBufferPointer) {
        var offset = 0
        while offset < bytes.count {
            let n = Glibc.send(connection.rawValue, bytes.baseAddress! + offset, bytes.count - offset, Int32(MSG_NOSIGNAL))
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { break }
            offset += n
        }
    }

    /// The `get=1` answer (without its errno line), in secure memory; nil when none could be mapped.
    private func uapiGet() -> SecretText? {
        do throws(SystemCallError) {
            let out = try SecretText(capacity: 4096 + 1024 * peers.count)
            try out.append("private_key=")
            let result = privateKey.withUnsafeBytes { key in Result { () throws(SystemCallError) in try out.appendHex(key) } }
            try result.get()
            try out.append("\nlisten_port=\(listenPort)\n")
            if fwmark != 0 { try out.append("fwmark=\(fwmark)\n") }
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
    private func uapiPeerLines(_ peer: Peer) -> String {
        var out = "protocol_version=1\n"
        if let endpoint = peer.endpoint { out += "endpoint=\(endpoint)\n" }
        out += "last_handshake_time_sec=\(peer.lastHandshake.seconds)\n"
        out += "last_handshake_time_nsec=\(peer.lastHandshake.nanoseconds)\n"
        out += "tx_bytes=\(peer.txBytes)\nrx_bytes=\(peer.rxBytes)\n"
        out += "persistent_keepalive_interval=\(peer.persistentKeepalive)\n"
        for prefix in allowed.prefixes(of: peer.id) { out += "allowed_ip=\(prefix)\n" }
        return out
    }

    // MARK: Status

    private func publish() {
        let list = peers.values.sorted { $0.id < $1.id }.map { peer in
            PeerStatus(publicKey: peer.publicKey, endpoint: peer.endpoint, allowedIPs: allowed.prefixes(of: peer.id),
                       lastHandshake: peer.lastHandshake.seconds, rxBytes: peer.rxBytes, txBytes: peer.txBytes,
                       persistentKeepalive: peer.persistentKeepalive, hasSession: peer.current != nil,
                       handshakeAttempts: peer.attempts)
        }
        let counters = self.counters, port = listenPort
        published.withLock {
            $0.peers = list
            $0.counters = counters
            $0.listenPort = port
        }
    }
}
