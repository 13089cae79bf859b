/// Transport data messages (whitepaper 5.4.6): type 4, three zero bytes, the receiver's index,
/// the 64-bit little-endian counter, then the padded packet sealed with ChaCha20-Poly1305 under
/// the counter as nonce and no additional data, through the keypair's `TransportCipher` (libcrypto).
///
/// Both functions work in the caller's buffers and allocate nothing. What changes per packet
/// (the send counter, the replay window, timers) is the device's.
public enum Transport {
    /// Header plus tag: how much longer a transport message is than its padded packet.
    public static let overhead = MessageType.transportHeaderLength + MessageType.tagLength
    /// Plaintexts are zero-padded to a multiple of this.
    public static let paddingMultiple = 16

    /// The padded length of a `packetLength`-byte packet when the message may be at most
    /// `capacity` bytes: rounded up to a multiple of 16 but never past `capacity - overhead`.
    /// Nil when even the unpadded packet does not fit.
    public static func paddedLength(packetLength: Int, capacity: Int) -> Int? {
        guard packetLength >= 0, capacity - overhead >= packetLength else { return nil }
        let rounded = (packetLength + paddingMultiple - 1) / paddingMultiple * paddingMultiple
        return min(rounded, capacity - overhead)
    }

    /// Writes the transport message carrying `packet` (an IP packet, or empty for a keepalive)
    /// into `out`, whose size is the most the caller will send (the MTU plus `overhead`), and
    /// returns its length: 16 + padded length + 16.
    ///
    /// `packet` may lie anywhere, including already in place at `out.baseAddress + 16` (read the
    /// TUN there to save the copy); it is moved there if not, zero-padded and encrypted in place.
    /// Returns nil, writing nothing, when the message would not fit in `out` or `counter` is not
    /// below `rejectAfterMessages` (the device stops sending with a keypair long before that).
    public static func encodeTransport(keypair: Keypair, counter: UInt64, packet: UnsafeRawBufferPointer,
                                       into out: UnsafeMutableRawBufferPointer) -> Int? {
        guard let padded = stageTransport(keypair: keypair, counter: counter, packet: packet, into: out),
              let sealed = keypair.cipher.seal(counter: counter, out.baseAddress! + MessageType.transportHeaderLength, length: padded)
        else { return nil }
        return MessageType.transportHeaderLength + sealed
    }

    /// `encodeTransport` without the sealing: writes the header and the zero-padded packet into `out`
    /// and returns the padded length; the caller seals `padded` bytes at `out + 16` under `counter`
    /// (the message is then 16 + padded + 16 bytes) before anything sends it. Nil as for `encodeTransport`.
    public static func stageTransport(keypair: Keypair, counter: UInt64, packet: UnsafeRawBufferPointer,
                                      into out: UnsafeMutableRawBufferPointer) -> Int? {
        guard counter < WireGuardProtocol.rejectAfterMessages,
              let padded = paddedLength(packetLength: packet.count, capacity: out.count),
              let base = out.baseAddress
        else { return nil }
        let payload = base + MessageType.transportHeaderLength
        if packet.count > 0, let source = packet.baseAddress, source != UnsafeRawPointer(payload) {
            payload.copyMemory(from: source, byteCount: packet.count) // memmove: overlap is fine
        }
        _ = (payload + packet.count).initializeMemory(as: UInt8.self, repeating: 0, count: padded - packet.count)

        base.storeBytes(of: MessageType.transport.rawValue, as: UInt8.self)
        base.storeBytes(of: 0, toByteOffset: 1, as: UInt8.self)
        base.storeBytes(of: 0, toByteOffset: 2, as: UInt8.self)
        base.storeBytes(of: 0, toByteOffset: 3, as: UInt8.self)
        base.storeLittleEndian(keypair.remoteIndex, at: 4)
        base.storeLittleEndian(counter, at: 8)
        return padded
    }

    /// Authenticates and decrypts, in place, the transport message `datagram` received for
    /// `keypair` (its receiver index must be `keypair.localIndex`). Returns the counter and where
    /// the plaintext now lies in `datagram`, or nil when the datagram is not a transport message for
    /// this keypair, its counter is not below `rejectAfterMessages`, or it does not authenticate.
    ///
    /// The plaintext still carries its padding: the device strips it by the inner IP header's
    /// length. An empty plaintext is a keepalive. The device then checks and updates the replay
    /// window with the counter (`ReplayWindow.wouldAccept` may also be checked before, with
    /// `MessageType.receiverIndex` and the counter at bytes 8..<16, to skip decrypting replays).
    public static func decodeTransport(keypair: Keypair, datagram: UnsafeMutableRawBufferPointer)
        -> (counter: UInt64, plaintext: Range<Int>)? {
        let readable = UnsafeRawBufferPointer(datagram)
        guard MessageType.classify(readable) == .transport,
              readable.littleEndianUInt32(at: 4) == keypair.localIndex
        else { return nil }
        let counter = readable.littleEndianUInt64(at: 8)
        guard counter < WireGuardProtocol.rejectAfterMessages, let base = datagram.baseAddress else { return nil }
        let payload = base + MessageType.transportHeaderLength
        guard let length = keypair.cipher.open(counter: counter, payload, length: datagram.count - MessageType.transportHeaderLength)
        else { return nil }
        return (counter, MessageType.transportHeaderLength..<MessageType.transportHeaderLength + length)
    }

    /// The counter of a transport message, for a replay check before decrypting; nil if `datagram`
    /// is not a well-formed transport message.
    public static func counter(of datagram: UnsafeRawBufferPointer) -> UInt64? {
        guard MessageType.classify(datagram) == .transport else { return nil }
        return datagram.littleEndianUInt64(at: 8)
    }
}
