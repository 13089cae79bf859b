import LinuxSystem
import Synchronization
import TunnelgateSettings

/// Handshake messages' admission, on a thread of its own at a lower priority than the device thread
/// (as wireguard-go and the kernel queue handshakes apart from data): what a flood of them costs is
/// taken from the CPU the packets leave, not from the packets.
///
/// The device thread only classifies a datagram and copies an initiation or response into `inbound`
/// (a ring of 1,024; when full, the message is dropped and counted: nothing waits). This thread checks
/// MAC1; counts the load (more than 32 handshake messages in 100 ms puts the device under load for a
/// second); under load wants a valid MAC2 for the source (else sends a cookie reply) and a token of the
/// source's bucket (`HandshakeRateLimiter`). What passes goes back to the device thread through
/// `admitted` (a ring of 128, with a wake-up), which does the Diffie-Hellman and owns every peer's
/// state. Both rings have one producer and one consumer: no lock per message. The cookie secret is
/// replaced under a mutex when the private key changes; the bind's sockets are replaced (a `wg set
/// listen-port`) under `sendLock`, which the cookie replies sent from here hold.
final class HandshakeGate: @unchecked Sendable {
    /// A single-producer, single-consumer ring of handshake messages and their sources.
    final class Ring: @unchecked Sendable {
        static let slotSize = 256  // an initiation is 148 bytes, a response 92
        let capacity: Int
        private let bytes: UnsafeMutableRawPointer
        private let lengths: UnsafeMutablePointer<Int>
        private let sources: UnsafeMutablePointer<Endpoint>
        private let head = Atomic<Int>(0)  // next to take (the consumer's)
        private let tail = Atomic<Int>(0)  // next to fill (the producer's)

        init(capacity: Int) {
            self.capacity = capacity
            bytes = .allocate(byteCount: capacity * Self.slotSize, alignment: 16)
            lengths = .allocate(capacity: capacity)
            lengths.initialize(repeating: 0, count: capacity)
            sources = .allocate(capacity: capacity)
            sources.initialize(repeating: Endpoint(address: .v4(IPv4Address(0)), port: 0), count: capacity)
        }

        deinit {
            bytes.deallocate()
            lengths.deallocate()
            sources.deinitialize(count: capacity)
            sources.deallocate()
        }

        var isEmpty: Bool { head.load(ordering: .acquiring) == tail.load(ordering: .acquiring) }

        /// Copies `message` in; false when the ring is full (or the message too long for a slot).
        func push(_ message: UnsafeRawBufferPointer, from source: Endpoint) -> Bool {
            let t = tail.load(ordering: .relaxed)
            guard message.count <= Self.slotSize, t - head.load(ordering: .acquiring) < capacity else { return false }
            let i = t % capacity
            (bytes + i * Self.slotSize).copyMemory(from: message.baseAddress!, byteCount: message.count)
            lengths[i] = message.count
            sources[i] = source
            tail.store(t + 1, ordering: .releasing)
            return true
        }

        /// Hands the oldest message to `body` (valid only during it) and frees its slot; false when empty.
        func pop(_ body: (UnsafeRawBufferPointer, Endpoint) -> Void) -> Bool {
            let h = head.load(ordering: .relaxed)
            guard h != tail.load(ordering: .acquiring) else { return false }
            let i = h % capacity
            body(UnsafeRawBufferPointer(start: bytes + i * Self.slotSize, count: lengths[i]), sources[i])
            head.store(h + 1, ordering: .releasing)
            return true
        }
    }

    let inbound = Ring(capacity: 1024)
    let admitted = Ring(capacity: 128)

    let cookieRepliesSent = Atomic<UInt64>(0)
    let dropsMAC = Atomic<UInt64>(0)
    let dropsSourceRate = Atomic<UInt64>(0)
    /// Handshake messages dropped because a ring was full (the flood outran this thread).
    let dropsQueueFull = Atomic<UInt64>(0)

    /// The responder's public key and cookie secret; replaced when the private key changes.
    private let keys: Mutex<(publicKey: WireGuardKey, cookies: CookieGenerator)>
    /// Held by every send from this thread and by the device thread while it replaces the sockets.
    let sendLock = Mutex<Void>(())
    private let bind: any Bind
    /// Wakes the device thread (an admitted message is waiting).
    private let wakeDevice: @Sendable () -> Void
    private let log: @Sendable (String) -> Void

    // This thread's own: the load window and the per-source buckets.
    private var loadWindowStart = 0.0
    private var loadWindowCount = 0
    private var underLoadUntil = -Double.infinity
    private var limiter = HandshakeRateLimiter()

