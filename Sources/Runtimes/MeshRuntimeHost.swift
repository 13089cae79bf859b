import RuntimeABI
import TUN
import LinuxSystem
import Synchronization
import TunnelgateSettings

/// Hosts a MeshGuard mesh (libmeshguard-ffi.so) as the tunnel's runtime:
/// packets read from the TUN go through MeshGuard's WireGuard data tunnels to
/// the peer whose allowed prefixes hold their destination; payloads received
/// from the mesh are written to the TUN when their source is the sender's.
///
/// Threads, following MeshGuard's rules (one serial host context per
/// context, one consumer per receive queue, no leave/destroy from callbacks;
/// no callbacks are registered at all):
/// - the *host context* is one thread that makes every control call after
///   start (tunnel open/send/close, peer queries, suspend/resume). The loop's
///   packetIn only copies into its bounded queue (`.retryLater` when full),
///   so a slow library call never blocks the loop.
/// - the *consumer* is one thread that drains meshguard_tunnel_recv, sleeping
///   (50 µs doubling to 2 ms) only while it answers 1 = empty. It runs
///   concurrently with the host context: receiving and sending never wait
///   for each other. Verified in meshguard_ffi.zig: tunnel_recv only reads
///   the 256-slot ring through its atomic indices and per-slot valid flags
///   (single producer: the event loop; single consumer: this thread).
/// - init and join run in start, destroy in stop, on the owner's thread,
///   strictly before the two threads exist and after both are joined, so
///   the serial order holds.
public final class MeshRuntimeHost: HostedRuntime, @unchecked Sendable {
    // @unchecked Sendable: `context`, `library`, `mtu` and `writer` are set before the threads start and
    // never change while they run; the queue, jobs and snapshot are guarded by `signal`; the route table
    // by its Mutex; counters are atomics; `tunnels` and `peerStates` belong to the host-context thread.

    public let settings: MeshRuntimeSettings
    let library: MeshLibrary
    /// The identity seed, in secure memory (MeshIdentity.loadSeed), handed to meshguard_init, wiped at stop.
    private let seed: SecureBytes
    private var context: MeshLibrary.Context?
    private var writer: TunWriter?
    private var mtu = MeshRuntimeSettings.maximumMTU
    private var hostThread: SystemThread?
    private var consumerThread: SystemThread?
    private var stopped = false
    /// What start said it could not apply because the library lacks a symbol.
    private var disabled: [String] = []
    /// The node's identity and mesh IPv4, derived from the seed (checked against the library at start).
    public let identity: MeshIdentity
    private var joinedVia = ""

    // Shared with the threads.
    let signal = ConditionLock()
    private let queue: PacketRing
    private var running = false               // guarded by signal
    private var jobs: [@Sendable () -> Void] = []  // guarded by signal
    private var refreshRequested = false      // guarded by signal
    private var snapshot = Snapshot()         // guarded by signal
    let consumerRunning = Atomic<Bool>(false)
    let routes = Mutex(RouteTable(entries: []))

    // Host-context state.
    private var tunnels: [[UInt8]: TunnelState] = [:]
    /// Packets waiting for a peer's session (see send).
    private var pending: [[UInt8]: [[UInt8]]] = [:]
    private var peerAlive: [[UInt8]: Bool] = [:]
    private var everReady = false
    private var lastSendOK = 0.0, lastSendFailure = 0.0

    // Counters.
    let packetsIn = Atomic<UInt64>(0), bytesIn = Atomic<UInt64>(0)
    let packetsSent = Atomic<UInt64>(0)
    let queueFull = Atomic<UInt64>(0)
    let dropsNoPeer = Atomic<UInt64>(0), dropsOversize = Atomic<UInt64>(0)
    let dropsSend = Atomic<UInt64>(0), dropsNoSession = Atomic<UInt64>(0), queuedForHandshake = Atomic<UInt64>(0)
    let tunnelOpens = Atomic<UInt64>(0), tunnelOpenFailures = Atomic<UInt64>(0), sessions = Atomic<UInt64>(0)
    let received = Atomic<UInt64>(0), dropsSpoofed = Atomic<UInt64>(0)
    let dropsMalformed = Atomic<UInt64>(0), dropsWriter = Atomic<UInt64>(0), recvErrors = Atomic<UInt64>(0)

