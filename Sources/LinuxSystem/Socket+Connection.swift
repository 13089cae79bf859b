import Glibc

extension FileDescriptor {
    /// getpeername(2): the address a connected socket is connected to.
    public func peerAddress() throws(SystemCallError) -> SocketAddress? {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        _ = try syscall("getpeername") {
            withUnsafeMutablePointer(to: &storage) { p in
                p.withMemoryRebound(to: sockaddr.self, capacity: 1) { getpeername(rawValue, $0, &length) }
            }
        }
        return SocketAddress(storage)
    }

    /// shutdown(2) with SHUT_WR: the peer reads the end of the stream; reading goes on.
    /// Equivalent to a TCP FIN after what was written.
    public func shutdownWriting() throws(SystemCallError) {
        _ = try syscall("shutdown(SHUT_WR)") { Glibc.shutdown(rawValue, Int32(SHUT_WR)) }
    }

    /// shutdown(2) with SHUT_RDWR: wakes a thread polling the socket, which then sees the end.
    public func shutdownBoth() throws(SystemCallError) {
        _ = try syscall("shutdown(SHUT_RDWR)") { Glibc.shutdown(rawValue, Int32(SHUT_RDWR)) }
    }
}

extension SocketAddress {
    /// The address's numeric text without the port: `198.18.0.1`, `2001:db8::1` (inet_ntop), with
    /// `%SCOPE` for a scoped IPv6 address; nil for a Unix socket's path.
    public var numericHost: String? {
        var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN) + 1)
        switch self {
        case .ipv4(let bytes, _):
            guard bytes.count == 4, bytes.withUnsafeBytes({ inet_ntop(AF_INET, $0.baseAddress, &buffer, socklen_t(buffer.count)) }) != nil else { return nil }
            return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        case .ipv6(let bytes, _, let scope):
            guard bytes.count == 16, bytes.withUnsafeBytes({ inet_ntop(AF_INET6, $0.baseAddress, &buffer, socklen_t(buffer.count)) }) != nil else { return nil }
            let text = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            return scope == 0 ? text : "\(text)%\(scope)"
        case .unix:
            return nil
        }
    }

    /// The port of an IPv4 or IPv6 address; nil for a Unix socket's path.
    public var port: UInt16? {
        switch self {
        case .ipv4(_, let port), .ipv6(_, let port, _): port
        case .unix: nil
        }
    }

    /// The same address with another port (a Unix socket's path unchanged).
    public func withPort(_ port: UInt16) -> SocketAddress {
        switch self {
        case .ipv4(let a, _): .ipv4(a, port: port)
        case .ipv6(let a, _, let scope): .ipv6(a, port: port, scope: scope)
        case .unix: self
        }
    }

    /// inet_pton(3) of an IPv4 or IPv6 address literal (`198.18.0.1`, `2001:db8::1`), with `port`;
    /// nil when `text` is not one.
    public static func numeric(_ text: String, port: UInt16) -> SocketAddress? {
        var four = [UInt8](repeating: 0, count: 4)
        if inet_pton(AF_INET, text, &four) == 1 { return .ipv4(four, port: port) }
        var sixteen = [UInt8](repeating: 0, count: 16)
        if inet_pton(AF_INET6, text, &sixteen) == 1 { return .ipv6(sixteen, port: port) }
        return nil
    }
}

extension Errno {
    public static let canceled = Errno(rawValue: ECANCELED)        // ECANCELED
    public static let brokenPipe = Errno(rawValue: EPIPE)          // EPIPE
    public static let notConnected = Errno(rawValue: ENOTCONN)     // ENOTCONN
}
