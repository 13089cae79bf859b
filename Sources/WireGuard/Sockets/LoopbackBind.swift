import LinuxSystem
import Synchronization
import TunnelgateSettings

/// An in-memory network for WireGuard devices: each `LoopbackBind` on it has an IPv4 and/or an IPv6
/// address and a port, and a datagram sent to one of those endpoints is received there with the
/// sender's address of that family as its source. No socket, no root: the readiness of each bind is a
/// pipe. A test can record what was sent, and inject datagrams from any source (a replay, a roaming
/// peer, an attacker).
///
/// Each bind holds at most `capacity` datagrams per family; more are dropped and counted, as a
/// socket's full receive buffer drops them. A test double: it copies each datagram and takes a lock.
public final class LoopbackNetwork: Sendable {
    /// One datagram as the network carried it.
    public struct Datagram: Sendable {
        public var from: Endpoint
        public var to: Endpoint
        public var bytes: [UInt8]
    }

    struct State {
        var queues: [Endpoint: LoopbackBind.Queue] = [:]
        var recording = false
        var recorded: [Datagram] = []
        var undeliverable = 0
        var held = false
    }
    let state = Mutex(State())
    let capacity: Int

    public init(capacity: Int = 4096) {
        self.capacity = capacity
    }

    /// A bind at `ipv4` and/or `ipv6`, on `port`. `handedOver` makes it refuse `setMark` and `rebind`
    /// as sockets the engine made are refused. Nil when another bind is at one of those endpoints.
    public func bind(ipv4: IPv4Address?, ipv6: IPv6Address?, port: UInt16, mark: UInt32 = 0,
                     handedOver: Bool = false) throws(SystemCallError) -> LoopbackBind? {
        let bind = try LoopbackBind(network: self, ipv4: ipv4, ipv6: ipv6, port: port, mark: mark, handedOver: handedOver)
        return bind.register(port: port) ? bind : nil
    }

    /// Records every datagram a bind sends from now on (`recorded`).
    public func startRecording() { state.withLock { $0.recording = true } }

    /// What was sent while recording, in order.
    public var recorded: [Datagram] { state.withLock { $0.recorded } }

    /// Holds delivery: from now on datagrams queue up at their binds unseen (no readiness), until
    /// `release`, when every bind with some waiting becomes ready at once. So a test can make a
    /// receiver find a batch where it would otherwise keep up one datagram at a time.
    public func hold() { state.withLock { $0.held = true } }

    /// Ends `hold`: every bind with datagrams waiting becomes ready.
    public func release() {
        let queues = state.withLock { s in
            s.held = false
            return Array(s.queues.values)
        }
        for queue in queues { queue.signalIfWaiting() }
    }

    /// Datagrams sent to an endpoint where no bind is.
    public var undeliverable: Int { state.withLock { $0.undeliverable } }

    /// Delivers `bytes` to whoever is at `to` as if `from` had sent it (not recorded): false when
    /// nobody is there, or its queue is full.
    @discardableResult
    public func inject(_ bytes: [UInt8], from: Endpoint, to: Endpoint) -> Bool {
        deliver(bytes, from: from, to: to, record: false)
    }

    /// What a bind sends: recorded while recording.
    func deliver(_ bytes: [UInt8], from: Endpoint, to: Endpoint, record: Bool) -> Bool {
        let target: (queue: LoopbackBind.Queue, held: Bool)? = state.withLock { s in
            if record && s.recording { s.recorded.append(Datagram(from: from, to: to, bytes: bytes)) }
            guard let queue = s.queues[to] else {
                s.undeliverable += 1
                return nil
            }
            return (queue, s.held)
        }
        guard let target else { return false }
        return target.queue.put(bytes, from: from, signalling: !target.held)
    }
}

