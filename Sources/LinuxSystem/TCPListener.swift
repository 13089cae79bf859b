import Glibc

extension FileDescriptor {
    /// A listening TCP socket on `address`, non-blocking and close-on-exec, with SO_REUSEADDR (a restarted
    /// server binds again while the old one's connections are in TIME_WAIT) and, for an IPv6 address,
    /// IPV6_V6ONLY (`[::1]` is IPv6 loopback only, never IPv4 as well). Equivalent to: socket(2),
    /// setsockopt(2), bind(2), listen(2).
    public static func listenTCP(at address: SocketAddress, backlog: Int32 = 64) throws(SystemCallError) -> FileDescriptor {
        let fd = try socket(family: address.family, type: .stream, nonBlocking: true)
        do throws(SystemCallError) {
            try fd.setSocketOption(level: SOL_SOCKET, name: SO_REUSEADDR, value: 1)
            if address.family == AF_INET6 {
                try fd.setSocketOption(level: Int32(IPPROTO_IPV6), name: IPV6_V6ONLY, value: 1)
            }
            try fd.bind(to: address)
            try fd.listen(backlog: backlog)
        } catch {
            fd.close()
            throw error
        }
        return fd
    }
}

extension ProcessControl {
    /// CLOCK_REALTIME in seconds since the Unix epoch: the time Prometheus and wg(8) count in.
    public static func realtimeSeconds() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }
}
