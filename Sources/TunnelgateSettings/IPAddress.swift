/// An IPv4 address in host byte order. Parsing accepts dotted-quad only
/// (four decimal octets, no leading zeros that could be read as octal).
public struct IPv4Address: Hashable, Sendable, Comparable, CustomStringConvertible {
    public var value: UInt32

    public init(_ value: UInt32) { self.value = value }

    public init?(_ text: some StringProtocol) {
        var octets: [UInt32] = []
        octets.reserveCapacity(4)
        for part in text.split(separator: ".", omittingEmptySubsequences: false) {
            guard (1...3).contains(part.count), part.allSatisfy({ $0.isASCII && $0.isNumber }),
                  !(part.count > 1 && part.first == "0"),
                  let octet = UInt32(part), octet <= 255 else { return nil }
            octets.append(octet)
        }
        guard octets.count == 4 else { return nil }
        value = octets[0] << 24 | octets[1] << 16 | octets[2] << 8 | octets[3]
    }

    /// The four octets in network order.
    public var bytes: [UInt8] {
        [UInt8(value >> 24), UInt8(value >> 16 & 0xff), UInt8(value >> 8 & 0xff), UInt8(value & 0xff)]
    }

    public init(bytes: some Collection<UInt8>) {
        precondition(bytes.count == 4)
        value = bytes.reduce(0) { $0 << 8 | UInt32($1) }
    }

    public var description: String {
        "\(value >> 24).\(value >> 16 & 0xff).\(value >> 8 & 0xff).\(value & 0xff)"
    }

    public static func < (a: Self, b: Self) -> Bool { a.value < b.value }

    public var isUnspecified: Bool { value == 0 }
    public var isLoopback: Bool { value >> 24 == 127 }
    public var isMulticast: Bool { value >> 28 == 0xe }
    public var isBroadcast: Bool { value == .max }
}

/// An IPv6 address as two 64-bit halves in host byte order.
/// Formatting follows RFC 5952 (lower case, longest zero run compressed).
public struct IPv6Address: Hashable, Sendable, Comparable, CustomStringConvertible {
    public var high: UInt64
    public var low: UInt64

    public init(high: UInt64, low: UInt64) { self.high = high; self.low = low }

    public init?(_ text: some StringProtocol) {
        let s = String(text)
        guard !s.isEmpty, s.allSatisfy({ $0.isASCII }) else { return nil }
        var groups: [UInt16] = []
        var tailGroups: [UInt16] = []
        var sawDoubleColon = false

        func parseGroups(_ part: Substring, into out: inout [UInt16], allowIPv4Tail: Bool) -> Bool {
            if part.isEmpty { return true }
            let fields = part.split(separator: ":", omittingEmptySubsequences: false)
            for (i, field) in fields.enumerated() {
                if allowIPv4Tail, i == fields.count - 1, field.contains(".") {
                    guard let v4 = IPv4Address(field) else { return false }
                    out.append(UInt16(v4.value >> 16))
                    out.append(UInt16(v4.value & 0xffff))
                    continue
                }
                guard (1...4).contains(field.count), let g = UInt16(field, radix: 16) else { return false }
                out.append(g)
            }
            return true
        }

        if let range = s.firstRange(of: "::") {
            sawDoubleColon = true
            let head = s[s.startIndex..<range.lowerBound]
            let tail = s[range.upperBound...]
            if tail.contains("::") { return nil }
            guard parseGroups(head, into: &groups, allowIPv4Tail: false),
                  parseGroups(tail, into: &tailGroups, allowIPv4Tail: true) else { return nil }
            guard groups.count + tailGroups.count <= 7 else { return nil }
        } else {
            guard parseGroups(s[...], into: &groups, allowIPv4Tail: true), groups.count == 8 else { return nil }
        }
        if sawDoubleColon {
            groups += Array(repeating: 0, count: 8 - groups.count - tailGroups.count) + tailGroups
        }
        var h: UInt64 = 0, l: UInt64 = 0
        for i in 0..<4 { h = h << 16 | UInt64(groups[i]) }
        for i in 4..<8 { l = l << 16 | UInt64(groups[i]) }
        high = h; low = l
    }

