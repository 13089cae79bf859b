import CSodium
import TunnelgateSettings

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

/// Secret memory from libsodium's guarded allocator (sodium_malloc: its own pages between guard pages,
/// locked, excluded from core dumps; sodium_free zeroes them): where the protocol keeps the keys it
/// makes itself (ephemeral keys, keys parsed from the UAPI socket) and the keys tests give as arrays.
/// The static keys of a running device come from the settings' memory instead (LinuxSystem's
/// SecureBytes), shared, not copied.
final class SodiumSecretMemory: SecretMemory, @unchecked Sendable {
    // @unchecked Sendable: the allocation never moves; its bytes are written before the value is shared.
    let count: Int
    private let base: UnsafeMutableRawPointer

    /// nil when libsodium cannot allocate.
    init?(count: Int) {
        Sodium.ensureInitialized()
        guard let p = sodium_malloc(max(count, 1)) else { return nil }
        sodium_memzero(p, max(count, 1))
        base = p
        self.count = count
    }

    /// A copy of `bytes` (the caller wipes its own).
    convenience init?(copying bytes: UnsafeRawBufferPointer) {
        self.init(count: bytes.count)
        if let source = bytes.baseAddress, bytes.count > 0 { base.copyMemory(from: source, byteCount: bytes.count) }
    }

    deinit { sodium_free(base) }

    func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try body(UnsafeRawBufferPointer(start: base, count: count))
    }

    func withUnsafeMutableBytes<R>(_ body: (UnsafeMutableRawBufferPointer) throws -> R) rethrows -> R {
        try body(UnsafeMutableRawBufferPointer(start: base, count: count))
    }

    func wipe() { sodium_memzero(base, max(count, 1)) }
}

struct SodiumSecretMemoryAllocator: SecretMemoryAllocator {
    func allocate(count: Int) -> (any SecretMemory)? { SodiumSecretMemory(count: count) }
}

extension SecretKey {
    /// A copy of `bytes` in libsodium's guarded memory (tests, the fuzz target, the UAPI parser).
    static func sodium(_ bytes: [UInt8]) -> SecretKey? {
        guard let memory = bytes.withUnsafeBytes({ SodiumSecretMemory(copying: $0) }) else { return nil }
        return SecretKey(memory: memory)
    }
}