    /// What the host context knows of the tunnel to one peer. The library
    /// keeps the tunnel itself (its WireGuard device): a peer is in the
    /// device after our meshguard_tunnel_open or after the peer's handshake
    /// reached us, and has a session once a handshake completed.
    struct TunnelState {
        /// When meshguard_tunnel_open was last called (0: never); it sends one
        /// handshake initiation and the library allows one per 5 s per peer.
        var lastOpen = 0.0
        /// A send succeeded since the tunnel was last (re)opened or closed.
        var established = false
    }

    /// What status() shows between refreshes; built on the host context.
    struct Snapshot {
        var phase: RuntimeState.Phase = .starting
        var error: String?
        var peersJSON = "[]"
        var routeStatsJSON = "null"
        var libraryJSON = "null"
        var alivePeers = 0
    }

    /// Allowed prefixes per peer: where packets go, and what sources a sender may use.
    struct RouteTable: Sendable {
        struct Entry: Sendable { var prefix: IPPrefix; var identity: [UInt8] }
        var entries: [Entry]  // sorted by prefix length, longest first

        init(entries: [Entry]) { self.entries = entries.sorted { $0.prefix.length > $1.prefix.length } }

        /// The peer for a destination: longest prefix wins.
        func peer(for destination: IPAddress) -> [UInt8]? {
            entries.first { $0.prefix.contains(destination) }?.identity
        }

        /// Whether `sender` may send from `source`.
        func allows(_ sender: UnsafePointer<UInt8>, source: IPAddress) -> Bool {
            entries.contains { e in
                e.prefix.contains(source) && e.identity.elementsEqual(UnsafeBufferPointer(start: sender, count: 32))
            }
        }
    }

    /// Loads the library, binds its symbols and reads (or creates) the
    /// identity seed: every check that can fail before the kernel is touched.
    public convenience init(_ settings: MeshRuntimeSettings) throws(RuntimeError) {
        let library = try MeshLibrary(path: settings.library)
        let seed: SecureBytes
        do { seed = try MeshIdentity.loadSeed(settings) } catch { throw error.runtimeError }
        try self.init(settings, library: library, seed: seed)
    }

    /// A MeshGuard runtime whose library and seed were handed over (the packet plane).
    public convenience init(_ settings: MeshRuntimeSettings, libraryDescriptor: FileDescriptor, seed: SecureBytes) throws(RuntimeError) {
        try self.init(settings, library: try MeshLibrary(descriptor: libraryDescriptor, named: settings.library), seed: seed)
    }

    private init(_ settings: MeshRuntimeSettings, library: MeshLibrary, seed: SecureBytes) throws(RuntimeError) {
        self.settings = settings
        self.library = library
        self.seed = seed
        identity = try MeshIdentity(seed: seed)
        queue = PacketRing(capacity: 256, slotSize: MeshRuntimeSettings.maximumMTU)
        if case .routes(let peers) = settings.peers {
            routes.withLock { $0 = RouteTable(entries: peers.flatMap { p in p.prefixes.map { .init(prefix: $0, identity: p.identity) } }) }
        }
        if settings.relay != nil, library.setAppRelay == nil { disabled.append("relay (no meshguard_set_app_relay)") }
        if !settings.contacts.isEmpty, library.addContact == nil { disabled.append("contacts (no meshguard_add_contact)") }
        if settings.contactsOnly != nil, library.setContactsOnly == nil { disabled.append("contactsOnly (no meshguard_set_contacts_only)") }
        if settings.keepaliveSeconds != nil, library.setKeepalive == nil { disabled.append("keepaliveSeconds (no meshguard_set_keepalive_interval)") }
        if library.suspend == nil || library.resume == nil { disabled.append("suspend/resume messages (no meshguard_suspend/resume)") }
    }

    // MARK: - Lifecycle

