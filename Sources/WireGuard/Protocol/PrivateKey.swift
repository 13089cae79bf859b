import FoundationEssentials

/// A static or ephemeral X25519 private key with its public key. A secret: `description`,
/// `debugDescription` and reflection (`dump`) print "(private key)", never the bytes; `bytes`,
/// `hex` and `base64` exist for the configuration and UAPI code that must write the key out.
///
/// As a value type it may be copied by the compiler; copies are not wiped.
public struct PrivateKey: Sendable, Equatable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// The 32 secret bytes.
    public let bytes: [UInt8]
    /// The matching public key.
    public let publicKey: WireGuardKey

    /// Nil unless `bytes` holds exactly 32 bytes. The bytes are used as given; X25519 clamps them.
    public init?(bytes: [UInt8]) {
        guard bytes.count == WireGuardCrypto.keyLength,
              let publicKey = WireGuardKey(WireGuardCrypto.publicKey(for: bytes))
        else { return nil }
        self.bytes = bytes
        self.publicKey = publicKey
    }

    /// Parses the canonical 44-character base64 form (`wg genkey`'s output).
    public init?(base64: String) {
        guard let bytes = KeyEncoding.decodeBase64(base64) else { return nil }
        self.init(bytes: bytes)
    }

    /// Parses 64 hex digits (the UAPI's form).
    public init?(hex: String) {
        guard let bytes = KeyEncoding.decodeHex(hex) else { return nil }
        self.init(bytes: bytes)
    }

    /// A new random, clamped key.
    public static func generate() -> PrivateKey {
        PrivateKey(bytes: WireGuardCrypto.generatePrivateKey())!
    }

    /// The 44-character base64 form. Secret.
    public var base64: String { Data(bytes).base64EncodedString() }
    /// 64 lowercase hex digits. Secret.
    public var hex: String { KeyEncoding.encodeHex(bytes) }

    /// DH(self, publicKey): X25519, refusing the all-zero result.
    public func sharedSecret(with publicKey: WireGuardKey) throws(WireGuardProtocolError) -> [UInt8] {
        try WireGuardCrypto.x25519(privateKey: bytes, publicKey: publicKey.bytes)
    }

    /// DH with raw public bytes (a peer's ephemeral from the wire).
    func sharedSecret(with publicKey: [UInt8]) throws(WireGuardProtocolError) -> [UInt8] {
        try WireGuardCrypto.x25519(privateKey: bytes, publicKey: publicKey)
    }

    /// Constant-time comparison.
    public static func == (a: PrivateKey, b: PrivateKey) -> Bool {
        Sodium.constantTimeEqual(a.bytes, b.bytes)
    }

    public var description: String { "(private key)" }
    public var debugDescription: String { "(private key)" }
    public var customMirror: Mirror { Mirror(self, children: [:]) }
}
