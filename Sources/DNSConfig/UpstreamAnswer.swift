import LinuxSystem

/// The forwarder's check of a datagram that arrived on an upstream socket:
/// where it came from, then what it is (`DNSQuery.check(answer:)`).
enum UpstreamAnswer {
    /// `answer` arrived from `source` on the socket the query to `server`
    /// went out of (the query as sent: its id is the upstream id).
    static func check(_ answer: [UInt8], from source: SocketAddress?, server: SocketAddress,
                      query: DNSQuery) -> DNSAnswerVerdict {
        guard let source, source.isSameEndpoint(as: server) else { return .rejected(.wrongSource) }
        return query.check(answer: answer)
    }
}

extension SocketAddress {
    /// The same family, address and port. An IPv6 scope counts for a
    /// link-local address only, where it names the link (recvfrom reports
    /// the scope of a link-local sender and 0 for any other).
    func isSameEndpoint(as other: SocketAddress) -> Bool {
        switch (self, other) {
        case (.ipv4(let a, let p), .ipv4(let b, let q)):
            return a == b && p == q
        case (.ipv6(let a, let p, let s), .ipv6(let b, let q, let t)):
            let linkLocal = a.count == 16 && a[0] == 0xfe && a[1] & 0xc0 == 0x80
            return a == b && p == q && (!linkLocal || s == t)
        default:
            return false
        }
    }

    /// This address with another port.
    func withPort(_ port: UInt16) -> SocketAddress {
        switch self {
        case .ipv4(let a, _): .ipv4(a, port: port)
        case .ipv6(let a, _, let scope): .ipv6(a, port: port, scope: scope)
        case .unix: self
        }
    }
}