    public func start(tun: FileDescriptor, mtu: Int) throws(RuntimeError) {
        precondition(context == nil && !stopped, "start is called once")
        guard mtu <= MeshRuntimeSettings.maximumMTU else {
            throw RuntimeError("mtu \(mtu) is above \(MeshRuntimeSettings.maximumMTU), MeshGuard's tunnel payload limit")
        }
        self.mtu = mtu
        writer = TunWriter(descriptor: tun.rawValue, mtu: mtu)
        let initialized = seed.withUnsafeBytes { library.initialize($0.baseAddress!.assumingMemoryBound(to: UInt8.self), settings.listenPort) }
        // The library keeps what it derives from the seed; this process needs it no more.
        seed.wipe()
        guard let ctx = initialized else {
            throw RuntimeError("meshguard_init failed (is UDP port \(settings.listenPort) free? runtime.listenPort)")
        }
        context = ctx
        do throws(RuntimeError) {
            try configure(ctx)
            try joinMesh(ctx)
        } catch {
            library.destroy(ctx)
            context = nil
            throw error
        }
        var key = [UInt8](repeating: 0, count: 32)
        library.getPublicKey(ctx, &key)
        guard key == identity.publicKey else {
            library.destroy(ctx)
            context = nil
            throw RuntimeError("the library's identity (meshguard_get_pubkey: \(MeshRuntimeSettings.hex(key))) is not the Ed25519 "
                               + "public key of the seed (\(identity.hex)): this library derives identities differently, so "
                               + "the node's mesh address (\(identity.meshIPv4)) cannot be known; is \(settings.library) MeshGuard?")
        }
        signal.locked { running = true; refreshRequested = true }
        consumerRunning.store(true, ordering: .releasing)
        do {
            hostThread = try SystemThread.spawn { [self] in hostContextLoop() }
            consumerThread = try SystemThread.spawn { [self] in consumerLoop() }
        } catch {
            stop()
            throw RuntimeError("starting the mesh threads failed: \(error)")
        }
    }

    /// Relay, contacts and keepalive: set before joining, as the guide asks.
    private func configure(_ ctx: MeshLibrary.Context) throws(RuntimeError) {
        if let seconds = settings.keepaliveSeconds, let set = library.setKeepalive {
            let rc = set(ctx, UInt32(seconds * 1000))
            guard rc == 0 else { throw RuntimeError("meshguard_set_keepalive_interval(\(seconds * 1000) ms) failed: \(rc) (runtime.keepaliveSeconds)") }
        }
        if let relay = settings.relay, let set = library.setAppRelay {
            let rc = relay.withUnsafeBufferPointer { set(ctx, $0.baseAddress, false) }
            guard rc == 0 else { throw RuntimeError("meshguard_set_app_relay failed: \(rc) (runtime.relay)") }
        }
        if let add = library.addContact {
            for (i, c) in settings.contacts.enumerated() {
                let rc = c.identity.withUnsafeBufferPointer { id in c.wireguardKey.withUnsafeBufferPointer { add(ctx, id.baseAddress, $0.baseAddress) } }
                guard rc == 0 else { throw RuntimeError("meshguard_add_contact failed: \(rc) (runtime.contacts[\(i)])") }
            }
        }
        if let only = settings.contactsOnly, let set = library.setContactsOnly {
            let rc = set(ctx, only)
            guard rc == 0 else { throw RuntimeError("meshguard_set_contacts_only failed: \(rc) (runtime.contactsOnly)") }
        }
    }

    /// Joins through the first seed that accepts (a 0 result means the
    /// event loop started; peers are awaited through status).
    private func joinMesh(_ ctx: MeshLibrary.Context) throws(RuntimeError) {
        var failures: [String] = []
        for seedPeer in settings.seeds {
            var rc: Int32
            if let v4 = seedPeer.ipv4 {
                rc = v4.bytes.withUnsafeBufferPointer { library.join(ctx, $0.baseAddress, seedPeer.port) }
            } else if let joinHost = library.joinHost {
                rc = joinHost(ctx, seedPeer.description)  // "host:port": the library resolves (DNS A) and joins
            } else if let v4 = Self.resolveIPv4(seedPeer.host) {
                rc = v4.bytes.withUnsafeBufferPointer { library.join(ctx, $0.baseAddress, seedPeer.port) }
            } else {
                failures.append("\(seedPeer): does not resolve to IPv4")
                continue
            }
            if rc == 0 { joinedVia = seedPeer.description; return }
            failures.append("\(seedPeer): meshguard_join\(seedPeer.ipv4 == nil && library.joinHost != nil ? "_host" : "") returned \(rc)"
                            + (rc == -11 ? " (the name does not resolve)" : ""))
        }
        throw RuntimeError("joining the mesh failed (runtime.seeds): " + failures.joined(separator: "; "))
    }

    static func resolveIPv4(_ host: String) -> IPv4Address? {
        guard case .success(let addresses) = SocketAddress.resolve(host, family: SocketFamily.ipv4),
              case .ipv4(let bytes, _) = addresses.first else { return nil }
        return IPv4Address(bytes: bytes)
    }

