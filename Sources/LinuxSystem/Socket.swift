import Glibc

/// A socket address: `struct sockaddr_in`, `sockaddr_in6` or `sockaddr_un`.
/// Addresses are in network order as bytes; ports in host order.
public enum SocketAddress: Hashable, Sendable, CustomStringConvertible {
    /// AF_INET: four address bytes and a port.
    case ipv4([UInt8], port: UInt16)
    /// AF_INET6: sixteen address bytes, a port and the scope (interface index) of a link-local address.
    case ipv6([UInt8], port: UInt16, scope: UInt32 = 0)
    /// AF_UNIX: a path in the file system.
    case unix(String)

    public var description: String {
        switch self {
        case .ipv4(let a, let port):
            return "\(a.map(String.init).joined(separator: ".")):\(port)"
        case .ipv6(let a, let port, let scope):
            var groups: [String] = []
            for i in stride(from: 0, to: a.count - 1, by: 2) {
                groups.append(String(UInt16(a[i]) << 8 | UInt16(a[i + 1]), radix: 16))
            }
            return "[\(groups.joined(separator: ":"))\(scope == 0 ? "" : "%\(scope)")]:\(port)"
        case .unix(let path):
            return path
        }
    }

    /// AF_INET, AF_INET6 or AF_UNIX.
    public var family: Int32 {
        switch self {
        case .ipv4: AF_INET
        case .ipv6: AF_INET6
        case .unix: AF_UNIX
        }
    }

    /// Calls `body` with this address as a `struct sockaddr`.
    func withSockaddr<R>(_ body: (UnsafePointer<sockaddr>, socklen_t) -> R) -> R {
        var storage = sockaddr_storage()
        let length: Int
        switch self {
        case .ipv4(let bytes, let port):
            precondition(bytes.count == 4, "an IPv4 address has 4 bytes")
            var sin = sockaddr_in()
            sin.sin_family = sa_family_t(AF_INET)
            sin.sin_port = port.bigEndian
            withUnsafeMutableBytes(of: &sin.sin_addr) { $0.copyBytes(from: bytes) }
            withUnsafeMutableBytes(of: &storage) { $0.storeBytes(of: sin, as: sockaddr_in.self) }
            length = MemoryLayout<sockaddr_in>.size
        case .ipv6(let bytes, let port, let scope):
            precondition(bytes.count == 16, "an IPv6 address has 16 bytes")
            var sin6 = sockaddr_in6()
            sin6.sin6_family = sa_family_t(AF_INET6)
            sin6.sin6_port = port.bigEndian
            sin6.sin6_scope_id = scope
            withUnsafeMutableBytes(of: &sin6.sin6_addr) { $0.copyBytes(from: bytes) }
            withUnsafeMutableBytes(of: &storage) { $0.storeBytes(of: sin6, as: sockaddr_in6.self) }
            length = MemoryLayout<sockaddr_in6>.size
        case .unix(let path):
            var sun = sockaddr_un()
            sun.sun_family = sa_family_t(AF_UNIX)
            let bytes = Array(path.utf8.prefix(MemoryLayout.size(ofValue: sun.sun_path) - 1))
            withUnsafeMutableBytes(of: &sun.sun_path) { $0.copyBytes(from: bytes) }
            withUnsafeMutableBytes(of: &storage) { $0.storeBytes(of: sun, as: sockaddr_un.self) }
            length = MemoryLayout<sockaddr_un>.offset(of: \.sun_path)! + bytes.count + 1
        }
        return withUnsafePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, socklen_t(length)) }
        }
    }

    /// The address in a `sockaddr_storage` the kernel filled; nil for families this type does not hold.
    init?(_ storage: sockaddr_storage) {
        var storage = storage
        switch Int32(storage.ss_family) {
        case AF_INET:
            let sin = withUnsafeBytes(of: &storage) { $0.load(as: sockaddr_in.self) }
            self = .ipv4(withUnsafeBytes(of: sin.sin_addr) { Array($0) }, port: UInt16(bigEndian: sin.sin_port))
        case AF_INET6:
            let sin6 = withUnsafeBytes(of: &storage) { $0.load(as: sockaddr_in6.self) }
            self = .ipv6(withUnsafeBytes(of: sin6.sin6_addr) { Array($0) }, port: UInt16(bigEndian: sin6.sin6_port),
                         scope: sin6.sin6_scope_id)
        default:
            return nil
        }
    }
}

