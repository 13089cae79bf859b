/// A domain name as DNS carries it: a sequence of labels of 1–63 bytes, at
/// most 255 bytes in wire form (RFC 1035 §2.3.4, §3.1). Bytes are kept as
/// they came; comparisons fold ASCII case only, as DNS does (RFC 4343).
public struct DNSName: Hashable, Sendable, CustomStringConvertible {
    /// The labels, most specific first, without the root's empty label.
    public let labels: [[UInt8]]

    /// Labels of at most this many bytes (RFC 1035 §2.3.4).
    public static let maximumLabelLength = 63
    /// Names of at most this many bytes in wire form, length bytes and root included.
    public static let maximumWireLength = 255

    /// The root, ".".
    public static let root = DNSName(validatedLabels: [])

    init(validatedLabels labels: [[UInt8]]) {
        self.labels = labels
    }

    /// A name in presentation form: `corp.example`, `corp.example.` (the
    /// trailing dot is optional), `.` or `""` for the root. Escapes are not
    /// read: a configuration's domains are host names. Nil when a label is
    /// empty or too long, or the name is too long.
    public init?(_ text: String) {
        var labels: [[UInt8]] = []
        var body = Substring(text)
        if body.hasSuffix(".") { body = body.dropLast() }
        if !body.isEmpty {
            for part in body.split(separator: ".", omittingEmptySubsequences: false) {
                let bytes = Array(part.utf8)
                guard (1...Self.maximumLabelLength).contains(bytes.count) else { return nil }
                labels.append(bytes)
            }
        }
        guard Self.wireLength(of: labels) <= Self.maximumWireLength else { return nil }
        self.labels = labels
    }

    /// The length of the name in wire form: one length byte per label, the
    /// label bytes, and the root's zero byte.
    public var wireLength: Int { Self.wireLength(of: labels) }

    static func wireLength(of labels: [[UInt8]]) -> Int {
        labels.reduce(1) { $0 + 1 + $1.count }
    }

    /// True when this name is `domain` or lies below it, label by label,
    /// ignoring ASCII case: `a.corp.example` and `CORP.example` are in
    /// `corp.example`; `notcorp.example` is not. Every name is in the root.
    public func isInDomain(_ domain: DNSName) -> Bool {
        guard domain.labels.count <= labels.count else { return false }
        for (mine, theirs) in zip(labels.reversed(), domain.labels.reversed()) {
            guard Self.equalIgnoringASCIICase(mine, theirs) else { return false }
        }
        return true
    }

    /// True when both names have the same labels, ASCII case ignored (RFC
    /// 4343): how DNS compares names, and how an answer's question is matched
    /// against the query's (`Host.Corp.example` is `host.corp.EXAMPLE`).
    public func equalsIgnoringASCIICase(_ other: DNSName) -> Bool {
        labels.count == other.labels.count
            && zip(labels, other.labels).allSatisfy { Self.equalIgnoringASCIICase($0, $1) }
    }

    /// The name in wire form, uncompressed: each label after its length byte, then the root's zero byte.
    public var wireBytes: [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(wireLength)
        for label in labels {
            bytes.append(UInt8(label.count))
            bytes.append(contentsOf: label)
        }
        bytes.append(0)
        return bytes
    }

    static func equalIgnoringASCIICase(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        for (x, y) in zip(a, b) where Self.lowercased(x) != Self.lowercased(y) { return false }
        return true
    }

    static func lowercased(_ byte: UInt8) -> UInt8 {
        (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte) ? byte | 0x20 : byte
    }

    /// Presentation form without the trailing dot (`.` for the root); bytes
    /// that are not printable ASCII, and `.` and `\` inside a label, are
    /// escaped as `\DDD` (RFC 4343 §2.1).
    public var description: String {
        guard !labels.isEmpty else { return "." }
        return labels.map { label in
            var text = ""
            for byte in label {
                if byte > 0x20 && byte < 0x7f && byte != UInt8(ascii: ".") && byte != UInt8(ascii: "\\") {
                    text.unicodeScalars.append(Unicode.Scalar(byte))
                } else {
                    let digits = String(byte)
                    text += "\\" + String(repeating: "0", count: 3 - digits.count) + digits
                }
            }
            return text
        }.joined(separator: ".")
    }
}
