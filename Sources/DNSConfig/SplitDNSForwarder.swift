import LinuxSystem
import Synchronization

/// A small DNS forwarder for split DNS, which resolv.conf cannot express:
/// it listens on one address (UDP and TCP, port 53 by default), reads each
/// query's name, and relays the query to the tunnel's servers when the name
/// is in a match domain, to the fallback servers (those resolv.conf listed
/// before) otherwise. The answer goes back to the client with the client's
/// query id.
///
/// Checked: an upstream answer is relayed only when it comes from the
/// server's address and port to the address and random port the query left
/// from, carries the query's random id, and asks the query's question (name
/// ignoring ASCII case, type, class), with every section well formed;
/// anything else is dropped, counted by reason, and the wait for the real
/// answer goes on. A truncated UDP answer is asked again over TCP of the
/// same server; an answer larger than its UDP client takes is truncated as a
/// server would (docs/dns.md).
///
/// Bounded: one thread runs everything (poll(2), non-blocking sockets, no
/// thread per query); at most `maximumInFlight` queries wait for upstream
/// answers (more are dropped and counted); each upstream try waits
/// `attemptTimeout` seconds before the next server is tried; at most
/// `maximumConnections` TCP clients, each closed after
/// `connectionIdleTimeout` seconds of silence. Malformed queries are
/// dropped and counted, never answered.
///
/// Lifecycle: idle → (bound) → running → stopped. `start()` binds (if the
/// configurator has not already) and starts the thread; `stop()` ends it and
/// closes every socket. Both must be called from a thread in the network
/// namespace the forwarder serves: its sockets are created there.
public final class SplitDNSForwarder: Sendable {
    public struct Configuration: Hashable, Sendable {
        /// 127.0.0.153:53. Any 127/8 address is local as soon as `lo` is up.
        public static let defaultListenAddress = SocketAddress.ipv4([127, 0, 0, 153], port: 53)

        public var listenAddress: SocketAddress
        /// Names in these domains go to `tunnelServers`.
        public var policy: SplitDNSPolicy
        /// The tunnel's servers (NEDNSSettings.servers), port 53.
        public var tunnelServers: [SocketAddress]
        /// When set, sockets to the tunnel's servers are bound to this
        /// interface (SO_BINDTODEVICE): those queries leave through the
        /// tunnel whatever the routing tables say.
        public var tunnelInterface: String?
        /// Every other name goes here: the servers of the resolv.conf that was replaced.
        public var fallbackServers: [SocketAddress]
        /// Seconds to wait for one server before trying the next; after the last, the query is dropped.
        public var attemptTimeout: Double
        /// Queries waiting for an upstream answer at once; more are dropped.
        public var maximumInFlight: Int
        /// TCP clients at once; more wait in the listen backlog.
        public var maximumConnections: Int
        /// Queries of one TCP client in flight at once; its later queries wait unread.
        public var maximumInFlightPerConnection: Int
        /// A TCP client with nothing in flight is closed after this many silent seconds.
        public var connectionIdleTimeout: Double

        public init(listenAddress: SocketAddress = Configuration.defaultListenAddress, policy: SplitDNSPolicy,
                    tunnelServers: [SocketAddress], tunnelInterface: String? = nil, fallbackServers: [SocketAddress],
                    attemptTimeout: Double = 2, maximumInFlight: Int = 256, maximumConnections: Int = 64,
                    maximumInFlightPerConnection: Int = 16, connectionIdleTimeout: Double = 10) {
            self.listenAddress = listenAddress
            self.policy = policy
            self.tunnelServers = tunnelServers
            self.tunnelInterface = tunnelInterface
            self.fallbackServers = fallbackServers
            self.attemptTimeout = attemptTimeout
            self.maximumInFlight = maximumInFlight
            self.maximumConnections = maximumConnections
            self.maximumInFlightPerConnection = maximumInFlightPerConnection
            self.connectionIdleTimeout = connectionIdleTimeout
        }
    }

    /// Counters since `start()`.
    public struct Statistics: Hashable, Sendable {
        /// Messages received from clients (UDP datagrams and TCP frames).
        public var received: Int
        public var forwardedToTunnel: Int
        public var forwardedToFallback: Int
        /// Answers relayed to clients.
        public var answered: Int
        /// Messages that are not a query the forwarder relays (`DNSMessageError`).
        public var malformed: Int
        /// Queries dropped because `maximumInFlight` were already waiting.
        public var overloaded: Int
        /// Queries dropped after every server had its `attemptTimeout`.
        public var timedOut: Int
        /// Upstream tries that failed at once (refused, unreachable, a connection closed early).
        public var upstreamErrors: Int
        /// Upstream datagrams dropped because they came from another address
        /// or port than the query went to (`DNSAnswerRejection`; none of
        /// these ends the wait for the real answer).
        public var answersFromWrongSource: Int
        /// Upstream answers dropped because their id is not the query's.
        public var answersWithWrongID: Int
        /// Upstream answers dropped because their question is not the query's (name, type, class; QDCOUNT 1).
        public var answersWithWrongQuestion: Int
        /// Upstream answers dropped as malformed: QR = 0, another opcode, a section that does not parse.
        public var malformedAnswers: Int
        /// Queries asked again over TCP, of the same server, after a truncated (TC = 1) UDP answer.
        public var retriedOverTCP: Int
        /// Answers larger than their UDP client takes (its EDNS payload size, else 512), sent to it truncated.
        public var truncatedForClient: Int
    }

