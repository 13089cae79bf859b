/// An address and a prefix length: `10.0.0.0/8`, `2001:db8::/32`.
/// A prefix as a route destination has no host bits set (`isCanonical`).
public struct IPPrefix: Hashable, Sendable, Comparable, CustomStringConvertible {
    public let address: IPAddress
    public let length: Int

    public init?(address: IPAddress, length: Int) {
        guard (0...address.family.bitWidth).contains(length) else { return nil }
        self.address = address
        self.length = length
    }

    /// Parses `ADDRESS/LENGTH`; a bare address is a host prefix (/32 or /128).
    public init?(_ text: some StringProtocol) {
        let parts = text.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
        guard let address = IPAddress(parts[0]) else { return nil }
        if parts.count == 1 {
            self.init(address: address, length: address.family.bitWidth)
        } else {
            guard parts[1].allSatisfy({ $0.isASCII && $0.isNumber }), (1...3).contains(parts[1].count),
                  let length = Int(parts[1]) else { return nil }
            self.init(address: address, length: length)
        }
    }

    public var family: IPFamily { address.family }
    public var isHost: Bool { length == family.bitWidth }
    public var isDefault: Bool { length == 0 }

    /// The prefix with its host bits cleared.
    public var network: IPPrefix {
        IPPrefix(address: Self.mask(address, length), length: length)!
    }
    public var isCanonical: Bool { network.address == address }

    public func contains(_ other: IPAddress) -> Bool {
        other.family == family && Self.mask(other, length) == Self.mask(address, length)
    }

    /// True when every address of `other` is inside this prefix.
    public func contains(_ other: IPPrefix) -> Bool {
        other.family == family && other.length >= length && contains(other.address)
    }

    public static func mask(_ address: IPAddress, _ length: Int) -> IPAddress {
        switch address {
        case .v4(let a):
            let m: UInt32 = length == 0 ? 0 : ~UInt32(0) << (32 - length)
            return .v4(IPv4Address(a.value & m))
        case .v6(let a):
            let mh: UInt64 = length == 0 ? 0 : (length >= 64 ? ~0 : ~UInt64(0) << (64 - length))
            let ml: UInt64 = length <= 64 ? 0 : (length == 128 ? ~0 : ~UInt64(0) << (128 - length))
            return .v6(IPv6Address(high: a.high & mh, low: a.low & ml))
        }
    }

    public var description: String { "\(address)/\(length)" }

    public static func < (a: Self, b: Self) -> Bool { (a.address, a.length) < (b.address, b.length) }
}

extension IPv4Address {
    /// The prefix length of a contiguous netmask (`255.255.255.0` → 24), nil otherwise.
    public var maskLength: Int? {
        let ones = (~value).leadingZeroBitCount
        let expected: UInt32 = ones == 0 ? 0 : ~UInt32(0) << (32 - ones)
        return value == expected ? ones : nil
    }

    public init(maskLength: Int) {
        precondition((0...32).contains(maskLength))
        self.init(maskLength == 0 ? 0 : ~UInt32(0) << (32 - maskLength))
    }
}
