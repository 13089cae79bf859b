import LinuxSystem
import TunnelgateSettings

/// Resolves host names with getaddrinfo(3), as the rest of the system does
/// (nsswitch, /etc/hosts, the configured DNS).
public struct SystemResolver: HostResolver {
    public init() {}

    public func resolve(_ name: String) -> Result<[IPAddress], ResolveFailure> {
        switch SocketAddress.resolve(name, family: SocketFamily.unspecified) {
        case .failure(let error):
            return .failure(ResolveFailure(error.reason))
        case .success(let addresses):
            var seen = Set<IPAddress>()
            return .success(addresses.compactMap { address -> IPAddress? in
                switch address {
                case .ipv4(let bytes, _): .v4(IPv4Address(bytes: bytes))
                case .ipv6(let bytes, _, _): .v6(IPv6Address(bytes: bytes))
                case .unix: nil
                }
            }.filter { seen.insert($0).inserted })
        }
    }
}