    /// The sockets clients talk to.
    struct Listeners: Sendable {
        var datagram: FileDescriptor
        var stream: FileDescriptor
        var address: SocketAddress

        func close() {
            datagram.close()
            stream.close()
        }
    }

    private enum State: Sendable {
        case idle
        case bound(Listeners)
        case running(SystemThread, wake: FileDescriptor, address: SocketAddress)
        case stopped

        var name: String {
            switch self {
            case .idle: "idle"
            case .bound: "bound"
            case .running: "running"
            case .stopped: "stopped"
            }
        }
    }

    public let configuration: Configuration
    private let state = Mutex<State>(.idle)
    private let counters = ForwarderCounters()

    public init(configuration: Configuration) {
        self.configuration = configuration
    }

    deinit {
        switch state.withLock({ $0 }) {
        case .bound(let listeners):
            listeners.close()
        case .running(let thread, let wake, _):
            Self.signal(wake)
            thread.join()
            wake.close()
        case .idle, .stopped:
            break
        }
    }

    /// Binds the listening sockets without serving yet: queries that arrive
    /// wait in the sockets' queues until `start()`. The configurator does
    /// this before it changes any file, so a busy address fails early.
    func bind() throws(DNSConfigError) {
        try state.withLock { (state: inout State) throws(DNSConfigError) in
            guard case .idle = state else { throw .invalidState(operation: "bind", state: state.name) }
            state = .bound(try Self.listen(on: configuration.listenAddress))
        }
    }

    /// Starts serving on the forwarder's own thread. Binds first when `bind` was not called.
    public func start() throws(DNSConfigError) {
        try state.withLock { (state: inout State) throws(DNSConfigError) in
            let listeners: Listeners
            switch state {
            case .idle: listeners = try Self.listen(on: configuration.listenAddress)
            case .bound(let bound): listeners = bound
            case .running, .stopped: throw .invalidState(operation: "start", state: state.name)
            }
            let configuration = self.configuration, counters = self.counters
            do throws(SystemCallError) {
                let wake = try FileDescriptor.pipe()
                do throws(SystemCallError) {
                    let thread = try SystemThread.spawn {
                        let loop = ForwarderLoop(configuration: configuration, listeners: listeners,
                                                 wake: wake.read, counters: counters)
                        if let error = loop.run() { counters.failure.withLock { $0 = error.description } }
                    }
                    state = .running(thread, wake: wake.write, address: listeners.address)
                } catch {
                    wake.read.close()
                    wake.write.close()
                    throw error
                }
            } catch {
                listeners.close()
                state = .stopped
                throw .system(error)
            }
        }
    }

    /// Stops serving: the thread ends and every socket is closed. Queries in flight are dropped.
    public func stop() throws(DNSConfigError) {
        try state.withLock { (state: inout State) throws(DNSConfigError) in
            switch state {
            case .running(let thread, let wake, _):
                Self.signal(wake)
                thread.join()
                wake.close()
                state = .stopped
            case .bound(let listeners):
                listeners.close()
                state = .stopped
            case .idle, .stopped:
                throw .invalidState(operation: "stop", state: state.name)
            }
        }
    }

    public var isRunning: Bool {
        state.withLock { if case .running = $0 { true } else { false } }
    }

    /// The address clients reach (the configured one; with port 0, the port the kernel chose).
    public var listenAddress: SocketAddress {
        state.withLock {
            switch $0 {
            case .bound(let listeners): listeners.address
            case .running(_, _, let address): address
            case .idle, .stopped: configuration.listenAddress
            }
        }
    }

    public var statistics: Statistics { counters.snapshot }

    /// Why the forwarder's thread ended on its own, if it did (a failed poll(2)).
    public var failureReason: String? { counters.failure.withLock { $0 } }

    private static func signal(_ wake: FileDescriptor) {
        let byte: [UInt8] = [1]
        _ = byte.withUnsafeBytes { try? wake.write($0) }
    }

    /// A UDP socket and a listening TCP socket on `address` (with port 0,
    /// both on the port the kernel chose for the UDP one).
    private static func listen(on address: SocketAddress) throws(DNSConfigError) -> Listeners {
        var opened: [FileDescriptor] = []
        do throws(SystemCallError) {
            let datagram = try FileDescriptor.socket(family: address.family, type: .datagram, nonBlocking: true)
            opened.append(datagram)
            try datagram.bind(to: address)
            let bound = try datagram.localAddress() ?? address
            let stream = try FileDescriptor.socket(family: address.family, type: .stream, nonBlocking: true)
            opened.append(stream)
            try stream.setReuseAddress(true)
            try stream.bind(to: bound)
            try stream.listen(backlog: 64)
            return Listeners(datagram: datagram, stream: stream, address: bound)
        } catch {
            opened.forEach { $0.close() }
            throw .forwarderListen(address: address, error)
        }
    }
}