extension FileDescriptor {
    /// SOCK_DGRAM or SOCK_STREAM, for `socket(family:type:)`.
    public enum SocketType: Sendable {
        case datagram
        case stream

        var rawValue: Int32 {
            switch self {
            case .datagram: Int32(SOCK_DGRAM.rawValue)
            case .stream: Int32(SOCK_STREAM.rawValue)
            }
        }
    }

    /// socket(2), close-on-exec, optionally non-blocking.
    public static func socket(family: Int32, type: SocketType, nonBlocking: Bool) throws(SystemCallError) -> FileDescriptor {
        let flags = Int32(SOCK_CLOEXEC.rawValue) | (nonBlocking ? Int32(SOCK_NONBLOCK.rawValue) : 0)
        return FileDescriptor(rawValue: try syscall("socket") { Glibc.socket(family, type.rawValue | flags, 0) })
    }

    /// bind(2).
    public func bind(to address: SocketAddress) throws(SystemCallError) {
        _ = try syscall("bind(\(address))") { address.withSockaddr { Glibc.bind(rawValue, $0, $1) } }
    }

    /// listen(2).
    public func listen(backlog: Int32) throws(SystemCallError) {
        _ = try syscall("listen") { Glibc.listen(rawValue, backlog) }
    }

    /// connect(2). False when a non-blocking connect is in progress (EINPROGRESS):
    /// the socket becomes writable when it is done, and `pendingError()` says how.
    @discardableResult
    public func connect(to address: SocketAddress) throws(SystemCallError) -> Bool {
        while true {
            if address.withSockaddr({ Glibc.connect(rawValue, $0, $1) }) == 0 { return true }
            let e = Errno.current
            if e == .interrupted { continue }
            if e == .inProgress { return false }
            precondition(e.rawValue != EBADF && e.rawValue != EFAULT, "connect(\(address)): \(e): a bug in Tunnelgate")
            throw SystemCallError("connect(\(address))", e)
        }
    }

    /// accept(2), then close-on-exec and non-blocking (accept4 is glibc-only
    /// and not imported); nil when no connection is waiting.
    public func accept() throws(SystemCallError) -> FileDescriptor? {
        let connection: FileDescriptor
        do throws(SystemCallError) {
            connection = FileDescriptor(rawValue: try syscall("accept") { Glibc.accept(rawValue, nil, nil) })
        } catch where error.errno == .wouldBlock {
            return nil
        }
        do throws(SystemCallError) {
            try connection.setCloseOnExec(true)
            try connection.setNonBlocking(true)
        } catch {
            connection.close()
            throw error
        }
        return connection
    }

