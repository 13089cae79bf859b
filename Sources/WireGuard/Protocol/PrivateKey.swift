import TunnelgateSettings

/// A static or ephemeral X25519 private key with its public key. A secret: `description`,
/// `debugDescription` and reflection (`dump`) print "(private key)", never the bytes.
///
/// The 32 bytes are in `memory`, never in the value: every copy of a PrivateKey shares that memory,
/// and it is the very memory the configuration's key was decoded into (`init(_: SecretKey)`), so a
/// running device holds exactly one copy of its private key. Keys made here (`generate()`, an
/// ephemeral key per handshake) live in libsodium's guarded memory. `base64` and `hex` make Strings
/// of the secret: for tests, never on the device's path.
public struct PrivateKey: Sendable, Equatable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// Where the 32 secret bytes live.
    let memory: any SecretMemory
    /// The matching public key.
    public let publicKey: WireGuardKey

    /// The key in `memory` (exactly 32 bytes), used in place: not copied. X25519 clamps it as it
    /// uses it.
    public init?(memory: any SecretMemory) {
        guard memory.count == WireGuardCrypto.keyLength,
              let publicKey = memory.withUnsafeBytes({ WireGuardKey(WireGuardCrypto.publicKey(for: $0)) })
        else { return nil }
        self.memory = memory
        self.publicKey = publicKey
    }

    /// The configuration's key, in its own memory (shared, not copied).
    public init?(_ key: SecretKey) {
        self.init(memory: key.memory)
    }

    /// A copy of `bytes` in guarded memory (tests; the caller's array is its own to wipe). Nil
    /// unless 32 bytes.
    public init?(bytes: [UInt8]) {
        guard bytes.count == WireGuardCrypto.keyLength,
              let memory = bytes.withUnsafeBytes({ SodiumSecretMemory(copying: $0) }) else { return nil }
        self.init(memory: memory)
    }

    /// Parses the canonical 44-character base64 form (`wg genkey`'s output). Tests.
    public init?(base64: String) {
        guard let bytes = KeyEncoding.decodeBase64(base64) else { return nil }
        self.init(bytes: bytes)
    }

    /// Parses 64 hex digits. Tests.
    public init?(hex: String) {
        guard let bytes = KeyEncoding.decodeHex(hex) else { return nil }
        self.init(bytes: bytes)
    }

    /// A new random, clamped key, made in guarded memory.
    public static func generate() -> PrivateKey {
        guard let memory = SodiumSecretMemory(count: WireGuardCrypto.keyLength) else {
            preconditionFailure("sodium_malloc failed: no memory for a key")
        }
        memory.withUnsafeMutableBytes { WireGuardCrypto.generatePrivateKey(into: $0) }
        return PrivateKey(memory: memory)!
    }

    /// Calls `body` with the 32 bytes; the pointer is valid only inside `body`.
    public func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try memory.withUnsafeBytes(body)
    }

    /// The 44-character base64 form. Secret: a String that cannot be wiped (tests).
    public var base64: String { withUnsafeBytes { Base64Key.encode(Array($0)) } }
    /// 64 lowercase hex digits. Secret: a String that cannot be wiped (tests).
    public var hex: String { withUnsafeBytes { KeyEncoding.encodeHex(Array($0)) } }

    /// DH(self, publicKey): X25519, refusing the all-zero result.
    public func sharedSecret(with publicKey: WireGuardKey) throws(WireGuardProtocolError) -> [UInt8] {
        try sharedSecret(with: publicKey.bytes)
    }

    /// DH with raw public bytes (a peer's ephemeral from the wire).
    func sharedSecret(with publicKey: [UInt8]) throws(WireGuardProtocolError) -> [UInt8] {
        let result: Result<[UInt8], WireGuardProtocolError> = withUnsafeBytes { key in
            do throws(WireGuardProtocolError) { return .success(try WireGuardCrypto.x25519(privateKey: key, publicKey: publicKey)) }
            catch { return .failure(error) }
        }
        return try result.get()
    }

    /// Constant-time comparison.
    public static func == (a: PrivateKey, b: PrivateKey) -> Bool {
        a.withUnsafeBytes { pa in b.withUnsafeBytes { pb in Sodium.constantTimeEqual(pa, pb) } }
    }

    public var description: String { "(private key)" }
    public var debugDescription: String { "(private key)" }
    public var customMirror: Mirror { Mirror(self, children: [:]) }
}
