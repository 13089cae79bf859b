import Glibc
import TunnelgateSettings

/// Resolves host names with getaddrinfo(3), as the rest of the system does
/// (nsswitch, /etc/hosts, the configured DNS).
public struct SystemResolver: HostResolver {
    public init() {}

    public func resolve(_ name: String) -> Result<[IPAddress], ResolveFailure> {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_DGRAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(name, nil, &hints, &list)
        guard status == 0 else { return .failure(ResolveFailure(String(cString: gai_strerror(status)))) }
        defer { freeaddrinfo(list) }
        var out: [IPAddress] = []
        var entry = list
        while let e = entry {
            if let sa = e.pointee.ai_addr {
                switch e.pointee.ai_family {
                case AF_INET:
                    let sin = UnsafeRawPointer(sa).loadUnaligned(as: sockaddr_in.self)
                    out.append(.v4(IPv4Address(UInt32(bigEndian: sin.sin_addr.s_addr))))
                case AF_INET6:
                    let sin6 = UnsafeRawPointer(sa).loadUnaligned(as: sockaddr_in6.self)
                    let bytes = withUnsafeBytes(of: sin6.sin6_addr) { Array($0) }
                    out.append(.v6(IPv6Address(bytes: bytes)))
                default: break
                }
            }
            entry = e.pointee.ai_next
        }
        var seen = Set<IPAddress>()
        return .success(out.filter { seen.insert($0).inserted })
    }
}
