/// The transport keys and indices one completed handshake yields (whitepaper 5.4.5). The device
/// owns what changes per packet and over time (send counter, replay window, creation time).
///
/// The keys live inline in fixed storage (`SessionKey`); the packet path seals and opens through the
/// session's `TransportCipher`, made from them once. `zero()` wipes the keys in place and the
/// cipher's contexts once the keypair expires; copies the compiler made of the key bytes are not wiped.
public struct Keypair: Sendable {
    /// T_send: encrypts what we send.
    public private(set) var sendKey: SessionKey
    /// T_recv: decrypts what we receive.
    public private(set) var receiveKey: SessionKey
    /// The index we chose: the receiver index of the transport messages we receive.
    public let localIndex: UInt32
    /// The index the peer chose: the receiver index we write into our transport messages.
    public let remoteIndex: UInt32
    /// True when we sent the initiation. An initiator may send as soon as it has the keypair; a
    /// responder waits for the initiator's first transport message (whitepaper 5.4.5, 6.1).
    public let isInitiator: Bool
    /// The transport AEAD's contexts under these keys (libcrypto), shared by this value's copies.
    public private(set) var cipher: TransportCipher

    /// The keypair from the final chaining key C: (T_send_i = T_recv_r, T_recv_i = T_send_r) = KDF2(C, ε).
    init(chainingKey: [UInt8], localIndex: UInt32, remoteIndex: UInt32, isInitiator: Bool) {
        var (first, second) = WireGuardCrypto.kdf2(key: chainingKey, input: [])
        defer {
            Sodium.wipe(&first)
            Sodium.wipe(&second)
        }
        sendKey = SessionKey(isInitiator ? first : second)
        receiveKey = SessionKey(isInitiator ? second : first)
        self.localIndex = localIndex
        self.remoteIndex = remoteIndex
        self.isInitiator = isInitiator
        cipher = TransportCipher(sendKey: sendKey, receiveKey: receiveKey)
    }

    /// True once `zero()` wiped both keys.
    public var isZeroed: Bool { sendKey.isZero && receiveKey.isZero }

    /// Wipes both keys in place (`sodium_memzero`) and the session's AEAD contexts, which every copy
    /// of this keypair shares: none of them seals or opens again.
    public mutating func zero() {
        sendKey.zero()
        receiveKey.zero()
        cipher.wipe()
    }

    /// A copy with both keys wiped and no AEAD contexts (the indices and role kept, for bookkeeping);
    /// this keypair keeps working.
    public func zeroed() -> Keypair {
        var copy = self
        copy.cipher = TransportCipher()
        copy.sendKey.zero()
        copy.receiveKey.zero()
        return copy
    }
}
