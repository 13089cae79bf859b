import Glibc

extension SocketAddress {
    /// Why getaddrinfo(3) found no address: gai_strerror's text ("Name or service not known").
    public struct ResolutionError: Error, Sendable, CustomStringConvertible {
        public let reason: String
        public var description: String { reason }
    }

    /// getaddrinfo(3) of the host `name` as the rest of the system resolves it (nsswitch, /etc/hosts,
    /// the configured DNS), asking for datagram sockets so that each address comes once: the
    /// addresses in the order given, with port 0. `family`: SocketFamily.ipv4, .ipv6 or .unspecified
    /// (both).
    public static func resolve(_ name: String, family: Int32) -> Result<[SocketAddress], ResolutionError> {
        var hints = addrinfo()
        hints.ai_family = family
        hints.ai_socktype = Int32(SOCK_DGRAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(name, nil, &hints, &list)
        guard status == 0 else { return .failure(ResolutionError(reason: String(cString: gai_strerror(status)))) }
        defer { freeaddrinfo(list) }
        var out: [SocketAddress] = []
        var entry = list
        while let e = entry {
            if let address = e.pointee.ai_addr, Int(e.pointee.ai_addrlen) <= MemoryLayout<sockaddr_storage>.size {
                var storage = sockaddr_storage()
                withUnsafeMutableBytes(of: &storage) {
                    $0.copyMemory(from: UnsafeRawBufferPointer(start: address, count: Int(e.pointee.ai_addrlen)))
                }
                if let a = SocketAddress(storage) { out.append(a) }
            }
            entry = e.pointee.ai_next
        }
        return .success(out)
    }
}
