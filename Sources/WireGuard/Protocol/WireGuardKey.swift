import TunnelgateSettings

/// A 32-byte public key (X25519), as `wg` prints it: 44 characters of base64 or 64 of hex.
/// Also the type of any other public 32-byte value that travels in that form.
public struct WireGuardKey: Hashable, Sendable, CustomStringConvertible {
    /// The 32 key bytes.
    public let bytes: [UInt8]

    /// Nil unless `bytes` holds exactly 32 bytes.
    public init?(_ bytes: [UInt8]) {
        guard bytes.count == WireGuardCrypto.keyLength else { return nil }
        self.bytes = bytes
    }

    /// Parses the canonical 44-character base64 form (`wg pubkey`'s output); nil for anything else.
    public init?(base64: String) {
        guard let bytes = KeyEncoding.decodeBase64(base64) else { return nil }
        self.bytes = bytes
    }

    /// Parses 64 hex digits (the UAPI's form, either case); nil for anything else.
    public init?(hex: String) {
        guard let bytes = KeyEncoding.decodeHex(hex) else { return nil }
        self.bytes = bytes
    }

    /// The 44-character base64 form.
    public var base64: String { Base64Key.encode(bytes) }

    /// 64 lowercase hex digits.
    public var hex: String { KeyEncoding.encodeHex(bytes) }

    public var description: String { base64 }
}

/// The text forms of 32-byte keys, shared by `WireGuardKey` and `PrivateKey`.
enum KeyEncoding {
    static let base64Length = 44

    static func decodeBase64(_ text: String) -> [UInt8]? {
        // Canonical only (Base64Key: the unused low bits of the last character must be zero).
        guard text.utf8.count == base64Length else { return nil }
        return Base64Key.decode(text)
    }

    static func decodeHex(_ text: String) -> [UInt8]? {
        let digits = Array(text.utf8)
        guard digits.count == 2 * WireGuardCrypto.keyLength else { return nil }
        var bytes = [UInt8](repeating: 0, count: WireGuardCrypto.keyLength)
        for i in 0..<bytes.count {
            guard let high = nibble(digits[2 * i]), let low = nibble(digits[2 * i + 1]) else { return nil }
            bytes[i] = high << 4 | low
        }
        return bytes
    }

    static func encodeHex(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count * 2)
        for byte in bytes {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 0x0F)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    private static func nibble(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return c - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return c - UInt8(ascii: "A") + 10
        default: return nil
        }
    }
}
