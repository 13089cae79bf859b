import CSodium

/// libsodium's one-time initialisation. `sodium_init` is idempotent and thread safe; it picks the
/// fastest ChaCha20 and Poly1305 implementations and readies the random generator, so every entry
/// point that reaches libsodium calls `ensureInitialized()` first (after the first call it is one
/// atomic load).
enum Sodium {
    private static let initialized: Bool = sodium_init() >= 0

    static func ensureInitialized() {
        precondition(initialized, "sodium_init failed")
    }

    /// Overwrites `buffer` with zero bytes in a way the optimiser cannot remove (`sodium_memzero`).
    static func wipe(_ buffer: inout [UInt8]) {
        buffer.withUnsafeMutableBytes { raw in
            if let base = raw.baseAddress { sodium_memzero(base, raw.count) }
        }
    }

    /// Compares in constant time; false when the lengths differ.
    static func constantTimeEqual(_ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer) -> Bool {
        guard a.count == b.count else { return false }
        guard a.count > 0, let pa = a.baseAddress, let pb = b.baseAddress else { return true }
        return sodium_memcmp(pa, pb, a.count) == 0
    }

    static func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        a.withUnsafeBytes { pa in b.withUnsafeBytes { pb in constantTimeEqual(pa, pb) } }
    }

    /// Fills `count` bytes from the operating system's random generator (`randombytes_buf`).
    static func randomBytes(_ count: Int) -> [UInt8] {
        ensureInitialized()
        var bytes = [UInt8](repeating: 0, count: count)
        bytes.withUnsafeMutableBytes { raw in
            if let base = raw.baseAddress { randombytes_buf(base, raw.count) }
        }
        return bytes
    }
}