    private let wake: FileDescriptor, wakeWriter: FileDescriptor
    /// Set while this thread waits in poll: only then does a push need to write a wake-up byte.
    private let sleeping = Atomic<Bool>(false)
    private let stopping = Atomic<Bool>(false)
    private var thread: SystemThread?

    init(publicKey: WireGuardKey, cookies: CookieGenerator, bind: any Bind, log: @escaping @Sendable (String) -> Void,
         wakeDevice: @escaping @Sendable () -> Void) throws(SystemCallError) {
        keys = Mutex((publicKey, cookies))
        self.bind = bind
        self.log = log
        self.wakeDevice = wakeDevice
        (wake, wakeWriter) = try FileDescriptor.pipe()
    }

    deinit {
        wake.close()
        wakeWriter.close()
    }

    func start() throws(SystemCallError) {
        thread = try SystemThread.spawn { [self] in run() }
    }

    /// Ends the thread; messages still queued are dropped. Once.
    func stop() {
        guard let thread else { return }
        stopping.store(true, ordering: .releasing)
        signal()
        thread.join()
        self.thread = nil
    }

    /// The private key changed: the cookie secret goes with the public key.
    func rekey(publicKey: WireGuardKey, now: Double) {
        keys.withLock { $0 = (publicKey, CookieGenerator(localPublic: publicKey, now: now)) }
    }

    /// On the device thread: queues a handshake message for admission; a full ring drops it.
    func submit(_ message: UnsafeRawBufferPointer, from source: Endpoint) {
        guard inbound.push(message, from: source) else {
            dropsQueueFull.add(1, ordering: .relaxed)
            return
        }
        if sleeping.exchange(false, ordering: .acquiringAndReleasing) { signal() }
    }

    private func signal() {
        var one: UInt8 = 1
        _ = withUnsafeBytes(of: &one) { try? wakeWriter.write($0) }
    }

    private func run() {
        if let error = ProcessControl.lowerThisThreadsPriority(by: 10) { log("handshake thread: \(error)") }
        var drain = [UInt8](repeating: 0, count: 64)
        while !stopping.load(ordering: .acquiring) {
            var handled = 0
            while inbound.pop({ message, source in admit(message, from: source, now: ProcessControl.monotonicSeconds()) }) {
                handled += 1
                if handled % 64 == 0, stopping.load(ordering: .acquiring) { return }
            }
            // Announce the wait first, then look once more: a push in between either sees the flag or
            // is seen here.
            sleeping.store(true, ordering: .releasing)
            if !inbound.isEmpty {
                sleeping.store(false, ordering: .releasing)
                continue
            }
            _ = try? Poll.readable(wake, timeoutMilliseconds: 1000)
            sleeping.store(false, ordering: .releasing)
            _ = drain.withUnsafeMutableBytes { try? wake.read(into: $0) }
        }
    }

    private func underLoad(now: Double) -> Bool {
        if now - loadWindowStart > 0.1 {
            loadWindowStart = now
            loadWindowCount = 0
        }
        loadWindowCount += 1
        if loadWindowCount > WireGuardDevice.loadLimitPerWindow { underLoadUntil = now + 1 }
        return now < underLoadUntil
    }

    /// MAC1, then under load MAC2 (else a cookie reply) and the source's bucket; what passes goes to
    /// the device thread.
    private func admit(_ message: UnsafeRawBufferPointer, from source: Endpoint, now: Double) {
        let verdict: Bool? = keys.withLock { k -> Bool? in
            guard Handshake.verifyMAC1(message, localPublic: k.publicKey) else { return nil }
            guard underLoad(now: now) else { return true }
            let input = source.cookieInput
            if k.cookies.verifyMAC2(message, endpoint: input, now: now) { return true }
            guard let reply = k.cookies.createReply(to: message, endpoint: input, now: now) else { return false }
            let sent = sendLock.withLock { _ in reply.withUnsafeBytes { bind.send($0, to: source) } }
            if sent { cookieRepliesSent.add(1, ordering: .relaxed) }
            return false
        }
        switch verdict {
        case nil:
            dropsMAC.add(1, ordering: .relaxed)
        case false?:
            break
        case true?:
            // A valid MAC2 proves the source can receive at its address, not that it may make the device
            // do Diffie-Hellman without end: a token bucket per source address (only under load).
            if now < underLoadUntil, !limiter.allow(source.address, now: now) {
                dropsSourceRate.add(1, ordering: .relaxed)
                return
            }
            guard admitted.push(message, from: source) else {
                dropsQueueFull.add(1, ordering: .relaxed)
                return
            }
            wakeDevice()
        }
    }
}