    public init(bytes: some Collection<UInt8>) {
        precondition(bytes.count == 16)
        let b = Array(bytes)
        high = b[0..<8].reduce(0) { $0 << 8 | UInt64($1) }
        low = b[8..<16].reduce(0) { $0 << 8 | UInt64($1) }
    }

    /// The sixteen octets in network order.
    public var bytes: [UInt8] {
        (0..<8).map { UInt8(truncatingIfNeeded: high >> (56 - 8 * $0)) }
            + (0..<8).map { UInt8(truncatingIfNeeded: low >> (56 - 8 * $0)) }
    }

    var groups: [UInt16] {
        (0..<4).map { UInt16(truncatingIfNeeded: high >> (48 - 16 * $0)) }
            + (0..<4).map { UInt16(truncatingIfNeeded: low >> (48 - 16 * $0)) }
    }

    public var description: String {
        let g = groups
        // Longest run of two or more zero groups; the first one wins a tie.
        var bestStart = -1, bestLength = 1, i = 0
        while i < 8 {
            if g[i] == 0 {
                var j = i
                while j < 8 && g[j] == 0 { j += 1 }
                if j - i > bestLength { bestStart = i; bestLength = j - i }
                i = j
            } else { i += 1 }
        }
        func hex(_ range: Range<Int>) -> String {
            range.map { String(g[$0], radix: 16) }.joined(separator: ":")
        }
        if bestStart < 0 { return hex(0..<8) }
        return hex(0..<bestStart) + "::" + hex((bestStart + bestLength)..<8)
    }

    public static func < (a: Self, b: Self) -> Bool { (a.high, a.low) < (b.high, b.low) }

    public var isUnspecified: Bool { high == 0 && low == 0 }
    public var isLoopback: Bool { high == 0 && low == 1 }
    public var isMulticast: Bool { high >> 56 == 0xff }
    public var isLinkLocal: Bool { high >> 54 == 0x3fa }
}

/// The address family of a setting, route or kernel object.
public enum IPFamily: String, Sendable, Hashable, CaseIterable, CustomStringConvertible {
    case ipv4, ipv6
    public var description: String { self == .ipv4 ? "IPv4" : "IPv6" }
    public var bitWidth: Int { self == .ipv4 ? 32 : 128 }
}

/// An IPv4 or IPv6 address.
public enum IPAddress: Hashable, Sendable, Comparable, CustomStringConvertible {
    case v4(IPv4Address)
    case v6(IPv6Address)

    public init?(_ text: some StringProtocol) {
        if let a = IPv4Address(text) { self = .v4(a) }
        else if let a = IPv6Address(text) { self = .v6(a) }
        else { return nil }
    }

    public var family: IPFamily {
        switch self { case .v4: .ipv4; case .v6: .ipv6 }
    }

    public var bytes: [UInt8] {
        switch self { case .v4(let a): a.bytes; case .v6(let a): a.bytes }
    }

    public var description: String {
        switch self { case .v4(let a): a.description; case .v6(let a): a.description }
    }

    public var isUnspecified: Bool {
        switch self { case .v4(let a): a.isUnspecified; case .v6(let a): a.isUnspecified }
    }
    public var isLoopback: Bool {
        switch self { case .v4(let a): a.isLoopback; case .v6(let a): a.isLoopback }
    }
    public var isMulticast: Bool {
        switch self { case .v4(let a): a.isMulticast; case .v6(let a): a.isMulticast }
    }

    public static func < (a: Self, b: Self) -> Bool {
        switch (a, b) {
        case (.v4(let x), .v4(let y)): x < y
        case (.v6(let x), .v6(let y)): x < y
        case (.v4, .v6): true
        case (.v6, .v4): false
        }
    }
}

extension IPAddress {
    /// The IPv4 address, when this is one.
    var ipv4: IPv4Address? { if case .v4(let a) = self { a } else { nil } }
    /// The IPv6 address, when this is one.
    var ipv6: IPv6Address? { if case .v6(let a) = self { a } else { nil } }
}
