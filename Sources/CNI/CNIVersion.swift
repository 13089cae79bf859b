/// A CNI specification version ("1.0.0"): the version a network configuration is written for, which
/// the plugin answers in.
public struct CNIVersion: Comparable, Hashable, Sendable, CustomStringConvertible {
    public let major: Int
    public let minor: Int
    public let patch: Int

    public init(_ major: Int, _ minor: Int, _ patch: Int) {
        self.major = major
        self.minor = minor
        self.patch = patch
    }

    /// "X.Y.Z", each a decimal number; nil for anything else.
    public init?(_ text: String) {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3,
              parts.allSatisfy({ !$0.isEmpty && $0.count <= 6 && $0.allSatisfy(\.isASCIIDigit) }),
              let a = Int(parts[0]), let b = Int(parts[1]), let c = Int(parts[2]) else { return nil }
        self.init(a, b, c)
    }

    public var description: String { "\(major).\(minor).\(patch)" }

    public static func < (a: CNIVersion, b: CNIVersion) -> Bool {
        (a.major, a.minor, a.patch) < (b.major, b.minor, b.patch)
    }

    /// What tunnelgate-cni speaks: the versions with chaining and the rich result (0.3.0 on), CHECK
    /// (0.4.0; Podman 4.3 writes its networks in it) and 1.0.0.
    public static let supported: [CNIVersion] = [CNIVersion(0, 3, 0), CNIVersion(0, 3, 1), CNIVersion(0, 4, 0), CNIVersion(1, 0, 0)]

    /// The version VERSION answers in when the caller names none.
    public static let latest = CNIVersion(1, 0, 0)

    /// CHECK came with 0.4.0.
    public var hasCheck: Bool { self >= CNIVersion(0, 4, 0) }

    /// Before 1.0.0 each entry of a result's `ips` says its family (`"version": "4"`).
    public var ipsCarryVersion: Bool { self < CNIVersion(1, 0, 0) }
}

extension Character {
    var isASCIIDigit: Bool { ("0"..."9").contains(self) }
}