    /// Stops the threads, closes the tunnels and leaves the mesh
    /// (meshguard_destroy) exactly once, after the consumer is joined.
    public func stop() {
        guard !stopped else { return }
        stopped = true
        signal.locked { running = false }
        signal.broadcast()
        hostThread?.join()
        hostThread = nil
        consumerRunning.store(false, ordering: .releasing)
        consumerThread?.join()
        consumerThread = nil
        if let ctx = context {
            for peer in tunnels.keys {
                peer.withUnsafeBufferPointer { library.tunnelClose(ctx, $0.baseAddress) }
            }
            library.destroy(ctx)
            context = nil
        }
        writer?.closed.store(true, ordering: .releasing)
        seed.wipe()
    }

    deinit { stop() }

    // MARK: - Loop interface

    public func packetIn(_ packet: UnsafePointer<UInt8>, _ len: Int) -> PacketDelivery {
        guard len > 0, len <= mtu else { dropsOversize.add(1, ordering: .relaxed); return .refused }
        let accepted: Bool? = signal.locked {
            guard running else { return nil }
            return queue.push(packet, len)
        }
        guard let accepted else { return .refused }
        guard accepted else { queueFull.add(1, ordering: .relaxed); return .retryLater }
        signal.signal()
        packetsIn.add(1, ordering: .relaxed)
        bytesIn.add(UInt64(len), ordering: .relaxed)
        return .accepted
    }

    public func status() throws(RuntimeError) -> RuntimeState {
        guard context != nil, !stopped else { throw RuntimeError("the mesh runtime is not running") }
        let s: Snapshot = signal.locked { refreshRequested = true; return snapshot }
        signal.signal()
        let interface: String? = (s.phase == .ready || s.phase == .reconnecting) ? "meshguard" : nil
        let w = writer
        var json = "{\"state\":\"\(s.phase.rawValue)\",\"interface\":\(interface.map(jsonString) ?? "null"),"
        json += "\"packetPath\":\"callback\",\"mtu\":\(mtu),\"identity\":\"\(identity.hex)\",\"meshIPv4\":\"\(identity.meshIPv4)\","
        json += "\"listenPort\":\(settings.listenPort),\"joinedVia\":\(jsonString(joinedVia)),"
        json += "\"routing\":\"\(settings.peers == .auto ? "auto" : "prefixes")\",\"alivePeers\":\(s.alivePeers),"
        json += "\"peers\":\(s.peersJSON),"
        func c(_ a: borrowing Atomic<UInt64>) -> UInt64 { a.load(ordering: .relaxed) }
        json += "\"packetsIn\":\(c(packetsIn)),\"bytesIn\":\(c(bytesIn)),\"tunnelSends\":\(c(packetsSent)),"
        json += "\"packetsOut\":\(w.map { $0.packets.load(ordering: .relaxed) } ?? 0),\"bytesOut\":\(w.map { $0.bytes.load(ordering: .relaxed) } ?? 0),"
        json += "\"received\":\(c(received)),\"queueFull\":\(c(queueFull)),\"dropsNoPeer\":\(c(dropsNoPeer)),"
        json += "\"dropsOversize\":\(c(dropsOversize)),\"dropsSend\":\(c(dropsSend)),\"dropsNoSession\":\(c(dropsNoSession)),\"queuedForHandshake\":\(c(queuedForHandshake)),"
        json += "\"tunnelOpens\":\(c(tunnelOpens)),\"tunnelOpenFailures\":\(c(tunnelOpenFailures)),\"sessions\":\(c(sessions)),"
        json += "\"dropsSpoofed\":\(c(dropsSpoofed)),\"dropsMalformed\":\(c(dropsMalformed)),\"dropsWriter\":\(c(dropsWriter)),"
        json += "\"recvErrors\":\(c(recvErrors)),\"routeStats\":\(s.routeStatsJSON),\"library\":\(s.libraryJSON),"
        json += "\"disabled\":[\(disabled.map(jsonString).joined(separator: ","))]"
        if let e = s.error { json += ",\"error\":\(jsonString(e))" }
        json += "}"
        return RuntimeState(phase: s.phase, interface: interface, error: s.error, json: json)
    }

