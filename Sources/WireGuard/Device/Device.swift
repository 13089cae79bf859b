import CSodium
import LinuxSystem
import RuntimeABI
import Synchronization
import TUN
import TunnelgateSettings

/// A userspace WireGuard interface: peers, handshakes, sessions, timers, cryptokey routing, roaming,
/// cookies, and the UAPI socket, over two small protocols: `PacketIO` for the TUN and `Bind` for the
/// UDP sockets (so two devices can be run against each other in memory, `PacketChannel` and
/// `LoopbackNetwork`).
///
/// One thread (the device thread) owns all of it and polls the TUN, the UDP sockets (IPv4 and IPv6
/// on one port), the UAPI listener and a wake-up pipe, with the nearest timer as the timeout. Nothing
/// on the packet path allocates or takes a lock. Other threads see the device only through
/// `snapshot`, which the device thread publishes, and `stop()`.
///
/// One concern a file, as wireguard-go's device/ has them: this file the state, lifecycle and event
/// loop; Device+Send (TUN → UDP), Device+Receive (UDP → TUN), Device+Handshake, Device+Timers,
/// Device+Peers, Device+UAPI; the sockets are Sockets/.
public final class WireGuardDevice: @unchecked Sendable {
    // @unchecked Sendable: everything but `published` (a Mutex), the atomics and `wakeWriter` (a pipe) is
    // touched only by the device thread between start() and stop(), or by the owner before start / after
    // the join.

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
        /// A receive batch's in-order segments of a flow go to the TUN as one super-packet (GRO).
        public var tunCoalescing = false
        /// The carrier sockets hand over runs of a peer's datagrams as one (UDP_GRO).
        public var udpReceiveOffload = false
        /// A crypto worker thread exists (`CryptoWorkers`: always, or auto on a machine with enough CPUs).
        public var cryptoWorker = false
    }

    /// When the device's crypto worker seals and opens half of a batch (`CryptoWorker`).
    public enum CryptoWorkers: String, Sendable {
        /// Never: one thread does everything.
        case off
        /// While the device thread is saturated (busy for 85 % or more of the last 100 ms), for batches
        /// of at least `CryptoWorker.minimumJobs` messages, on a machine with at least
        /// `CryptoWorker.minimumProcessors` CPUs: with fewer, the second thread takes the core the
        /// kernel and the traffic's own programs need (measured: docs/performance.md), so there is none.
        case whenSaturated = "auto"
        /// For every batch large enough (for tests: the path taken at once).
        case always
    }

    /// Where the device serves wg(8)'s userspace API.
    public enum UAPISocket {
        /// A socket the device makes at this path (its directory created owner-writable), and removes
        /// at stop.
        case path(String)
        /// A listening Unix socket someone else made (the engine, where wg(8) looks): served, and closed
        /// at stop; its file is its maker's to remove.
        case handedOver(FileDescriptor)
    }

    let published = Mutex(Snapshot())
    /// Set by stop(); the device thread exits when it sees it.
    let stopping = Atomic<Bool>(false)
    /// Snapshot requests made and answered: a reader asks, wakes the thread, and waits for the answer.
    let requested = Atomic<UInt64>(0)
    let answered = Atomic<UInt64>(0)
    let timers: WireGuardTimers
    let log: @Sendable (String) -> Void

    var privateKey: PrivateKey
    var publicKey: WireGuardKey
    /// The UDP sockets: the port, the mark, every datagram in and out.
    let bind: any Bind
    /// The configuration's FwMark (0: none): the sockets' mark, which else is the tunnel's (start).
    let configuredMark: UInt32
    /// The slot's mark when Tunnelgate's routing and kill switch exempt the sockets by it: `wg set fwmark`
    /// cannot change it then.
    var managedMark: UInt32?
    /// The TUN, set by start.
    var tun: (any PacketIO)!
    /// Whether every TUN read and write carries a struct virtio_net_hdr (the TUN was made with
    /// offloads: reads may be TCP super-packets to segment, or need their checksum completed).
    var tunHeader = false
    var mtu = 1420
    var uapi: FileDescriptor?
    var uapiPath: String?
    /// The UAPI thread (reads and parses wg(8)'s requests), and the request it posted for this thread.
    var uapiServer: UAPIServer?
    let uapiMailbox = Mutex<UAPIServer.Exchange?>(nil)
    /// The stop signal: stop() writes a byte to `wakeWriter`, the device thread polls `wake`.
    let wake: FileDescriptor
    let wakeWriter: FileDescriptor
    var thread: SystemThread?

    var peers: [Int: Peer] = [:]
    var peerByKey: [WireGuardKey: Int] = [:]
    var nextPeerID = 0
    var allowed = AllowedIPs()
    /// Receive index → peer: handshakes in flight and sessions.
    var indexTable: [UInt32: Int] = [:]
    /// The handshake thread: admits handshake messages (MAC1, MAC2 under load, cookie replies, the
    /// per-source buckets) off this thread. Made by start.
    var gate: HandshakeGate?
    var counters = DeviceCounters()
    var lastTimestamp = [UInt8](repeating: 0, count: 12)

    /// Handshake messages per 100 ms above which the device is under load (for a second): HandshakeGate.
    static let loadLimitPerWindow = 32

    /// Receive moderation, as a NIC's interrupt moderation (rx-usecs): after a wake-up that received
    /// fewer than `moderatedBelow` messages from its sockets (a run UDP_GRO merged counts once) and
    /// found nothing to read from the TUN, the device thread waits up to this long before it polls its
    /// sockets again. A thread that drains its socket faster than the peer fills it otherwise sleeps
    /// in poll(2) after every few datagrams, and each datagram that arrives then wakes it: the wake-up
    /// is paid by whoever delivered the datagram (the sender's softirq on a veth, or a NIC's), which
    /// is the peer sending as fast as it can. Measured (docs/performance.md, session 9): current
    /// wireguard-go sending UDP to this device delivered 66,000–74,000 packets in 5 s without it and
    /// 103,000–168,000 with 50 µs, where wireguard-go ⇄ itself delivered 83,000–98,000. What was
    /// received is already on the TUN before the wait; a full batch, a stop or a handshake does not
    /// wait, and a TUN packet or a wake-up ends the wait at once.
    static let receiveModeration = 50e-6
    static let receiveModerationNanoseconds = Int64(receiveModeration * 1e9)
    static let moderatedBelow = 16

    // Buffers: datagrams in (one recvmmsg), datagrams out per socket family (one sendmmsg each), TUN
    // reads (with a virtio_net_hdr one packet of up to 64 KB: an IPv6 super-packet is 40 + 65,535
    // bytes; without, up to 64 packets of the MTU), and the decrypted packets of one receive batch as
    // references into it, for one batch write to the TUN.
    /// TUN reads per wake-up.
    static let readsPerWakeUp = 64
    /// TUN reads per wake-up stop after this many packets (segments counted), so that the UDP side
    /// (the peer's ACKs) gets its turn.
    static let packetsPerWakeUp = 128
    /// Messages per recvmmsg when the kernel merges a peer's datagrams (UDP_GRO): each may be a run of
    /// up to 64 of them, so 16 messages are up to 1,024 datagrams, and their 64 KB slots 1 MB that a
    /// receiving plane touches (64 would be 4 MB). Without merging the batch has 64 slots, of which the
    /// kernel touches only what each datagram fills.
    static let mergedReceiveSlots = 16
    var received = DatagramBatch(slotSize: 16, capacity: 1)  // sized in start, as the TUN batches are
    var outbound4 = DatagramBatch(slotSize: 1420 + 32)
    var outbound6 = DatagramBatch(slotSize: 1420 + 32)
    var tunReads = PacketBatch(capacity: 1, slotSize: 16, headroom: 0)
    var tunWrites = PacketBatch(references: 1, headroom: 0)
    /// Groups a receive batch's decrypted TCP segments (and UDP runs) into super-packets for a TUN
    /// with offloads (receive-side GRO).
    var coalescer = PacketCoalescer(capacity: 1)
    /// Whether a receive batch's packets go to the TUN through `coalescer` (a TUN with offloads).
    var coalescesTunWrites = false
    /// Whether the carrier sockets merge runs of a peer's datagrams (UDP_GRO).
    var mergesReceives = false
    /// The crypto worker and when it is used; the jobs of one batch to seal (a super-packet's segments)
    /// and to open (a receive batch's transport messages), and what the open ones need afterwards.
    var cryptoWorkers = CryptoWorkers.off
    var cryptoWorker: CryptoWorker?
    let sealJobs = CryptoJobs(.seal, capacity: 2 * DatagramBatch.capacity)
    var openJobs = CryptoJobs(.open, capacity: 1)
    var opened: [OpenedTransport] = []
    /// Whether the device thread was saturated in the last window, and the window's idle time so far.
    var saturated = false
    var windowStart = 0.0
    var idleInWindow = 0.0

    /// A device on `bind` (whose sockets it owns from now on) with the configuration's peers. Its
    /// `listenPort` and `fwmark` were the bind's to use; the fwmark is checked again at start.
    init(_ configuration: DeviceConfiguration, bind: any Bind, timers: WireGuardTimers,
         log: @escaping @Sendable (String) -> Void) throws(RuntimeError) {
        _ = sodium_init()
        self.timers = timers
        self.log = log
        self.bind = bind
        privateKey = configuration.privateKey
        publicKey = configuration.privateKey.publicKey
        configuredMark = configuration.fwmark
        do throws(SystemCallError) {
            (wake, wakeWriter) = try FileDescriptor.pipe()
        } catch {
            bind.close()
            throw RuntimeError("pipe: \(error)")
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

    /// Binds the UDP port (so a port in use is an error before anything else happens), marks the
    /// sockets with the configuration's fwmark, and takes the configuration's peers.
    public convenience init(_ configuration: DeviceConfiguration, timers: WireGuardTimers,
                            log: @escaping @Sendable (String) -> Void) throws(RuntimeError) {
        let bind: UDPBind
        do throws(BindError) {
            bind = try UDPBind.open(port: configuration.listenPort, mark: configuration.fwmark, log: log)
        } catch { throw RuntimeError(error.description) }
        try self.init(configuration, bind: bind, timers: timers, log: log)
    }

    deinit {
        wake.close()
        wakeWriter.close()
    }

    public var boundPort: UInt16 { bind.port }

    /// Starts the device thread on `tun`, serving the UAPI on `uapi` when given. The sockets carry
    /// the configuration's fwmark, else `fwmark` (the tunnel's carrier identity): sockets made here are
    /// marked with it, and the engine's must carry it already. With `udpSegmentation`, runs of
    /// same-size datagrams to one peer (a TCP super-packet's segments) are sent with UDP_SEGMENT; with
    /// `receiveOffload`, the sockets hand over runs of a peer's datagrams as one (UDP_GRO) and, on a TUN
    /// with offloads, a batch's in-order segments of a flow go to it as one super-packet.
    public func start(tun: any PacketIO, fwmark: UInt32?, uapi: UAPISocket?, udpSegmentation: Bool = true,
                      receiveOffload: Bool = true, workers: CryptoWorkers = .whenSaturated) throws(RuntimeError) {
        self.tun = tun
        mtu = tun.mtu
        tunHeader = tun.carriesVirtioHeader
        tunReads = tun.makeReadBatch(capacity: tunHeader ? 1 : Self.readsPerWakeUp)
        mergesReceives = receiveOffload && bind.enableReceiveOffload()
        // With UDP_GRO, one received message may hold up to 64 datagrams: fewer, larger messages.
        received = DatagramBatch(slotSize: 65536, capacity: mergesReceives ? Self.mergedReceiveSlots : DatagramBatch.capacity)
        let writes = mergesReceives ? received.capacity * 64 : received.capacity
        tunWrites = PacketBatch(references: writes, headroom: tun.headerSize)
        coalescer = PacketCoalescer(capacity: writes)
        coalescesTunWrites = receiveOffload && tunHeader
        openJobs = CryptoJobs(.open, capacity: writes)
        opened.reserveCapacity(writes)
        cryptoWorkers = workers
        // A slot holds the largest packet the TUN gives (the MTU) sealed: header, padding, tag.
        outbound4 = DatagramBatch(slotSize: mtu + Transport.overhead + 16, segmentation: udpSegmentation)
        outbound6 = DatagramBatch(slotSize: mtu + Transport.overhead + 16, segmentation: udpSegmentation)
        managedMark = fwmark
        // A handed-over UAPI socket is the device's from here on, also when start fails (stop closes it).
        if case .handedOver(let listener)? = uapi { self.uapi = listener }
        if let wanted = configuredMark != 0 ? configuredMark : fwmark, wanted != bind.mark {
            if bind.isHandedOver {
                throw RuntimeError("the carrier sockets carry fwmark 0x\(String(bind.mark, radix: 16)), not the tunnel's "
                                   + "carrier identity 0x\(String(wanted, radix: 16)): the engine must mark them")
            }
            do throws(BindError) { try bind.setMark(wanted) } catch { throw RuntimeError(error.description) }
        }
        switch uapi {
        case .path(let path)?:
            let directory = String(path[..<(path.lastIndex(of: "/") ?? path.endIndex)])
            _ = try? FileSystem.createDirectory(directory, mode: 0o755)
            do throws(SystemCallError) {
                self.uapi = try UnixSocket.listen(at: path)
                uapiPath = path
            } catch {
                throw RuntimeError("the WireGuard API socket \(path): \(error)")
            }
        case .handedOver(let listener)?:
            let listening: Bool
            do throws(SystemCallError) {
                let family = try listener.socketFamily()
                let accepting = try listener.isListeningStreamSocket()
                listening = family == SocketFamily.unix && accepting
                if listening { try listener.setNonBlocking(true) }
            } catch {
                listener.close()
                self.uapi = nil
                throw RuntimeError("the handed-over WireGuard API socket: \(error)")
            }
            guard listening else {
                listener.close()
                self.uapi = nil
                throw RuntimeError("the handed-over WireGuard API socket is not a listening Unix stream socket")
            }
        case nil:
            break
        }
        let offloads = tunHeader, coalesces = coalescesTunWrites, merges = mergesReceives
        published.withLock {
            $0.running = true
            $0.tunOffloads = offloads
            $0.tunCoalescing = coalesces
            $0.udpReceiveOffload = merges
        }
        // Peers with a persistent keepalive start their handshake at once (as a kernel interface does on up).
        let now = ProcessControl.monotonicSeconds()
        for peer in peers.values where peer.persistentKeepalive > 0 && peer.endpoint != nil {
            sendKeepalive(peer, now: now)
        }
        // The handshake thread and the UAPI thread exist before the device thread reads `gate` and
        // `uapiServer`; they start after it.
        do throws(SystemCallError) {
            gate = try HandshakeGate(publicKey: publicKey, cookies: CookieGenerator(localPublic: publicKey, now: ProcessControl.monotonicSeconds()),
                                     bind: bind, log: log) { [self] in wakeUp() }
        } catch {
            throw RuntimeError("the WireGuard handshake thread: \(error)")
        }
        if let listener = self.uapi {
            do throws(SystemCallError) {
                uapiServer = try UAPIServer(listener: listener, log: log) { [self] exchange in
                    uapiMailbox.withLock { $0 = exchange }
                    wakeUp()
                }
            } catch {
                throw RuntimeError("the WireGuard API thread: \(error)")
            }
        }
        if workers == .always || (workers == .whenSaturated && ProcessControl.usableProcessors() >= CryptoWorker.minimumProcessors) {
            do throws(SystemCallError) { cryptoWorker = try CryptoWorker() } catch {
                throw RuntimeError("the WireGuard crypto worker thread: \(error)")
            }
        }
        let hasWorker = cryptoWorker != nil
        published.withLock { $0.cryptoWorker = hasWorker }
        do throws(SystemCallError) {
            thread = try SystemThread.spawn { [self] in run() }
        } catch {
            uapiServer = nil
            throw RuntimeError("starting the WireGuard thread: \(error)")
        }
        do throws(SystemCallError) { try gate?.start() } catch {
            throw RuntimeError("starting the WireGuard handshake thread: \(error)")
        }
        do throws(SystemCallError) { try uapiServer?.start() } catch {
            throw RuntimeError("starting the WireGuard API thread: \(error)")
        }
    }

    /// Stops the device thread, wipes every key, closes the sockets and
    /// removes the UAPI socket it made. Once; later calls do nothing.
    public func stop() {
        // The UAPI thread first: it may be waiting for this thread's answer.
        uapiServer?.stop()
        uapiServer = nil
        if let thread {
            stopping.store(true, ordering: .releasing)
            wakeUp()
            thread.join()
        }
        thread = nil
        cryptoWorker?.stop()
        cryptoWorker = nil
        // The handshake thread after the device thread (which may have been waking it), before the
        // sockets it sends cookie replies on are closed.
        gate?.stop()
        for peer in peers.values { peer.clearKeys() }
        bind.close()
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
        wakeUp()
        let deadline = ProcessControl.monotonicSeconds() + 0.2
        var pause = 0.0001
        while answered.load(ordering: .acquiring) < ticket, ProcessControl.monotonicSeconds() < deadline {
            ProcessControl.sleep(seconds: pause)
            pause = min(pause * 2, 0.005)
        }
        return published.withLock { $0 }
    }

    /// A byte into the wake-up pipe (a full pipe already wakes the thread).
    func wakeUp() {
        var one: UInt8 = 1
        _ = withUnsafeBytes(of: &one) { try? wakeWriter.write($0) }
    }

    // MARK: - The device thread

    private func run() {
        var poll = PollSet()
        var drain = [UInt8](repeating: 0, count: 64)
        let none = FileDescriptor(rawValue: -1)  // poll(2) skips it
        while true {
            poll.removeAll()
            poll.add(tun.readiness, .readable)                      // 0
            poll.add(bind.readiness(.ipv4) ?? none, .readable)      // 1
            poll.add(bind.readiness(.ipv6) ?? none, .readable)      // 2
            poll.add(none, [])                                      // 3 (the UAPI has its own thread)
            poll.add(wake, .readable)                               // 4
            var now = ProcessControl.monotonicSeconds()
            let deadline = nextTimerDeadline() ?? .infinity
            let timeout = max(0, deadline - now)
            do throws(SystemCallError) {
                _ = try poll.wait(timeoutNanoseconds: timeout.isFinite ? Int64(timeout * 1e9) : nil)
            } catch {
                published.withLock { $0.failure = "\(error)" }
                return
            }
            if cryptoWorkers == .whenSaturated { account(idleFrom: now, to: ProcessControl.monotonicSeconds()) }
            // A TUN whose interface was deleted reports an error forever: the device ends (as
            // wireguard-go does when its interface goes), instead of spinning on it.
            if !poll.events(at: 0).intersection([.error, .hangUp, .invalid]).isEmpty {
                published.withLock { $0.failure = "the TUN interface is gone" }
                log("the TUN interface is gone; the device stops")
                return
            }
            let woken = !poll.events(at: 4).isEmpty
            if woken {
                if stopping.load(ordering: .acquiring) { return }
                _ = drain.withUnsafeMutableBytes { try? wake.read(into: $0) }
            }
            now = ProcessControl.monotonicSeconds()
            var received = 0
            if !poll.events(at: 1).isEmpty { received += receiveDatagrams(.ipv4, now: now) }
            if !poll.events(at: 2).isEmpty { received += receiveDatagrams(.ipv6, now: now) }
            flushOutbound()
            let tunReadable = poll.events(at: 0).contains(.readable)
            if tunReadable { readTun(now: now) }
            if woken { admittedHandshakes(now: now) }
            // A request from the UAPI thread comes with a wake-up.
            if woken, let server = uapiServer, let exchange = uapiMailbox.withLock({ m -> UAPIServer.Exchange? in
                let e = m
                m = nil
                return e
            }) {
                answer(exchange, server: server, now: now)
            }
            runTimers(now: ProcessControl.monotonicSeconds())
            flushOutbound()
            let asked = requested.load(ordering: .acquiring)
            if asked > answered.load(ordering: .relaxed) {
                publish()
                answered.store(asked, ordering: .releasing)
            }
            // The wait is one ppoll(2) over the TUN and the wake-up pipe only: the sockets gather the
            // peer's next datagrams, while a TUN packet (what this wake-up's writes provoked, a TCP
            // receiver's ACKs or a ping's reply, or one that arrives during the wait) or a wake-up ends
            // it at once and is handled by the next turn of the loop.
            if received > 0, received < Self.moderatedBelow, !tunReadable, !woken {
                poll.setEvents([], at: 1)
                poll.setEvents([], at: 2)
                counters.moderatedReceives += 1
                _ = try? poll.wait(timeoutNanoseconds: Self.receiveModerationNanoseconds)
            }
        }
    }

    /// Adds a wait in poll(2) to the window; at the end of each 100 ms window, the device thread was
    /// saturated when it waited for less than 15 % of it.
    func account(idleFrom start: Double, to end: Double) {
        idleInWindow += end - start
        let elapsed = end - windowStart
        if elapsed >= 0.1 {
            saturated = idleInWindow < 0.15 * elapsed
            windowStart = end
            idleInWindow = 0
        }
    }

    /// Whether `count` messages of one batch are sealed or opened on both threads.
    func splitsCrypto(_ count: Int) -> Bool {
        guard cryptoWorker != nil, count >= CryptoWorker.minimumJobs else { return false }
        return cryptoWorkers == .always || saturated
    }

    // MARK: Status

    func publish() {
        let list = peers.values.sorted { $0.id < $1.id }.map { peer in
            PeerStatus(publicKey: peer.publicKey, endpoint: peer.endpoint, allowedIPs: allowed.prefixes(of: peer.id),
                       lastHandshake: peer.lastHandshake.seconds, rxBytes: peer.rxBytes, txBytes: peer.txBytes,
                       persistentKeepalive: peer.persistentKeepalive, hasSession: peer.current != nil,
                       handshakeAttempts: peer.attempts)
        }
        var counters = self.counters
        counters.cryptoHandOffs = cryptoWorker?.handOffs ?? 0
        if let gate {
            // What the handshake thread counted.
            counters.cookieRepliesSent = gate.cookieRepliesSent.load(ordering: .relaxed)
            counters.dropsMAC = gate.dropsMAC.load(ordering: .relaxed)
            counters.dropsSourceRate = gate.dropsSourceRate.load(ordering: .relaxed)
            counters.dropsHandshakeQueue = gate.dropsQueueFull.load(ordering: .relaxed)
        }
        let port = bind.port
        published.withLock {
            $0.peers = list
            $0.counters = counters
            $0.listenPort = port
        }
    }
}
