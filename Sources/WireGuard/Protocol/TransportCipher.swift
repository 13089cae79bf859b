import CTransportAEAD

/// One session's transport AEAD contexts (ChaCha20-Poly1305 on libcrypto's primitives, CTransportAEAD): one
/// for sealing under T_send, one for opening under T_recv, made once per handshake so that the packet
/// path only sets each message's nonce.
///
/// The contexts hold one copy of each key for the session's life, in the heap (as the kernel's and
/// wireguard-go's sessions hold theirs); `wipe()` frees them, each key cleansed first. The plane that runs the device is not dumpable and its memory unreadable to others.
/// Shared by the copies of a `Keypair` (a reference): wiping one wipes the session for all of them.
///
/// A context is used by one thread at a time, so each direction has one per lane: lane 0 is the device
/// thread's, lane 1 its crypto worker's (`CryptoWorker`), which seals or opens another part of the same
/// batch at the same time. Made, wiped and freed by the device thread only, never while a worker runs.
public final class TransportCipher: @unchecked Sendable {
    /// Lanes: the device thread and its one crypto worker.
    static let lanes = 2
    private var sealing: (OpaquePointer?, OpaquePointer?)
    private var opening: (OpaquePointer?, OpaquePointer?)

    /// Contexts for `sendKey` and `receiveKey`; a cipher that seals and opens nothing if any could not
    /// be made (only without memory).
    init(sendKey: SessionKey, receiveKey: SessionKey) {
        sealing = sendKey.withKeyPointer { (tg_transport_aead_new($0, 1), tg_transport_aead_new($0, 1)) }
        opening = receiveKey.withKeyPointer { (tg_transport_aead_new($0, 0), tg_transport_aead_new($0, 0)) }
        if sealing.0 == nil || sealing.1 == nil || opening.0 == nil || opening.1 == nil { wipe() }
    }

    /// A cipher with no keys: seals and opens nothing.
    init() {}

    deinit { wipe() }

    /// Whether the contexts are gone (wiped, or never made).
    public var isWiped: Bool { sealing.0 == nil }

    /// Frees every context (each key cleansed first); later seals and opens fail.
    public func wipe() {
        tg_transport_aead_free(sealing.0)
        tg_transport_aead_free(sealing.1)
        tg_transport_aead_free(opening.0)
        tg_transport_aead_free(opening.1)
        sealing = (nil, nil)
        opening = (nil, nil)
    }

    /// Seals the `length` bytes at `buffer` in place under `counter`, the tag after them: length + 16,
    /// or nil once wiped. `lane` 0 on the device thread, 1 on its worker.
    @inline(__always)
    func seal(counter: UInt64, _ buffer: UnsafeMutableRawPointer, length: Int, lane: Int = 0) -> Int? {
        guard let context = lane == 0 ? sealing.0 : sealing.1 else { return nil }
        let n = tg_transport_aead_seal(context, counter, buffer.assumingMemoryBound(to: UInt8.self), length)
        return n == 0 ? nil : n
    }

    /// Opens `length` bytes (ciphertext and tag) at `buffer` in place under `counter`: the plaintext's
    /// length, or nil when it does not authenticate (or once wiped). `lane` as for `seal`.
    @inline(__always)
    func open(counter: UInt64, _ buffer: UnsafeMutableRawPointer, length: Int, lane: Int = 0) -> Int? {
        guard let context = lane == 0 ? opening.0 : opening.1 else { return nil }
        let n = tg_transport_aead_open(context, counter, buffer.assumingMemoryBound(to: UInt8.self), length)
        return n < 0 ? nil : n
    }
}
