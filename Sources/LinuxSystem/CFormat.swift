import Glibc

/// printf(3)'s floating-point conversions, for the `os` module's `%f`/`%e`/`%g`/`%a` and
/// `OSLogFloatFormatting`: the C library formats them (snprintf), nothing else here does.
public enum CFormat {
    /// `value` formatted by one conversion specification such as `%-+08.3f`. `specification` must be
    /// `%`, flags from `-+ #0`, an optional width, an optional `.precision`, and one of `aAeEfFgG`
    /// (nothing else: no length modifier, no `*`, no `%n`); anything else gives nil.
    public static func double(_ value: Double, _ specification: String) -> String? {
        guard isFloatSpecification(specification) else { return nil }
        var buffer = [CChar](repeating: 0, count: 512)
        let n = withVaList([value]) { list in
            buffer.withUnsafeMutableBufferPointer { vsnprintf($0.baseAddress, $0.count, specification, list) }
        }
        guard n >= 0 else { return nil }
        if Int(n) < buffer.count {
            return String(decoding: buffer[0..<Int(n)].map { UInt8(bitPattern: $0) }, as: UTF8.self)
        }
        // Longer than the buffer (a large width, or %f of 1e300): once more with room for all of it.
        var large = [CChar](repeating: 0, count: Int(n) + 1)
        let m = withVaList([value]) { list in
            large.withUnsafeMutableBufferPointer { vsnprintf($0.baseAddress, $0.count, specification, list) }
        }
        guard m == n else { return nil }
        return String(decoding: large[0..<Int(m)].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    static func isFloatSpecification(_ s: String) -> Bool {
        var bytes = Array(s.utf8)[...]
        guard bytes.popFirst() == UInt8(ascii: "%"), let conversion = bytes.popLast(),
              Array("aAeEfFgG".utf8).contains(conversion) else { return false }
        while let b = bytes.first, Array("-+ #0".utf8).contains(b) { bytes.removeFirst() }
        var width = 0
        while let b = bytes.first, b >= UInt8(ascii: "0"), b <= UInt8(ascii: "9") {
            width = width * 10 + Int(b - UInt8(ascii: "0")); bytes.removeFirst()
            guard width <= 4096 else { return false }
        }
        if bytes.first == UInt8(ascii: ".") {
            bytes.removeFirst()
            var precision = 0
            while let b = bytes.first, b >= UInt8(ascii: "0"), b <= UInt8(ascii: "9") {
                precision = precision * 10 + Int(b - UInt8(ascii: "0")); bytes.removeFirst()
                guard precision <= 4096 else { return false }
            }
        }
        return bytes.isEmpty
    }
}
