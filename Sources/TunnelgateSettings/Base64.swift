/// Standard base64 (RFC 4648 §4, with padding) of any bytes: what the control socket's `message` and
/// its reply carry (ControlServer). Decoding is strict: the length a multiple of four, padding only at
/// the end, the unused bits of the last digit zero; anything else is nil rather than a guess.
/// WireGuard's 32-byte keys have their own, stricter reader (Base64Key), which never copies a secret.
public enum Base64 {
    static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)

    public static func encode(_ bytes: some Collection<UInt8>) -> String {
        var out: [UInt8] = []
        out.reserveCapacity((bytes.count + 2) / 3 * 4)
        var n: UInt32 = 0, held = 0
        for b in bytes {
            n = n << 8 | UInt32(b)
            held += 1
            if held == 3 {
                for shift in [18, 12, 6, 0] as [UInt32] { out.append(alphabet[Int(n >> shift & 0x3f)]) }
                n = 0; held = 0
            }
        }
        if held > 0 {
            n <<= UInt32(8 * (3 - held))
            for k in 0...held { out.append(alphabet[Int(n >> (18 - 6 * UInt32(k)) & 0x3f)]) }
            out.append(contentsOf: repeatElement(UInt8(ascii: "="), count: 3 - held))
        }
        return String(decoding: out, as: UTF8.self)
    }

    public static func decode(_ text: some StringProtocol) -> [UInt8]? {
        let digits = Array(text.utf8)
        guard digits.count % 4 == 0 else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(digits.count / 4 * 3)
        var group = 0
        while group < digits.count {
            let last = group + 4 == digits.count
            var n: UInt32 = 0, padding = 0
            for i in group..<group + 4 {
                let c = digits[i]
                if c == UInt8(ascii: "=") {
                    // Only in the last group, only in its last two places, and nothing but '=' after it.
                    guard last, i >= group + 2 else { return nil }
                    padding += 1
                    n <<= 6
                    continue
                }
                guard padding == 0, let v = Base64Key.value(c) else { return nil }
                n = n << 6 | UInt32(v)
            }
            let bytes = [UInt8(truncatingIfNeeded: n >> 16), UInt8(truncatingIfNeeded: n >> 8), UInt8(truncatingIfNeeded: n)]
            // The bits the padding leaves unused must be zero (one text per byte string).
            if padding == 1, bytes[2] != 0 { return nil }
            if padding == 2, bytes[1] != 0 || bytes[2] != 0 { return nil }
            out.append(contentsOf: bytes.prefix(3 - padding))
            group += 4
        }
        return out
    }
}
