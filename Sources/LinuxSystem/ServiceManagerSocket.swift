import Glibc

/// The service manager's notification socket ($NOTIFY_SOCKET, sd_notify(3)'s protocol): an AF_UNIX
/// datagram socket, its address a path or, starting with '@', an abstract name. One unbound socket of
/// this process's own sends each message as one datagram.
public final class ServiceManagerSocket {
    private let fd: Int32
    private var address = sockaddr_un()
    private let length: socklen_t
    public let name: String

    /// A socket for the address `name` (a path, or "@abstract").
    public init(_ name: String) throws(SystemCallError) {
        self.name = name
        var bytes = Array(name.utf8)
        guard let first = bytes.first, first == UInt8(ascii: "/") || first == UInt8(ascii: "@") else {
            throw SystemCallError("NOTIFY_SOCKET=\(name) (neither a path nor an @abstract name)", Errno(rawValue: EAFNOSUPPORT))
        }
        // An abstract name starts with a NUL byte and is not terminated; a path is.
        let abstract = first == UInt8(ascii: "@")
        if abstract { bytes[0] = 0 }
        let capacity = MemoryLayout.size(ofValue: address.sun_path)
        guard bytes.count + (abstract ? 0 : 1) <= capacity else {
            throw SystemCallError("NOTIFY_SOCKET=\(name)", Errno(rawValue: ENAMETOOLONG))
        }
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (i, b) in bytes.enumerated() { raw[i] = b }
            if !abstract { raw[bytes.count] = 0 }
        }
        length = socklen_t(MemoryLayout<sockaddr_un>.offset(of: \.sun_path)! + bytes.count + (abstract ? 0 : 1))
        fd = try syscall("socket(AF_UNIX, SOCK_DGRAM)") { socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue | SOCK_CLOEXEC.rawValue), 0) }
    }

    deinit { close(fd) }

    /// sendto(2) of `message` as one datagram, never blocking (MSG_DONTWAIT): a full queue is an
    /// EAGAIN error, not a stalled caller.
    public func send(_ message: [UInt8]) throws(SystemCallError) {
        let sent = message.withUnsafeBytes { buffer in
            withUnsafePointer(to: &address) { p in
                p.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    sendto(fd, buffer.baseAddress, buffer.count, Int32(MSG_DONTWAIT | MSG_NOSIGNAL), $0, length)
                }
            }
        }
        if sent < 0 { throw SystemCallError("sendto(NOTIFY_SOCKET \(name))", .current) }
    }
}

extension ProcessControl {
    /// unsetenv(3): `name` is gone from this process's environment and from every process it starts.
    public static func removeEnvironmentValue(_ name: String) {
        _ = unsetenv(name)
    }
}
