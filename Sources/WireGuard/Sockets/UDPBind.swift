import LinuxSystem
import TunnelgateSettings

/// The device's UDP sockets: an IPv4 one and, where the namespace has IPv6, an IPv6 one (IPV6_V6ONLY)
/// on the same port.
///
/// Made here (`open`) for tests and tools that run the device in one privileged process: bound, 4 MB
/// buffers, marked; `wg set listen-port` and `fwmark` change them. Or handed over (`init(handedOver:)`): sockets the
/// engine made, bound to the tunnel's port and marked with its carrier identity, for a packet plane
/// that has no right to do either (no CAP_NET_ADMIN: no SO_MARK, no SO_RCVBUFFORCE, no port below
/// 1024). Those are checked and then used as they are: never bound or marked again, and the `wg set`
/// that would do it is refused.
///
/// The sockets are blocking, so a send waits for room in the socket buffer as the kernel's own queue
/// would; receives never wait (MSG_DONTWAIT).
public final class UDPBind: Bind {
    public private(set) var port: UInt16
    /// The sockets' mark. The engine marks its sockets after it handed them over (once the tunnel's slot
    /// is chosen), so for those it is read from the kernel each time.
    public var mark: UInt32 {
        guard isHandedOver, let socket = ipv4 ?? ipv6 else { return ownMark }
        return (try? socket.mark()) ?? 0
    }
    private var ownMark: UInt32
    /// Whether the sockets are the engine's (handed over): never bound or marked here.
    public let isHandedOver: Bool
    private var ipv4: FileDescriptor?
    private var ipv6: FileDescriptor?
    private let log: @Sendable (String) -> Void
    /// Whether UDP_GRO was asked for (and is asked for again on new sockets after `rebind`).
    private var receiveOffload = false
    static let bufferSize: Int32 = 4 << 20

    private init(ipv4: FileDescriptor?, ipv6: FileDescriptor?, port: UInt16, mark: UInt32, handedOver: Bool,
                 log: @escaping @Sendable (String) -> Void) {
        self.ipv4 = ipv4
        self.ipv6 = ipv6
        self.port = port
        ownMark = mark
        isHandedOver = handedOver
        self.log = log
    }

    deinit { close() }

    // MARK: Sockets made here

    /// Makes the sockets: IPv4 bound to `port` (0: one the kernel picks), IPv6 on the same port unless
    /// the namespace has no IPv6 (then logged), each with 4 MB buffers and marked with `mark` (0: none).
    /// A port in use is an error before anything else happens.
    public static func open(port: UInt16, mark: UInt32, log: @escaping @Sendable (String) -> Void) throws(BindError) -> UDPBind {
        let (ipv4, ipv6, actual) = try makeSockets(port: port, mark: mark, log: log)
        return UDPBind(ipv4: ipv4, ipv6: ipv6, port: actual, mark: mark, handedOver: false, log: log)
    }

    /// The sockets the engine makes for a packet plane, as `open` makes its own: IPv4 bound to `port`
    /// (0: any), IPv6 on the same port where the namespace has IPv6, 4 MB buffers, unmarked (the engine
    /// marks them once the tunnel's carrier identity is known). A port in use is an error now, before the
    /// kernel is touched.
    public static func carrierSockets(port: UInt16, log: @escaping @Sendable (String) -> Void)
        throws(BindError) -> (ipv4: FileDescriptor, ipv6: FileDescriptor?, port: UInt16) {
        let (ipv4, ipv6, actual) = try makeSockets(port: port, mark: 0, log: log)
        return (ipv4, ipv6, actual)
    }

