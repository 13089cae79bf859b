import CTransportAEAD

/// One session's transport AEAD contexts (ChaCha20-Poly1305 through libcrypto, CTransportAEAD): one
/// for sealing under T_send, one for opening under T_recv, made once per handshake so that the packet
/// path only sets each message's nonce.
///
/// The contexts hold libcrypto's copy of the two keys for the session's life, in its heap (as the
/// kernel's and wireguard-go's sessions hold theirs); `wipe()` frees them, and libcrypto cleanses the
/// key first. The plane that runs the device is not dumpable and its memory unreadable to others.
/// Shared by the copies of a `Keypair` (a reference): wiping one wipes the session for all of them.
/// Used by the device thread only.
public final class TransportCipher: @unchecked Sendable {
    private var sealing: OpaquePointer?
    private var opening: OpaquePointer?

    /// Contexts for `sendKey` and `receiveKey`; a cipher that seals and opens nothing if libcrypto
    /// refused either (never seen: it only fails without memory).
    init(sendKey: SessionKey, receiveKey: SessionKey) {
        sealing = sendKey.withKeyPointer { tg_transport_aead_new($0, 1) }
        opening = receiveKey.withKeyPointer { tg_transport_aead_new($0, 0) }
        if sealing == nil || opening == nil { wipe() }
    }

    /// A cipher with no keys: seals and opens nothing.
    init() {}

    deinit { wipe() }

    /// Whether the contexts are gone (wiped, or never made).
    public var isWiped: Bool { sealing == nil }

    /// Frees both contexts (libcrypto cleanses the keys); later seals and opens fail.
    public func wipe() {
        tg_transport_aead_free(sealing)
        tg_transport_aead_free(opening)
        sealing = nil
        opening = nil
    }

    /// Seals the `length` bytes at `buffer` in place under `counter`, the tag after them: length + 16,
    /// or nil once wiped.
    @inline(__always)
    func seal(counter: UInt64, _ buffer: UnsafeMutableRawPointer, length: Int) -> Int? {
        guard let sealing else { return nil }
        let n = tg_transport_aead_seal(sealing, counter, buffer.assumingMemoryBound(to: UInt8.self), length)
        return n == 0 ? nil : n
    }

    /// Opens `length` bytes (ciphertext and tag) at `buffer` in place under `counter`: the plaintext's
    /// length, or nil when it does not authenticate (or once wiped).
    @inline(__always)
    func open(counter: UInt64, _ buffer: UnsafeMutableRawPointer, length: Int) -> Int? {
        guard let opening else { return nil }
        let n = tg_transport_aead_open(opening, counter, buffer.assumingMemoryBound(to: UInt8.self), length)
        return n < 0 ? nil : n
    }
}
