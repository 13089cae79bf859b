/// Memory that holds secret bytes. This module has no libc and cannot make such memory itself: the
/// system layer provides it (LinuxSystem's `SecureBytes`: a mapping of its own, locked, excluded from
/// core dumps, zeroed with explicit_bzero and unmapped on release), through a `SecretMemoryAllocator`
/// the caller passes to the parsers. The bytes are reached only inside the closures, never as an Array.
public protocol SecretMemory: AnyObject, Sendable {
    /// How many bytes it holds.
    var count: Int { get }
    /// Calls `body` with the bytes; the pointer is valid only inside `body`.
    func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R
    /// Calls `body` with the bytes to fill or change them.
    func withUnsafeMutableBytes<R>(_ body: (UnsafeMutableRawBufferPointer) throws -> R) rethrows -> R
    /// Zeroes every byte now.
    func wipe()
}

/// Where parsers get memory for what they decode (a key out of a file's text).
public protocol SecretMemoryAllocator: Sendable {
    /// `count` zero bytes, or nil when none can be had (the parser then reports the problem).
    func allocate(count: Int) -> (any SecretMemory)?
}

/// Heap memory that zeroes its bytes when released, in plain Swift. It is neither locked nor excluded
/// from core dumps, and the zeroing is not guaranteed to survive the optimiser: for tests, and for keys
/// that were in a Swift String already (`WgQuickConfig.parse(_:name:)`). The command and the provider
/// host pass LinuxSystem's secure memory instead.
public final class UnprotectedSecretMemory: SecretMemory, @unchecked Sendable {
    // @unchecked Sendable: the buffer never moves; its bytes are written before the value is shared.
    public let count: Int
    private let base: UnsafeMutableRawPointer

    public init(count: Int) {
        self.count = count
        base = UnsafeMutableRawPointer.allocate(byteCount: max(count, 1), alignment: 16)
        base.initializeMemory(as: UInt8.self, repeating: 0, count: max(count, 1))
    }

    deinit {
        wipe()
        base.deallocate()
    }

    public func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try body(UnsafeRawBufferPointer(start: base, count: count))
    }

    public func withUnsafeMutableBytes<R>(_ body: (UnsafeMutableRawBufferPointer) throws -> R) rethrows -> R {
        try body(UnsafeMutableRawBufferPointer(start: base, count: count))
    }

    public func wipe() {
        base.initializeMemory(as: UInt8.self, repeating: 0, count: max(count, 1))
    }
}

/// Allocates `UnprotectedSecretMemory` (tests, and readers that never read a secret).
public struct UnprotectedSecretMemoryAllocator: SecretMemoryAllocator {
    public init() {}
    public func allocate(count: Int) -> (any SecretMemory)? { UnprotectedSecretMemory(count: count) }
}

