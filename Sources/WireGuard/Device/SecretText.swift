import LinuxSystem

/// Text that holds keys, built in secure memory: the UAPI's `get` answer, whose `private_key=` and
/// `preshared_key=` lines carry the keys in hex as wg(8) expects them. The hex is written digit by
/// digit from the key's memory into SecureBytes (never a String or Array), the rest is public text;
/// the whole answer is wiped when the text is released, right after it was sent.
final class SecretText {
    private var memory: SecureBytes
    private(set) var count = 0

    init(capacity: Int) throws(SystemCallError) {
        memory = try SecureBytes(count: max(capacity, 256))
    }

    /// Public text (no secret in it).
    func append(_ text: String) throws(SystemCallError) {
        let bytes = Array(text.utf8)
        try reserve(bytes.count)
        let at = count
        memory.withUnsafeMutableBytes { out in
            bytes.withUnsafeBytes { out.baseAddress!.advanced(by: at).copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
        }
        count += bytes.count
    }

    /// The 32 bytes `body` hands over (a key's memory), as 64 lowercase hex digits.
    func appendHex(_ key: UnsafeRawBufferPointer) throws(SystemCallError) {
        try reserve(2 * key.count)
        let at = count
        memory.withUnsafeMutableBytes { out in
            for (i, b) in key.enumerated() {
                out[at + 2 * i] = Self.digit(b >> 4)
                out[at + 2 * i + 1] = Self.digit(b & 15)
            }
        }
        count += 2 * key.count
    }

    func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try memory.withUnsafeBytes { try body(UnsafeRawBufferPointer(rebasing: $0[0..<count])) }
    }

    private func reserve(_ more: Int) throws(SystemCallError) {
        guard count + more > memory.count else { return }
        let bigger = try SecureBytes(count: max(2 * memory.count, count + more))
        let used = count
        bigger.withUnsafeMutableBytes { out in
            memory.withUnsafeBytes { out.baseAddress!.copyMemory(from: $0.baseAddress!, byteCount: used) }
        }
        memory = bigger  // the smaller one is wiped as it goes
    }

    private static func digit(_ v: UInt8) -> UInt8 {
        v < 10 ? UInt8(ascii: "0") + v : UInt8(ascii: "a") + v - 10
    }
}