    private static func makeSockets(port: UInt16, mark: UInt32, log: @Sendable (String) -> Void)
        throws(BindError) -> (FileDescriptor, FileDescriptor?, UInt16) {
        let portText = port == 0 ? "(any)" : String(port)
        let ipv4: FileDescriptor
        let actual: UInt16
        do throws(SystemCallError) {
            ipv4 = try FileDescriptor.socket(family: SocketFamily.ipv4, type: .datagram, nonBlocking: false)
        } catch { throw BindError(error.errno, "the IPv4 carrier socket: \(error)") }
        do throws(BindError) {
            do throws(SystemCallError) {
                try ipv4.bind(to: .ipv4([0, 0, 0, 0], port: port))
                guard case .ipv4(_, let bound)? = try ipv4.localAddress() else {
                    throw SystemCallError("getsockname", .invalidArgument)
                }
                actual = bound
            } catch { throw BindError(error.errno, "binding UDP port \(portText): \(error.errno)") }
            try prepare(ipv4, family: "IPv4", mark: mark, log: log)
        } catch {
            ipv4.close()
            throw error
        }
        // IPv6 is optional: a namespace may have it disabled (socket(AF_INET6) refused, or no :: to bind).
        let ipv6: FileDescriptor?
        do throws(SystemCallError) {
            ipv6 = try FileDescriptor.socket(family: SocketFamily.ipv6, type: .datagram, nonBlocking: false)
        } catch {
            log("IPv6 carrier unavailable (\(error)); IPv4 only")
            return (ipv4, nil, actual)
        }
        do throws(BindError) {
            do throws(SystemCallError) {
                // Without V6ONLY the IPv6 socket would take the IPv4 port too, and bind would fail.
                try ipv6!.setIPv6Only(true)
            } catch { throw BindError(error.errno, "the IPv6 carrier socket: \(error)") }
            do throws(SystemCallError) {
                try ipv6!.bind(to: .ipv6([UInt8](repeating: 0, count: 16), port: actual))
            } catch {
                log("IPv6 carrier unavailable on port \(actual) (\(error.errno)); IPv4 only")
                ipv6!.close()
                return (ipv4, nil, actual)
            }
            try prepare(ipv6!, family: "IPv6", mark: mark, log: log)
        } catch {
            ipv6!.close()
            ipv4.close()
            throw error
        }
        return (ipv4, ipv6, actual)
    }

    /// 4 MB socket buffers, then the mark. SO_RCVBUFFORCE and SO_SNDBUFFORCE need CAP_NET_ADMIN: without
    /// it (EPERM) the plain options are set, which net.core.rmem_max and wmem_max cap, and that is
    /// logged. Every other failure is an error.
    private static func prepare(_ socket: FileDescriptor, family: String, mark: UInt32,
                                log: @Sendable (String) -> Void) throws(BindError) {
        for buffer in [FileDescriptor.SocketBuffer.receive, .send] {
            do throws(SystemCallError) {
                do throws(SystemCallError) {
                    try socket.setBufferSize(buffer, bytes: bufferSize, force: true)
                } catch {
                    guard error.errno == .permissionDenied else { throw error }
                    try socket.setBufferSize(buffer, bytes: bufferSize, force: false)
                    log("the \(family) carrier socket's \(buffer == .receive ? "receive" : "send") buffer: \(error); "
                        + "the kernel's maximum (net.core.\(buffer == .receive ? "rmem" : "wmem")_max) applies")
                }
            } catch { throw BindError(error.errno, "the \(family) carrier socket: \(error)") }
        }
        if mark != 0 { try applyMark(mark, to: socket) }
    }

    private static func applyMark(_ mark: UInt32, to socket: FileDescriptor) throws(BindError) {
        do throws(SystemCallError) { try socket.setMark(mark) } catch {
            throw BindError(error.errno, "marking the carrier socket with fwmark 0x\(String(mark, radix: 16)): \(error)")
        }
    }

    // MARK: Sockets handed over