    /// Messages: `status` (the live status JSON with every counter), `peers` (the peer list),
    /// `suspend`, `resume` (meshguard_suspend/resume, on the host context).
    public func appMessage(_ bytes: [UInt8]) throws(RuntimeError) -> [UInt8] {
        guard let ctx = context, !stopped else { throw RuntimeError("the mesh runtime is not running") }
        let text = String(decoding: bytes, as: UTF8.self)
        let call: MeshLibrary.Suspend?
        switch text {
        case "suspend": call = library.suspend
        case "resume": call = library.resume
        case "peers": return Array(signal.locked { snapshot.peersJSON }.utf8)
        case "status": return Array(try status().json.utf8)
        default: throw RuntimeError("unknown message \(quoted(text)) (the mesh runtime takes: status, peers, suspend, resume)")
        }
        guard let call else { throw RuntimeError("the MeshGuard library has no meshguard_\(text)") }
        let done = Atomic<Bool>(false)
        let bits = UInt(bitPattern: Int(bitPattern: UnsafeRawPointer(ctx)))
        signal.locked { jobs.append { call(OpaquePointer(bitPattern: bits)); done.store(true, ordering: .releasing) } }
        signal.broadcast()
        let deadline = ProcessControl.monotonicSeconds() + 5
        while ProcessControl.monotonicSeconds() < deadline {
            if done.load(ordering: .acquiring) { return Array((text == "suspend" ? "suspended" : "resumed").utf8) }
            ProcessControl.sleep(seconds: 0.001)
        }
        throw RuntimeError("meshguard_\(text) did not return within 5 s")
    }

    public var tunWriter: TunWriter? { writer }
    public var packetPath: PacketPath { .callback }
    public var startTimeout: Double { settings.startTimeoutSeconds }
    public var summary: String {
        let routing = settings.peers == .auto ? "auto routes" : "prefix routes"
        var s = "MeshGuard \(settings.library), mesh IPv4 \(identity.meshIPv4), \(routing), mtu \(mtu)"
        if !disabled.isEmpty { s += "; disabled (library lacks the symbol): " + disabled.joined(separator: ", ") }
        return s
    }

    // MARK: - Host context

    private func hostContextLoop() {
        guard let ctx = context else { return }
        var nextRefresh = 0.0
        signal.lock()
        while true {
            // Packets waiting for a handshake are retried every 2 ms (tunnel_send answers at once).
            let wake = pending.isEmpty ? nextRefresh : min(nextRefresh, ProcessControl.monotonicSeconds() + 0.002)
            while running, queue.count == 0, jobs.isEmpty, !refreshRequested, ProcessControl.monotonicSeconds() < wake {
                signal.wait(until: wake)
            }
            guard running else { break }
            let dueJobs = jobs
            jobs = []
            let n = queue.count
            let refresh = refreshRequested || ProcessControl.monotonicSeconds() >= nextRefresh
            refreshRequested = false
            signal.unlock()
            for job in dueJobs { job() }
            for peer in Array(pending.keys) { flushPending(ctx, peer) }
            // The slots [head, head+n) are the consumer side's until released: the producer writes after them.
            for i in 0..<n {
                let (p, len) = queue.slot(i)
                send(ctx, p, len)
            }
            if refresh {
                refreshPeers(ctx)
                nextRefresh = ProcessControl.monotonicSeconds() + 0.25
            }
            signal.lock()
            queue.release(n)
        }
        signal.unlock()
    }

    /// Sends first and opens only when the library says there is no tunnel:
    /// the side that answered a peer's handshake already has a session
    /// (MeshGuard registers the initiator when its handshake arrives), and
    /// opening again there would only re-key. A 0 from meshguard_tunnel_open
    /// means an initiation was sent, not that a session exists: until the
    /// response arrives, sends answer -5. Meanwhile the peer's packets wait
    /// (at most `pendingLimit`, in order) and are retried every 2 ms, as
    /// WireGuard queues packets during a handshake. The library retransmits
    /// no initiation by itself, so one without an answer is sent again
    /// after 5 s (its own limit: one initiation per peer every 5 s) and the
    /// packets that waited for it are dropped (dropsNoSession).
    private func send(_ ctx: MeshLibrary.Context, _ p: UnsafePointer<UInt8>, _ len: Int) {
        guard let destination = Self.address(p, len, source: false) else { dropsMalformed.add(1, ordering: .relaxed); return }
        guard let peer = routes.withLock({ $0.peer(for: destination) }) else { dropsNoPeer.add(1, ordering: .relaxed); return }
        if pending[peer] != nil {
            enqueuePending(peer, Array(UnsafeBufferPointer(start: p, count: len)))
            flushPending(ctx, peer)
            return
        }
        let rc = peer.withUnsafeBufferPointer { library.tunnelSend(ctx, $0.baseAddress, p, UInt32(len)) }
        if rc == 0 { sent(peer); return }
        if awaitingSession(ctx, peer, rc) {
            enqueuePending(peer, Array(UnsafeBufferPointer(start: p, count: len)))
        } else {
            dropsSend.add(1, ordering: .relaxed)
            lastSendFailure = ProcessControl.monotonicSeconds()
        }
    }

