import CSodium

/// A 32-byte ChaCha20-Poly1305 transport key held inline (no heap storage), so the packet path
/// reaches it by pointer without allocating or reference counting. Its description never shows
/// the bytes.
public struct SessionKey: Sendable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    private var storage: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)

    /// `bytes` must hold exactly 32 bytes.
    init(_ bytes: [UInt8]) {
        precondition(bytes.count == WireGuardCrypto.keyLength, "a session key is 32 bytes")
        withUnsafeMutableBytes(of: &storage) { raw in raw.copyBytes(from: bytes) }
    }

    /// A copy of the key bytes (for tests and diagnostics that must compare keys).
    public var bytes: [UInt8] { withUnsafeBytes { Array($0) } }

    /// Calls `body` with the 32 key bytes; the pointer is valid only inside `body`.
    @inline(__always)
    public func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try Swift.withUnsafeBytes(of: storage, body)
    }

    /// Calls `body` with the key as the `UnsafePointer<UInt8>` that `WireGuardCrypto.seal/open` take.
    @inline(__always)
    public func withKeyPointer<R>(_ body: (UnsafePointer<UInt8>) throws -> R) rethrows -> R {
        try withUnsafeBytes { try body($0.baseAddress!.assumingMemoryBound(to: UInt8.self)) }
    }

    /// True once wiped (or if the key happens to be all zero, which a KDF output never is in practice).
    public var isZero: Bool { storage == (0, 0, 0, 0) }

    /// Overwrites the key with zeros (`sodium_memzero`).
    public mutating func zero() {
        withUnsafeMutableBytes(of: &storage) { raw in sodium_memzero(raw.baseAddress!, raw.count) }
    }

    public var description: String { "(session key)" }
    public var debugDescription: String { "(session key)" }
    public var customMirror: Mirror { Mirror(self, children: [:]) }
}