    /// Takes sockets the engine made: each must be a UDP socket of its family, bound, and all on one
    /// port with one mark (read back with getsockopt, so that what the device reports is what the
    /// kernel holds). They are set blocking, as the device's own are. The descriptors are the bind's
    /// from now on (closed by `close()`), even when they are refused.
    public convenience init(handedOver ipv4: FileDescriptor?, ipv6: FileDescriptor?, log: @escaping @Sendable (String) -> Void) throws(BindError) {
        func refuse(_ error: BindError) -> BindError {
            ipv4?.close()
            ipv6?.close()
            return error
        }
        guard ipv4 != nil || ipv6 != nil else {
            throw refuse(BindError(.invalidArgument, "no carrier socket was handed over"))
        }
        var ports: [(String, UInt16)] = []
        var marks: [(String, UInt32)] = []
        for (socket, name, family) in [(ipv4, "IPv4", SocketFamily.ipv4), (ipv6, "IPv6", SocketFamily.ipv6)] {
            guard let socket else { continue }
            let isUDP: Bool, bound: SocketAddress?, mark: UInt32
            do throws(SystemCallError) {
                let datagram = try socket.isDatagramSocket()
                let socketFamily = try socket.socketFamily()
                isUDP = datagram && socketFamily == family
                bound = isUDP ? try socket.localAddress() : nil
                mark = isUDP ? try socket.mark() : 0
                if isUDP { try socket.setNonBlocking(false) }
            } catch {
                throw refuse(BindError(error.errno, "the handed-over \(name) carrier socket: \(error)"))
            }
            guard isUDP else {
                throw refuse(BindError(.invalidArgument, "the handed-over \(name) carrier socket is not an \(name) UDP socket"))
            }
            let port: UInt16? = switch bound {
            case .ipv4(_, let p)?, .ipv6(_, let p, _)?: p
            default: nil
            }
            guard let port, port != 0 else {
                throw refuse(BindError(.invalidArgument, "the handed-over \(name) carrier socket is not bound to a port"))
            }
            ports.append((name, port))
            marks.append((name, mark))
        }
        if ports.count == 2, ports[0].1 != ports[1].1 {
            throw refuse(BindError(.invalidArgument, "the handed-over carrier sockets are bound to different ports "
                                   + "(IPv4 \(ports[0].1), IPv6 \(ports[1].1))"))
        }
        if marks.count == 2, marks[0].1 != marks[1].1 {
            throw refuse(BindError(.invalidArgument, "the handed-over carrier sockets carry different marks "
                                   + "(IPv4 0x\(String(marks[0].1, radix: 16)), IPv6 0x\(String(marks[1].1, radix: 16)))"))
        }
        self.init(ipv4: ipv4, ipv6: ipv6, port: ports[0].1, mark: marks[0].1, handedOver: true, log: log)
    }

    // MARK: Bind

    private func socket(_ family: IPFamily) -> FileDescriptor? { family == .ipv4 ? ipv4 : ipv6 }

    public func readiness(_ family: IPFamily) -> FileDescriptor? { socket(family) }

    public func receive(_ family: IPFamily, into batch: DatagramBatch) -> Int {
        guard let socket = socket(family) else { return 0 }
        return batch.receive(socket)
    }

    public func enableReceiveOffload() -> Bool {
        receiveOffload = true
        for (socket, name) in [(ipv4, "IPv4"), (ipv6, "IPv6")] {
            guard let socket else { continue }
            do throws(SystemCallError) { try socket.setUDPReceiveOffload(true) } catch {
                log("the \(name) carrier socket: \(error); one receive per datagram")
                receiveOffload = false
            }
        }
        return receiveOffload
    }

    public func send(_ batch: DatagramBatch, family: IPFamily) -> Int {
        guard let socket = socket(family) else {
            let failed = batch.count
            batch.removeAll()
            return failed
        }
        return batch.flush(socket)
    }

    public func send(_ datagram: UnsafeRawBufferPointer, to endpoint: Endpoint) -> Bool {
        guard let socket = socket(endpoint.address.family) else { return false }
        return withUnsafeTemporaryAllocation(byteCount: SocketAddress.storageSize, alignment: 8) { address in
            let length = endpoint.store(to: address.baseAddress!)
            let sent = try? socket.sendDatagram(datagram, to: address.baseAddress!, addressLength: length)
            return sent == datagram.count
        }
    }

    public func setMark(_ mark: UInt32) throws(BindError) {
        guard !isHandedOver else {
            throw BindError(.permissionDenied, "fwmark: the carrier sockets are the engine's")
        }
        for socket in [ipv4, ipv6].compactMap({ $0 }) { try Self.applyMark(mark, to: socket) }
        ownMark = mark
    }

    public func rebind(port: UInt16) throws(BindError) {
        guard !isHandedOver else {
            throw BindError(.permissionDenied, "listen-port: the carrier sockets are the engine's")
        }
        let (newIPv4, newIPv6, actual) = try Self.makeSockets(port: port, mark: mark, log: log)
        ipv4?.close()
        ipv6?.close()
        ipv4 = newIPv4
        ipv6 = newIPv6
        self.port = actual
        if receiveOffload { _ = enableReceiveOffload() }
    }

    public func close() {
        ipv4?.close(); ipv4 = nil
        ipv6?.close(); ipv6 = nil
    }
}