/// A `Bind` on a `LoopbackNetwork` (a test double; see there).
public final class LoopbackBind: Bind {
    let network: LoopbackNetwork
    public let ipv4: IPv4Address?
    public let ipv6: IPv6Address?
    public private(set) var port: UInt16
    public private(set) var mark: UInt32
    public let isHandedOver: Bool
    let queue4: Queue
    let queue6: Queue
    private var closed = false
    /// Whether `enableReceiveOffload` turns merging on: this bind then hands over runs of one sender's
    /// datagrams of one size (the last may be shorter) as one, as UDP_GRO does (for tests of that path).
    public var offersReceiveOffload = false
    private var merges = false

    init(network: LoopbackNetwork, ipv4: IPv4Address?, ipv6: IPv6Address?, port: UInt16, mark: UInt32,
         handedOver: Bool) throws(SystemCallError) {
        precondition(ipv4 != nil || ipv6 != nil, "a bind has an address")
        self.network = network
        self.ipv4 = ipv4
        self.ipv6 = ipv6
        self.port = port
        self.mark = mark
        isHandedOver = handedOver
        queue4 = try Queue(capacity: network.capacity)
        queue6 = try Queue(capacity: network.capacity)
    }

    deinit { close() }

    /// The endpoints of this bind on `port`.
    func endpoints(port: UInt16) -> [(Endpoint, Queue)] {
        var out: [(Endpoint, Queue)] = []
        if let ipv4 { out.append((Endpoint(address: .v4(ipv4), port: port), queue4)) }
        if let ipv6 { out.append((Endpoint(address: .v6(ipv6), port: port), queue6)) }
        return out
    }

    /// Takes the endpoints on `port` (and gives up those on the old port): false when one is taken.
    func register(port newPort: UInt16, replacing old: UInt16? = nil) -> Bool {
        network.state.withLock { s in
            for (endpoint, _) in endpoints(port: newPort) where s.queues[endpoint] != nil { return false }
            if let old { for (endpoint, _) in endpoints(port: old) { s.queues[endpoint] = nil } }
            for (endpoint, queue) in endpoints(port: newPort) { s.queues[endpoint] = queue }
            return true
        }
    }

    /// This bind's endpoint of `family`, nil when it has no address of it.
    public func endpoint(_ family: IPFamily) -> Endpoint? {
        switch family {
        case .ipv4: ipv4.map { Endpoint(address: .v4($0), port: port) }
        case .ipv6: ipv6.map { Endpoint(address: .v6($0), port: port) }
        }
    }

    public func readiness(_ family: IPFamily) -> FileDescriptor? {
        endpoint(family) == nil ? nil : (family == .ipv4 ? queue4 : queue6).readable
    }