    /// recvfrom(2) on a non-blocking socket: the byte count and the sender, or nil when nothing is waiting.
    public func receive(into buffer: UnsafeMutableRawBufferPointer) throws(SystemCallError) -> (count: Int, from: SocketAddress?)? {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        do throws(SystemCallError) {
            let n = try syscall("recvfrom") {
                withUnsafeMutablePointer(to: &storage) { p in
                    p.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                        recvfrom(rawValue, buffer.baseAddress, buffer.count, 0, $0, &length)
                    }
                }
            }
            return (n, length > 0 ? SocketAddress(storage) : nil)
        } catch where error.errno == .wouldBlock {
            return nil
        }
    }

    /// sendto(2) (`to: nil` for a connected socket); nil when a non-blocking socket's buffer is full.
    public func send(_ bytes: UnsafeRawBufferPointer, to address: SocketAddress? = nil) throws(SystemCallError) -> Int? {
        do throws(SystemCallError) {
            return try syscall("sendto\(address.map { "(\($0))" } ?? "")") {
                if let address {
                    return address.withSockaddr { Glibc.sendto(rawValue, bytes.baseAddress, bytes.count, Int32(MSG_NOSIGNAL), $0, $1) }
                }
                return Glibc.send(rawValue, bytes.baseAddress, bytes.count, Int32(MSG_NOSIGNAL))
            }
        } catch where error.errno == .wouldBlock {
            return nil
        }
    }

    /// setsockopt(2) with an `int` value.
    public func setSocketOption(level: Int32, name: Int32, value: Int32) throws(SystemCallError) {
        var v = value
        _ = try syscall("setsockopt(\(level), \(name))") {
            setsockopt(rawValue, level, name, &v, socklen_t(MemoryLayout<Int32>.size))
        }
    }

    /// SO_BINDTODEVICE: the socket only sends and receives through this interface.
    public func bindToDevice(_ interfaceName: String) throws(SystemCallError) {
        let name = Array(interfaceName.utf8)
        _ = try syscall("setsockopt(SO_BINDTODEVICE, \(interfaceName))") {
            setsockopt(rawValue, SOL_SOCKET, SO_BINDTODEVICE, name, socklen_t(name.count))
        }
    }

    /// SO_ERROR: the outcome of a non-blocking connect (nil when it succeeded).
    public func pendingError() throws(SystemCallError) -> Errno? {
        var value: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        _ = try syscall("getsockopt(SO_ERROR)") { getsockopt(rawValue, SOL_SOCKET, SO_ERROR, &value, &length) }
        return value == 0 ? nil : Errno(rawValue: value)
    }

    /// getsockname(2): the address the socket is bound to (its port, after binding port 0).
    public func localAddress() throws(SystemCallError) -> SocketAddress? {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        _ = try syscall("getsockname") {
            withUnsafeMutablePointer(to: &storage) { p in
                p.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(rawValue, $0, &length) }
            }
        }
        return SocketAddress(storage)
    }

    /// pipe(2), then close-on-exec and non-blocking on both ends: (read end, write end).
    public static func pipe() throws(SystemCallError) -> (read: FileDescriptor, write: FileDescriptor) {
        var fds: [Int32] = [-1, -1]
        _ = try syscall("pipe") { Glibc.pipe(&fds) }
        let ends = (read: FileDescriptor(rawValue: fds[0]), write: FileDescriptor(rawValue: fds[1]))
        do throws(SystemCallError) {
            for end in [ends.read, ends.write] {
                try end.setCloseOnExec(true)
                try end.setNonBlocking(true)
            }
        } catch {
            ends.read.close()
            ends.write.close()
            throw error
        }
        return ends
    }
}

/// poll(2) over a set of descriptors.
public struct PollSet {
    /// POLLIN, POLLOUT, and what the kernel reports without being asked (POLLERR, POLLHUP, POLLNVAL).
    public struct Events: OptionSet, Sendable {
        public let rawValue: Int16
        public init(rawValue: Int16) { self.rawValue = rawValue }
        public static let readable = Events(rawValue: Int16(POLLIN))   // POLLIN
        public static let writable = Events(rawValue: Int16(POLLOUT))  // POLLOUT
        public static let error = Events(rawValue: Int16(POLLERR))     // POLLERR
        public static let hangUp = Events(rawValue: Int16(POLLHUP))    // POLLHUP
        public static let invalid = Events(rawValue: Int16(POLLNVAL))  // POLLNVAL
    }

    var entries: [pollfd] = []

    public init() {}

    public var count: Int { entries.count }

    /// Adds a descriptor; returns its position, for `events(at:)`.
    @discardableResult
    public mutating func add(_ fd: FileDescriptor, _ events: Events) -> Int {
        entries.append(pollfd(fd: fd.rawValue, events: events.rawValue, revents: 0))
        return entries.count - 1
    }

    public mutating func removeAll() { entries.removeAll(keepingCapacity: true) }

    /// Changes what the descriptor at `index` is watched for (nothing: `[]`).
    public mutating func setEvents(_ events: Events, at index: Int) { entries[index].events = events.rawValue }

    /// What happened to the descriptor at `index` in the last `wait`.
    public func events(at index: Int) -> Events { Events(rawValue: entries[index].revents) }

    /// Waits up to `timeoutMilliseconds` (-1: no limit); the number of descriptors with events.
    public mutating func wait(timeoutMilliseconds: Int32) throws(SystemCallError) -> Int {
        let n = try syscall("poll") { Glibc.poll(&entries, nfds_t(entries.count), timeoutMilliseconds) }
        return Int(n)
    }
}

extension SocketAddress {
    /// if_nametoindex(3): the index of the interface named `name` in the
    /// calling thread's network namespace; nil when there is none.
    public static func interfaceIndex(named name: String) -> UInt32? {
        let index = if_nametoindex(name)
        return index == 0 ? nil : index
    }

    /// if_nametoindex(3) of an interface that must exist: its index, or the error (ENODEV when
    /// there is none).
    public static func index(ofInterface name: String) throws(SystemCallError) -> UInt32 {
        let index = if_nametoindex(name)
        guard index != 0 else { throw SystemCallError("if_nametoindex(\(name))", .current) }
        return index
    }
}