    private func sent(_ peer: [UInt8]) {
        packetsSent.add(1, ordering: .relaxed)
        lastSendOK = ProcessControl.monotonicSeconds()
        if tunnels[peer]?.established != true {
            tunnels[peer, default: TunnelState()].established = true
            sessions.add(1, ordering: .relaxed)
        }
    }

    /// Whether a failed send means "no session yet" (-4: the peer is not in
    /// the library's device; -5: in it without a session), opening or
    /// re-opening the tunnel when it is time to.
    private func awaitingSession(_ ctx: MeshLibrary.Context, _ peer: [UInt8], _ rc: Int32) -> Bool {
        let now = ProcessControl.monotonicSeconds()
        var t = tunnels[peer] ?? TunnelState()
        defer { tunnels[peer] = t }
        switch rc {
        case -4:
            // At most once a second while opening fails (not a member yet, no endpoint, …).
            if t.lastOpen == 0 || now - t.lastOpen >= 1 { openTunnel(ctx, peer, &t, now) }
            return true
        case -5:
            // The handshake is pending, was lost, or the session expired: re-initiate after 5 s.
            if t.lastOpen == 0 || now - t.lastOpen >= 5 {
                if t.lastOpen != 0 {
                    lastSendFailure = now  // an initiation went unanswered for 5 s
                    dropPending(peer)
                }
                openTunnel(ctx, peer, &t, now)
            }
            return true
        default:
            return false
        }
    }

    /// Packets waiting for a peer's session; the oldest is dropped when full.
    static let pendingLimit = 64

    private func enqueuePending(_ peer: [UInt8], _ packet: [UInt8]) {
        var q = pending[peer] ?? []
        if q.count >= Self.pendingLimit {
            q.removeFirst()
            dropsNoSession.add(1, ordering: .relaxed)
        }
        q.append(packet)
        pending[peer] = q
        queuedForHandshake.add(1, ordering: .relaxed)
    }

    private func dropPending(_ peer: [UInt8]) {
        if let q = pending.removeValue(forKey: peer) { dropsNoSession.add(UInt64(q.count), ordering: .relaxed) }
    }

    /// Sends a peer's waiting packets in order, as far as its session allows.
    private func flushPending(_ ctx: MeshLibrary.Context, _ peer: [UInt8]) {
        guard var q = pending[peer] else { return }
        var done = 0
        while done < q.count {
            let rc = peer.withUnsafeBufferPointer { id in q[done].withUnsafeBufferPointer { library.tunnelSend(ctx, id.baseAddress, $0.baseAddress, UInt32($0.count)) } }
            if rc == 0 { sent(peer); done += 1; continue }
            if awaitingSession(ctx, peer, rc) { break }
            dropsSend.add(1, ordering: .relaxed)
            lastSendFailure = ProcessControl.monotonicSeconds()
            done += 1
        }
        guard pending[peer] != nil else { return }  // dropped while re-opening
        q.removeFirst(done)
        pending[peer] = q.isEmpty ? nil : q
    }

    private func openTunnel(_ ctx: MeshLibrary.Context, _ peer: [UInt8], _ t: inout TunnelState, _ now: Double) {
        t.lastOpen = now
        t.established = false
        let rc = peer.withUnsafeBufferPointer { library.tunnelOpen(ctx, $0.baseAddress) }
        if rc == 0 { tunnelOpens.add(1, ordering: .relaxed) } else { tunnelOpenFailures.add(1, ordering: .relaxed) }
    }