    public func receive(_ family: IPFamily, into batch: DatagramBatch) -> Int {
        batch.removeAll()
        guard endpoint(family) != nil else { return 0 }
        // A run being merged: its source, segment size, bytes so far and segments so far.
        var run: (source: Endpoint, size: Int, length: Int, segments: Int)?
        func endRun() {
            guard let r = run else { return }
            batch.commitReceived(length: r.length, segmentSize: r.segments > 1 ? r.size : 0, from: r.source)
            run = nil
        }
        (family == .ipv4 ? queue4 : queue6).take(upTo: batch.capacity) { bytes, source in
            if let r = run, r.source == source, bytes.count <= r.size, r.length % r.size == 0,
               r.length + bytes.count <= 65_000, r.segments < 64 {
                let slot = batch.nextSlot
                bytes.withUnsafeBytes { (slot.baseAddress! + r.length).copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
                run = (source, r.size, r.length + bytes.count, r.segments + 1)
                return
            }
            endRun()
            let slot = batch.nextSlot
            let length = min(bytes.count, slot.count)  // truncated as recvmmsg truncates
            bytes.withUnsafeBytes { slot.baseAddress!.copyMemory(from: $0.baseAddress!, byteCount: length) }
            if merges && length > 0 {
                run = (source, length, length, 1)
            } else {
                batch.commit(length: length, to: source)
            }
        }
        endRun()
        return batch.count
    }

    public func enableReceiveOffload() -> Bool {
        merges = offersReceiveOffload
        return merges
    }

    public func send(_ batch: DatagramBatch, family: IPFamily) -> Int {
        var failed = 0
        for i in 0..<batch.count {
            let (bytes, destination) = batch.datagram(i)
            if let destination, send(UnsafeRawBufferPointer(bytes), to: destination) { continue }
            failed += 1
        }
        batch.removeAll()
        return failed
    }

    public func send(_ datagram: UnsafeRawBufferPointer, to endpoint: Endpoint) -> Bool {
        guard !closed, let source = self.endpoint(endpoint.address.family) else { return false }
        // A datagram the network took is sent, delivered or not (UDP).
        _ = network.deliver(Array(datagram), from: source, to: endpoint, record: true)
        return true
    }

    public func setMark(_ mark: UInt32) throws(BindError) {
        guard !isHandedOver else { throw BindError(.permissionDenied, "fwmark: the carrier sockets are the engine's") }
        self.mark = mark
    }

    public func rebind(port newPort: UInt16) throws(BindError) {
        guard !isHandedOver else { throw BindError(.permissionDenied, "listen-port: the carrier sockets are the engine's") }
        guard register(port: newPort, replacing: port) else {
            throw BindError(.addressInUse, "binding UDP port \(newPort): \(Errno.addressInUse)")
        }
        port = newPort
    }

    public func close() {
        guard !closed else { return }
        closed = true
        network.state.withLock { s in
            for (endpoint, queue) in endpoints(port: port) where s.queues[endpoint] === queue { s.queues[endpoint] = nil }
        }
    }

    /// One family's received datagrams, and a pipe that holds one byte exactly while there are any.
    final class Queue: Sendable {
        /// The datagrams, the first not taken, and whether the pipe holds its byte (one while any wait,
        /// except those put while the network was held).
        let state = Mutex<(datagrams: [(bytes: [UInt8], source: Endpoint)], head: Int, signalled: Bool)>(([], 0, false))
        let capacity: Int
        let drops = Atomic<Int>(0)
        let readable: FileDescriptor
        let signal: FileDescriptor

        init(capacity: Int) throws(SystemCallError) {
            self.capacity = capacity
            (readable, signal) = try FileDescriptor.pipe()
        }

        deinit {
            readable.close()
            signal.close()
        }

        func put(_ bytes: [UInt8], from source: Endpoint, signalling: Bool = true) -> Bool {
            state.withLock { s in
                let waiting = s.datagrams.count - s.head
                guard waiting < capacity else {
                    drops.add(1, ordering: .relaxed)
                    return false
                }
                s.datagrams.append((bytes, source))
                if signalling && !s.signalled { Self.raise(&s.signalled, on: signal) }
                return true
            }
        }

        /// Makes the bind ready when datagrams wait that it has not been told of.
        func signalIfWaiting() {
            state.withLock { s in
                if s.head < s.datagrams.count && !s.signalled { Self.raise(&s.signalled, on: signal) }
            }
        }

        private static func raise(_ signalled: inout Bool, on signal: FileDescriptor) {
            var one: UInt8 = 1
            _ = withUnsafeBytes(of: &one) { try? signal.write($0) }
            signalled = true
        }

        func take(upTo limit: Int, _ body: ([UInt8], Endpoint) -> Void) {
            state.withLock { s in
                var taken = 0
                while taken < limit, s.head < s.datagrams.count {
                    let (bytes, source) = s.datagrams[s.head]
                    s.datagrams[s.head].bytes = []
                    s.head += 1
                    taken += 1
                    body(bytes, source)
                }
                if s.head == s.datagrams.count {
                    s.datagrams.removeAll(keepingCapacity: true)
                    s.head = 0
                    if s.signalled {
                        var byte: UInt8 = 0
                        _ = withUnsafeMutableBytes(of: &byte) { try? readable.read(into: $0) }
                        s.signalled = false
                    }
                }
            }
        }
    }
}
