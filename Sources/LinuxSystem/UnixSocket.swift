import CTunnelgateShims
import Glibc

/// Unix stream sockets for the control socket: bind/listen/accept with
/// peer credentials, and a client connect.
public enum UnixSocket {
    /// The process credentials of a connected peer (SO_PEERCRED).
    public struct Credentials: Sendable, Equatable {
        public var pid: Int32
        public var uid: UInt32
        public var gid: UInt32
    }

    static func address(_ path: String) throws(SystemCallError) -> sockaddr_un {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        let capacity = MemoryLayout.size(ofValue: address.sun_path)
        guard bytes.count < capacity else { throw SystemCallError("bind(\(path))", Errno(rawValue: ENAMETOOLONG)) }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (i, b) in bytes.enumerated() { raw[i] = b }
            raw[bytes.count] = 0
        }
        return address
    }

    /// A listening socket at `path`, mode 0600. A stale socket file (nobody
    /// accepting on it) is replaced; a live one is an EADDRINUSE error.
    public static func listen(at path: String) throws(SystemCallError) -> FileDescriptor {
        if FileSystem.exists(path) {
            if let probe = try? connect(to: path) {
                probe.close()
                throw SystemCallError("bind(\(path))", Errno(rawValue: EADDRINUSE))
            }
            FileSystem.remove(path)
        }
        let fd = FileDescriptor(rawValue: try syscall("socket(AF_UNIX)") {
            socket(AF_UNIX, Int32(SOCK_STREAM.rawValue | SOCK_CLOEXEC.rawValue | SOCK_NONBLOCK.rawValue), 0)
        })
        do throws(SystemCallError) {
            var address = try address(path)
            // Created owner-only: no window in which others could connect.
            let previous = umask(0o177)
            defer { umask(previous) }
            _ = try syscall("bind(\(path))") {
                withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    bind(fd.rawValue, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) } }
            }
            _ = try syscall("listen(\(path))") { Glibc.listen(fd.rawValue, 8) }
            return fd
        } catch {
            fd.close()
            throw error
        }
    }

    /// Accepts one connection (blocking I/O on it), or nil when none is waiting.
    public static func accept(_ listener: FileDescriptor) throws(SystemCallError) -> FileDescriptor? {
        let rc = CTunnelgateShims_accept_cloexec(listener.rawValue)
        if rc < 0 {
            if errno == EAGAIN || errno == EINTR || errno == ECONNABORTED { return nil }
            throw SystemCallError("accept", .current)
        }
        return FileDescriptor(rawValue: rc)
    }

    public static func connect(to path: String) throws(SystemCallError) -> FileDescriptor {
        let fd = FileDescriptor(rawValue: try syscall("socket(AF_UNIX)") {
            socket(AF_UNIX, Int32(SOCK_STREAM.rawValue | SOCK_CLOEXEC.rawValue), 0)
        })
        do throws(SystemCallError) {
            var address = try address(path)
            _ = try syscall("connect(\(path))") {
                withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    Glibc.connect(fd.rawValue, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) } }
            }
            return fd
        } catch {
            fd.close()
            throw error
        }
    }

    public static func peerCredentials(_ fd: FileDescriptor) throws(SystemCallError) -> Credentials {
        var pid: pid_t = 0, uid: uid_t = 0, gid: gid_t = 0
        _ = try syscall("getsockopt(SO_PEERCRED)") { CTunnelgateShims_peer_credentials(fd.rawValue, &pid, &uid, &gid) }
        return Credentials(pid: pid, uid: uid, gid: gid)
    }

    /// Reads until a newline or EOF (at most `limit` bytes).
    public static func readLine(_ fd: FileDescriptor, limit: Int = 1 << 20) -> [UInt8]? {
        var out: [UInt8] = []
        var byte: UInt8 = 0
        while out.count < limit {
            let n = Glibc.read(fd.rawValue, &byte, 1)
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { return out.isEmpty ? nil : out }
            if byte == 0x0a { return out }
            out.append(byte)
        }
        return nil
    }
}