/// 32 bytes of secret key material (a WireGuard private or preshared key).
///
/// The bytes are in `memory`, never in the value: copies of a SecretKey share that one memory, and
/// whoever uses the key next (the WireGuard device) takes the same memory rather than a copy of the
/// bytes. It never shows itself: `description`, `debugDescription` and its mirror (`dump`, the default
/// description of the settings holding it) say only that a key is there.
public struct SecretKey: Sendable, Equatable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    public static let byteCount = 32

    /// Where the 32 bytes live (in the command: LinuxSystem's SecureBytes).
    public let memory: any SecretMemory

    /// nil unless `memory` holds exactly 32 bytes. Takes the memory itself, not a copy.
    public init?(memory: any SecretMemory) {
        guard memory.count == Self.byteCount else { return nil }
        self.memory = memory
    }

    /// A copy of `bytes` in unprotected memory (tests); nil unless 32 bytes.
    public init?(bytes: [UInt8]) {
        guard bytes.count == Self.byteCount else { return nil }
        let memory = UnprotectedSecretMemory(count: Self.byteCount)
        memory.withUnsafeMutableBytes { $0.copyBytes(from: bytes) }
        self.memory = memory
    }

    /// A key as `wg genkey` and `wg genpsk` print it: 44 characters of standard base64 ending in one
    /// `=`. nil for anything else. The text is a String already, so the key goes to unprotected memory
    /// (tests); the parsers decode from the file's bytes into secure memory (`decode(base64:using:)`).
    public init?(base64 text: some StringProtocol) {
        let utf8 = Array(text.utf8)
        guard let key = utf8.withUnsafeBytes({ Self.decode(base64: $0, using: UnprotectedSecretMemoryAllocator()) }),
              case .key(let k) = key else { return nil }
        self = k
    }

    /// What decoding key text gave.
    public enum Decoded {
        case key(SecretKey)
        /// Not a base64 32-byte key.
        case notAKey
        /// The allocator had no memory.
        case noMemory
    }

    /// Decodes the base64 text in `text` (ASCII spaces and tabs anywhere in it are skipped, as wg(8)
    /// removes white space from values) straight into memory from `allocator`: no other copy of the
    /// key, or of its text, is made. nil when `text` is empty.
    public static func decode(base64 text: UnsafeRawBufferPointer, using allocator: some SecretMemoryAllocator) -> Decoded? {
        guard text.contains(where: { $0 != 0x20 && $0 != 0x09 }) else { return nil }
        guard let memory = allocator.allocate(count: byteCount) else { return .noMemory }
        let ok = memory.withUnsafeMutableBytes { Base64Key.decode(text, into: $0) }
        guard ok, let key = SecretKey(memory: memory) else {
            memory.wipe()
            return .notAKey
        }
        return .key(key)
    }

    /// The 32 bytes, for the handshake; do not copy them where they could outlive the call.
    public func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try memory.withUnsafeBytes(body)
    }

    /// Compares in time independent of where the keys differ.
    public static func == (a: SecretKey, b: SecretKey) -> Bool {
        a.withUnsafeBytes { pa in
            b.withUnsafeBytes { pb in
                var difference: UInt8 = 0
                for i in 0..<byteCount { difference |= pa[i] ^ pb[i] }
                return difference == 0
            }
        }
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

    /// The 32 bytes of `text`, or nil when it is not such a key. For public keys: the result is an
    /// Array (secret keys are decoded with `decode(_:into:)`).
    public static func decode(_ text: some StringProtocol) -> [UInt8]? {
        guard !text.utf8.contains(0x20), !text.utf8.contains(0x09) else { return nil }
        var out = [UInt8](repeating: 0, count: SecretKey.byteCount)
        let ok = Array(text.utf8).withUnsafeBytes { t in out.withUnsafeMutableBytes { decode(t, into: $0) } }
        return ok ? out : nil
    }

    /// Decodes `text` (ASCII spaces and tabs skipped) into the 32 bytes at `out`, byte by byte: nothing
    /// else holds the key or its text. False when it is not such a key (then `out` holds partial bits:
    /// the caller wipes it).
    public static func decode(_ text: UnsafeRawBufferPointer, into out: UnsafeMutableRawBufferPointer) -> Bool {
        guard out.count == SecretKey.byteCount else { return false }
        var digits = 0, written = 0
        var accumulator: UInt32 = 0, bits = 0
        var sawPadding = false
        for c in text {
            if c == 0x20 || c == 0x09 { continue }
            if sawPadding { return false }  // nothing after the '='
            digits += 1
            if digits == 44 {
                guard c == UInt8(ascii: "=") else { return false }
                sawPadding = true
                continue
            }
            guard let v = value(c) else { return false }
            accumulator = accumulator << 6 | UInt32(v)
            bits += 6
            if bits >= 8 {
                bits -= 8
                guard written < SecretKey.byteCount else { return false }
                out[written] = UInt8(truncatingIfNeeded: accumulator >> UInt32(bits))
                written += 1
            }
        }
        // 43 digits carry 258 bits: the last 2 must be zero.
        let ok = sawPadding && written == SecretKey.byteCount && accumulator & 0b11 == 0
        accumulator = 0
        return ok
    }

    /// The standard base64 text of 32 bytes (`decode`'s inverse). For public keys.
    public static func encode(_ bytes: [UInt8]) -> String {
        precondition(bytes.count == SecretKey.byteCount)
        return Base64.encode(bytes)
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
