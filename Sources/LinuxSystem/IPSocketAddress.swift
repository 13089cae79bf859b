import Glibc

/// An IPv4 or IPv6 address and port as the kernel reads and writes them (struct sockaddr_in,
/// struct sockaddr_in6), held in integers, in host order: no allocation, for the packet path
/// (`SocketAddress`, whose addresses are byte arrays, is for everything else).
///
/// This file imports nothing but Glibc: Scripts/fuzz-wireguard.sh compiles it alone, as the module
/// LinuxSystem, beneath the WireGuard endpoint code it fuzzes.
public enum IPSocketAddress: Hashable, Sendable {
    case v4(address: UInt32, port: UInt16)
    /// The 128-bit address in two halves, the high one first.
    case v6(high: UInt64, low: UInt64, port: UInt16)

    /// AF_INET or AF_INET6.
    @inlinable
    public var family: Int32 {
        switch self {
        case .v4: AF_INET
        case .v6: AF_INET6
        }
    }

    /// The sockaddr_in or sockaddr_in6 at `storage` (a struct sockaddr_storage the kernel filled,
    /// recvfrom's or recvmmsg's); nil for any other family. The IPv6 scope and flow label are not kept.
    @inlinable
    public init?(loadingFrom storage: UnsafeRawPointer) {
        switch Int32(storage.load(as: sa_family_t.self)) {
        case AF_INET:
            let sin = storage.load(as: sockaddr_in.self)
            self = .v4(address: UInt32(bigEndian: sin.sin_addr.s_addr), port: UInt16(bigEndian: sin.sin_port))
        case AF_INET6:
            let sin6 = storage.load(as: sockaddr_in6.self)
            let (high, low) = withUnsafeBytes(of: sin6.sin6_addr) {
                (UInt64(bigEndian: $0.loadUnaligned(fromByteOffset: 0, as: UInt64.self)),
                 UInt64(bigEndian: $0.loadUnaligned(fromByteOffset: 8, as: UInt64.self)))
            }
            self = .v6(high: high, low: low, port: UInt16(bigEndian: sin6.sin6_port))
        default:
            return nil
        }
    }

    /// Writes the struct sockaddr_in or sockaddr_in6 at `storage` (room for a sockaddr_storage,
    /// suitably aligned); its length, for sendto's or sendmmsg's address length.
    @inlinable
    public func store(to storage: UnsafeMutableRawPointer) -> Int {
        switch self {
        case .v4(let address, let port):
            var sin = sockaddr_in()
            sin.sin_family = sa_family_t(AF_INET)
            sin.sin_port = port.bigEndian
            sin.sin_addr.s_addr = address.bigEndian
            storage.storeBytes(of: sin, as: sockaddr_in.self)
            return MemoryLayout<sockaddr_in>.size
        case .v6(let high, let low, let port):
            var sin6 = sockaddr_in6()
            sin6.sin6_family = sa_family_t(AF_INET6)
            sin6.sin6_port = port.bigEndian
            withUnsafeMutableBytes(of: &sin6.sin6_addr) {
                $0.storeBytes(of: high.bigEndian, toByteOffset: 0, as: UInt64.self)
                $0.storeBytes(of: low.bigEndian, toByteOffset: 8, as: UInt64.self)
            }
            storage.storeBytes(of: sin6, as: sockaddr_in6.self)
            return MemoryLayout<sockaddr_in6>.size
        }
    }
}