    /// Peers from the library: states, auto routes, the phase. The library
    /// lists alive peers only (peer_count, get_peers); peers seen before and
    /// configured peers are asked for by identity (get_peer_info answers for
    /// any member), so a peer that went away shows as suspected or dead.
    private func refreshPeers(_ ctx: MeshLibrary.Context) {
        let count = min(Int(library.peerCount(ctx)), 1024)
        var ids = [UInt8](repeating: 0, count: max(count, 1) * 32)
        let n = count == 0 ? 0 : min(Int(library.getPeers(ctx, &ids, UInt32(count))), count)
        let configured: [[UInt8]]? = { if case .routes(let r) = settings.peers { return r.map(\.identity) } else { return nil } }()
        var order: [[UInt8]] = (0..<n).map { Array(ids[($0 * 32)..<($0 * 32 + 32)]) }
        var listed = Set(order)
        for id in (configured ?? []) + peerAlive.keys.sorted(by: { $0.lexicographicallyPrecedes($1) }) where !listed.contains(id) {
            order.append(id)
            listed.insert(id)
        }
        var peersJSON: [String] = []
        var autoEntries: [RouteTable.Entry] = []
        var alive = 0, configuredAlive = 0
        for id in order {
            var info = [UInt8](repeating: 0, count: 48)
            let rc = id.withUnsafeBufferPointer { library.getPeerInfo(ctx, $0.baseAddress, &info) }
            let tunnel = tunnels[id].map { $0.established ? "\"established\"" : "\"opening\"" } ?? "\"none\""
            guard rc == 0 else {
                peerGone(ctx, id)
                peerAlive[id] = false
                if configured?.contains(id) == true {
                    peersJSON.append("{\"identity\":\"\(MeshRuntimeSettings.hex(id))\",\"state\":\"unknown\",\"tunnel\":\(tunnel)}")
                }
                continue
            }
            let endpoint = "\(IPv4Address(bytes: info[0..<4])):\(Int(info[4]) << 8 | Int(info[5]))"
            let meshIP = IPv4Address(bytes: info[6..<10])
            let state = ["alive", "suspected", "dead", "left"][Int(min(info[10], 3))]
            let isAlive = info[10] == 0
            let connection = ["direct", "relayed", "unknown"][Int(min(info[44], 2))]
            if isAlive { alive += 1 }
            if isAlive, configured?.contains(id) ?? true { configuredAlive += 1 }
            if info[10] >= 2 { peerGone(ctx, id) }  // dead or left; a suspected peer keeps its session
            peerAlive[id] = isAlive
            if isAlive, !meshIP.isUnspecified, let prefix = IPPrefix(address: .v4(meshIP), length: 32) {
                autoEntries.append(.init(prefix: prefix, identity: id))
            }
            let prefixes: [String]
            if configured == nil { prefixes = isAlive && !meshIP.isUnspecified ? ["\(meshIP)/32"] : [] }
            else { prefixes = routes.withLock { $0.entries.filter { $0.identity == id }.map { $0.prefix.description } } }
            peersJSON.append("{\"identity\":\"\(MeshRuntimeSettings.hex(id))\",\"state\":\"\(state)\",\"endpoint\":\"\(endpoint)\","
                             + "\"meshIPv4\":\"\(meshIP)\",\"connection\":\"\(connection)\",\"wireguardKey\":\(info[11] == 1),"
                             + "\"tunnel\":\(tunnel),\"prefixes\":[\(prefixes.map(jsonString).joined(separator: ","))]}")
        }
        if configured == nil { routes.withLock { $0 = RouteTable(entries: autoEntries) } }
        var statsJSON = "null"
        if let stats = library.routeStats {
            var out = [UInt8](repeating: 0, count: 32)
            if stats(ctx, &out) == 0 {
                func u64(_ i: Int) -> UInt64 { (0..<8).reduce(UInt64(0)) { $0 | UInt64(out[i * 8 + $1]) << (8 * UInt64($1)) } }
                statsJSON = "{\"directSends\":\(u64(0)),\"relaySends\":\(u64(1)),\"failedRoutes\":\(u64(2)),\"duplicateDrops\":\(u64(3))}"
            }
        }
        var libraryJSON = "null"
        if let debugInfo = library.debugInfo {
            var out = [UInt8](repeating: 0, count: 32)  // zeroed: trailing bytes are not written
            debugInfo(ctx, &out)
            func le(_ i: Int, _ n: Int) -> UInt32 { (0..<n).reduce(UInt32(0)) { $0 | UInt32(out[i + $1]) << (8 * UInt32($1)) } }
            libraryJSON = "{\"boundPort\":\(le(0, 2)),\"peers\":\(le(2, 2)),\"alivePeers\":\(le(4, 2)),\"running\":\(out[6] == 1),"
                + "\"gossipSent\":\(le(14, 4)),\"gossipReceived\":\(le(18, 4)),\"rawReceived\":\(le(22, 4)),\"ticks\":\(le(26, 4))}"
        }
        let now = ProcessControl.monotonicSeconds()
        let sendsFailing = lastSendFailure > lastSendOK && now - lastSendFailure < 2
        let phase: RuntimeState.Phase
        if configuredAlive > 0 && !sendsFailing { phase = .ready; everReady = true }
        else { phase = everReady ? .reconnecting : .starting }
        let json = "[" + peersJSON.joined(separator: ",") + "]"
        signal.locked {
            snapshot.phase = phase
            snapshot.peersJSON = json
            snapshot.routeStatsJSON = statsJSON
            snapshot.libraryJSON = libraryJSON
            snapshot.alivePeers = alive
        }
    }

