/// The four message types of whitepaper section 5.4, the first byte of every datagram.
public enum MessageType: UInt8, Sendable, CustomStringConvertible {
    case initiation = 1
    case response = 2
    case cookieReply = 3
    case transport = 4

    /// Handshake initiation: type, reserved, sender, ephemeral, static+tag, timestamp+tag, mac1, mac2.
    public static let initiationLength = 148
    /// Handshake response: type, reserved, sender, receiver, ephemeral, empty+tag, mac1, mac2.
    public static let responseLength = 92
    /// Cookie reply: type, reserved, receiver, 24-byte nonce, cookie+tag.
    public static let cookieReplyLength = 64
    /// Transport data header: type, reserved, receiver, 64-bit counter.
    public static let transportHeaderLength = 16
    /// The Poly1305 tag that follows every encrypted field.
    public static let tagLength = 16
    /// The shortest transport message: a keepalive (header and the tag of an empty packet).
    public static let transportMinimumLength = transportHeaderLength + tagLength

    public var description: String {
        switch self {
        case .initiation: return "handshake initiation"
        case .response: return "handshake response"
        case .cookieReply: return "cookie reply"
        case .transport: return "transport data"
        }
    }

    /// The type of `datagram` when its type byte is known, its three reserved bytes are zero and its
    /// length is exact (at least 32 bytes for transport data); nil for anything else. Reads at most
    /// the first four bytes and never traps, whatever the input.
    public static func classify(_ datagram: UnsafeRawBufferPointer) -> MessageType? {
        guard datagram.count >= 4,
              let type = MessageType(rawValue: datagram[0]),
              datagram[1] == 0, datagram[2] == 0, datagram[3] == 0
        else { return nil }
        switch type {
        case .initiation: return datagram.count == initiationLength ? type : nil
        case .response: return datagram.count == responseLength ? type : nil
        case .cookieReply: return datagram.count == cookieReplyLength ? type : nil
        case .transport: return datagram.count >= transportMinimumLength ? type : nil
        }
    }

    /// `classify` over an array.
    public static func classify(_ datagram: [UInt8]) -> MessageType? {
        datagram.withUnsafeBytes { classify($0) }
    }

    /// The sender index of a well-formed initiation or response; nil for anything else.
    public static func senderIndex(in datagram: UnsafeRawBufferPointer) -> UInt32? {
        switch classify(datagram) {
        case .initiation, .response: return datagram.littleEndianUInt32(at: 4)
        default: return nil
        }
    }

    /// The receiver index of a well-formed response, cookie reply or transport message, the index
    /// the device chose and looks its handshake or keypair up by; nil for anything else.
    public static func receiverIndex(in datagram: UnsafeRawBufferPointer) -> UInt32? {
        switch classify(datagram) {
        case .response: return datagram.littleEndianUInt32(at: 8)
        case .cookieReply, .transport: return datagram.littleEndianUInt32(at: 4)
        default: return nil
        }
    }

    /// The 16-byte mac1 of a well-formed initiation or response (what a cookie reply to it is bound
    /// to); nil for anything else.
    public static func mac1(of datagram: UnsafeRawBufferPointer) -> [UInt8]? {
        guard let type = classify(datagram), type == .initiation || type == .response else { return nil }
        let offset = datagram.count - 2 * WireGuardCrypto.macLength
        return Array(datagram[offset..<offset + WireGuardCrypto.macLength])
    }
}

extension UnsafeRawBufferPointer {
    /// The little-endian 32-bit integer at `offset`; the caller has checked the length.
    @inline(__always)
    func littleEndianUInt32(at offset: Int) -> UInt32 {
        UInt32(littleEndian: loadUnaligned(fromByteOffset: offset, as: UInt32.self))
    }

    @inline(__always)
    func littleEndianUInt64(at offset: Int) -> UInt64 {
        UInt64(littleEndian: loadUnaligned(fromByteOffset: offset, as: UInt64.self))
    }
}

extension UnsafeMutableRawPointer {
    @inline(__always)
    func storeLittleEndian(_ value: UInt32, at offset: Int) {
        storeBytes(of: value.littleEndian, toByteOffset: offset, as: UInt32.self)
    }

    @inline(__always)
    func storeLittleEndian(_ value: UInt64, at offset: Int) {
        storeBytes(of: value.littleEndian, toByteOffset: offset, as: UInt64.self)
    }
}
