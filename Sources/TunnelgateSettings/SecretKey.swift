/// 32 bytes of secret key material (a WireGuard private or preshared key).
///
/// It never shows itself: `description`, `debugDescription` and its mirror
/// (`dump`, the default description of the settings holding it) say only
/// that a key is there. The bytes are reached through `withUnsafeBytes`.
public struct SecretKey: Sendable, Equatable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    public static let byteCount = 32

    private let storage: [UInt8]

    /// nil unless `bytes` holds exactly 32 bytes.
    public init?(bytes: [UInt8]) {
        guard bytes.count == Self.byteCount else { return nil }
        storage = bytes
    }

    /// A key as `wg genkey` and `wg genpsk` print it: 44 characters of
    /// standard base64 ending in one `=`. nil for anything else.
    public init?(base64 text: some StringProtocol) {
        guard let bytes = Base64Key.decode(text) else { return nil }
        storage = bytes
    }

    /// The 32 bytes, for the handshake; do not copy them where they could be printed.
    public func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try storage.withUnsafeBytes(body)
    }

    /// Compares in time independent of where the keys differ.
    public static func == (a: SecretKey, b: SecretKey) -> Bool {
        var difference: UInt8 = 0
        for i in 0..<byteCount { difference |= a.storage[i] ^ b.storage[i] }
        return difference == 0
    }

    public var description: String { "SecretKey(redacted)" }
    public var debugDescription: String { description }
    public var customMirror: Mirror { Mirror(self, children: [], displayStyle: .struct) }
}

/// WireGuard's key encoding: 32 bytes as 44 characters of standard base64
/// with one `=` of padding, the unused low bits of the last digit zero
/// (what wg(8)'s key_from_base64 accepts, and nothing else).
public enum Base64Key {
    /// What a problem says of a value that is not such a key (never the value itself).
    public static let problem = "not a base64 32-byte key"

    /// The 32 bytes of `text`, or nil when it is not such a key.
    public static func decode(_ text: some StringProtocol) -> [UInt8]? {
        let chars = Array(text.utf8)
        guard chars.count == 44, chars[43] == UInt8(ascii: "=") else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(SecretKey.byteCount)
        var accumulator: UInt32 = 0, bits = 0
        for c in chars[0..<43] {
            guard let v = value(c) else { return nil }
            accumulator = accumulator << 6 | UInt32(v)
            bits += 6
            if bits >= 8 {
                bits -= 8
                out.append(UInt8(truncatingIfNeeded: accumulator >> UInt32(bits)))
            }
        }
        // 43 digits carry 258 bits: the last 2 must be zero.
        guard out.count == SecretKey.byteCount, accumulator & 0b11 == 0 else { return nil }
        return out
    }

    /// The standard base64 text of 32 bytes (`decode`'s inverse).
    public static func encode(_ bytes: [UInt8]) -> String {
        precondition(bytes.count == SecretKey.byteCount)
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)
        var out: [UInt8] = []
        var i = 0
        while i < bytes.count {
            let chunk = bytes[i..<min(i + 3, bytes.count)]
            var n: UInt32 = 0
            for (k, b) in chunk.enumerated() { n |= UInt32(b) << (16 - 8 * UInt32(k)) }
            for k in 0...chunk.count { out.append(alphabet[Int(n >> (18 - 6 * UInt32(k)) & 0x3f)]) }
            i += 3
        }
        out.append(UInt8(ascii: "="))
        return String(decoding: out, as: UTF8.self)
    }

    static func value(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"): c - UInt8(ascii: "A")
        case UInt8(ascii: "a")...UInt8(ascii: "z"): c - UInt8(ascii: "a") + 26
        case UInt8(ascii: "0")...UInt8(ascii: "9"): c - UInt8(ascii: "0") + 52
        case UInt8(ascii: "+"): 62
        case UInt8(ascii: "/"): 63
        default: nil
        }
    }
}