    /// A peer is dead, has left or is no longer a member: whatever session
    /// we hold with it is stale once it comes back (a restarted peer has new
    /// session keys), so the tunnel is closed (the peer leaves the library's
    /// device) and the next packet to it opens a fresh one. No-op without a
    /// tunnel.
    private func peerGone(_ ctx: MeshLibrary.Context, _ id: [UInt8]) {
        dropPending(id)
        guard tunnels[id] != nil else { return }
        id.withUnsafeBufferPointer { library.tunnelClose(ctx, $0.baseAddress) }
        tunnels[id] = nil
    }

    // MARK: - Consumer

    private func consumerLoop() {
        guard let ctx = context, let writer else { return }
        let buffer = UnsafeMutablePointer<UInt8>.allocate(capacity: 1500)
        let sender = UnsafeMutablePointer<UInt8>.allocate(capacity: 32)
        defer { buffer.deallocate(); sender.deallocate() }
        var backoff: UInt32 = 50
        while consumerRunning.load(ordering: .acquiring) {
            var len: UInt32 = 0
            let rc = library.tunnelRecv(ctx, buffer, &len, sender)
            if rc == 1 {
                ProcessControl.sleep(seconds: Double(backoff) / 1e6)
                backoff = min(backoff * 2, 2000)
                continue
            }
            if rc != 0 {
                recvErrors.add(1, ordering: .relaxed)
                ProcessControl.sleep(seconds: 0.002)
                continue
            }
            backoff = 50
            received.add(1, ordering: .relaxed)
            let length = Int(min(len, 1500))
            guard TunWriter.malformation(buffer, length) == nil, let source = Self.address(buffer, length, source: true) else {
                dropsMalformed.add(1, ordering: .relaxed)
                continue
            }
            guard routes.withLock({ $0.allows(sender, source: source) }) else {
                dropsSpoofed.add(1, ordering: .relaxed)
                continue
            }
            if !writer.write(buffer, length) { dropsWriter.add(1, ordering: .relaxed) }
        }
    }

    /// The source or destination address of an IP packet.
    static func address(_ p: UnsafePointer<UInt8>, _ len: Int, source: Bool) -> IPAddress? {
        switch p[0] >> 4 {
        case 4 where len >= 20:
            let o = source ? 12 : 16
            return .v4(IPv4Address(bytes: UnsafeBufferPointer(start: p + o, count: 4)))
        case 6 where len >= 40:
            let o = source ? 8 : 24
            return .v6(IPv6Address(bytes: UnsafeBufferPointer(start: p + o, count: 16)))
        default:
            return nil
        }
    }
}

/// A bounded FIFO of packets in preallocated slots (no allocation per packet).
/// Guarded by the host's ConditionLock; the consumer reads slots outside the
/// lock between taking a count and releasing it, which the producer never touches.
final class PacketRing: @unchecked Sendable {  // @unchecked: every access happens under the ConditionLock's mutex (see above)
    let capacity: Int, slotSize: Int
    private let storage: UnsafeMutablePointer<UInt8>
    private var lengths: [Int]
    private var head = 0
    private(set) var count = 0

    init(capacity: Int, slotSize: Int) {
        self.capacity = capacity
        self.slotSize = slotSize
        storage = .allocate(capacity: capacity * slotSize)
        lengths = Array(repeating: 0, count: capacity)
    }
    deinit { storage.deallocate() }

    func push(_ p: UnsafePointer<UInt8>, _ len: Int) -> Bool {
        guard count < capacity, len <= slotSize else { return false }
        let i = (head + count) % capacity
        (storage + i * slotSize).update(from: p, count: len)
        lengths[i] = len
        count += 1
        return true
    }
    func slot(_ k: Int) -> (UnsafePointer<UInt8>, Int) {
        let i = (head + k) % capacity
        return (UnsafePointer(storage + i * slotSize), lengths[i])
    }
    func release(_ n: Int) { head = (head + n) % capacity; count -= n }
}

private func quoted(_ s: String) -> String { "'\(s)'" }
