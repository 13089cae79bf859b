import LinuxSystem
import TunnelgateSettings

/// A UDP peer address held inline (no allocation per packet): where a
/// peer's datagrams come from and where ours go. Roaming replaces it with
/// the source of the latest authenticated packet.
public struct Endpoint: Hashable, Sendable, CustomStringConvertible {
    public var address: IPAddress
    public var port: UInt16

    public init(address: IPAddress, port: UInt16) {
        self.address = address
        self.port = port
    }

    /// `1.2.3.4:51820` or `[2001:db8::1]:51820`, as wg(8) prints and parses endpoints.
    public var description: String {
        switch address {
        case .v4: "\(address):\(port)"
        case .v6: "[\(address)]:\(port)"
        }
    }

    /// Parses `IP:port` or `[IPv6]:port` (no host names: the UAPI takes literals). The port is
    /// 1...65535 in decimal digits only. An IPv4-mapped IPv6 address (`[::ffff:192.0.2.1]:51820`)
    /// is folded to IPv4, as `init(_: IPSocketAddress)` folds what the kernel
    /// reports, so a peer has one identity and is reached on the IPv4 socket (the IPv6 one is
    /// IPV6_V6ONLY and cannot send to a mapped address).
    public init?(_ text: some StringProtocol) {
        let text = String(text)
        let host: Substring, portText: Substring
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else { return nil }
            host = text[text.index(after: text.startIndex)..<close]
            let rest = text[text.index(after: close)...]
            guard rest.hasPrefix(":") else { return nil }
            portText = rest.dropFirst()
            guard IPv6Address(host) != nil else { return nil }
        } else {
            guard let colon = text.lastIndex(of: ":") else { return nil }
            host = text[..<colon]
            portText = text[text.index(after: colon)...]
            guard IPv4Address(host) != nil else { return nil }
        }
        guard var address = IPAddress(host), let port = Self.port(portText), port != 0 else { return nil }
        if case .v6(let a) = address, a.high == 0, a.low >> 32 == 0xffff {
            address = .v4(IPv4Address(UInt32(truncatingIfNeeded: a.low)))
        }
        self.init(address: address, port: port)
    }

    /// Decimal digits only (UInt16.init would also take a sign); nil past 65535.
    private static func port(_ text: Substring) -> UInt16? {
        guard !text.isEmpty, text.utf8.count <= 5, text.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") })
        else { return nil }
        return UInt16(text)
    }

    /// The socket family this endpoint is reached on (AF_INET or AF_INET6).
    var family: Int32 { socketAddress.family }

    /// This endpoint as the kernel takes it.
    var socketAddress: IPSocketAddress {
        switch address {
        case .v4(let a): .v4(address: a.value, port: port)
        case .v6(let a): .v6(high: a.high, low: a.low, port: port)
        }
    }

    /// An address the kernel reported; an IPv4-mapped IPv6 address is folded to IPv4 so a peer has
    /// one identity.
    init(_ socketAddress: IPSocketAddress) {
        switch socketAddress {
        case .v4(let address, let port):
            self.init(address: .v4(IPv4Address(address)), port: port)
        case .v6(let high, let low, let port) where high == 0 && low >> 32 == 0xffff:
            self.init(address: .v4(IPv4Address(UInt32(truncatingIfNeeded: low))), port: port)
        case .v6(let high, let low, let port):
            self.init(address: .v6(IPv6Address(high: high, low: low)), port: port)
        }
    }

    /// The address in the struct sockaddr_storage at `storage` (what recvmmsg filled), folded as
    /// `init(_: IPSocketAddress)` folds it; nil for another family.
    init?(socketAddress storage: UnsafeRawPointer) {
        guard let address = IPSocketAddress(loadingFrom: storage) else { return nil }
        self.init(address)
    }

    /// Writes this endpoint as a struct sockaddr_in or sockaddr_in6 at `storage` (which has room for
    /// a sockaddr_storage); returns its length.
    func store(to storage: UnsafeMutableRawPointer) -> Int {
        socketAddress.store(to: storage)
    }

    /// The bytes the cookie is computed over: the address then the port, big-endian.
    var cookieInput: [UInt8] {
        address.bytes + [UInt8(port >> 8), UInt8(port & 0xff)]
    }
}
