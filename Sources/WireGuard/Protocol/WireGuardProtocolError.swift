/// Why a protocol operation refused its input. Descriptions name the message and the step that
/// failed, never key material.
public enum WireGuardProtocolError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The datagram is not a well-formed message of the expected type (type byte, reserved bytes or length).
    case malformedMessage(expected: MessageType, length: Int)
    /// MAC1 does not match: not keyed to our static public key, or altered.
    case invalidMAC1(MessageType)
    /// A response or cookie reply names a receiver index that is not ours.
    case receiverIndexMismatch(expected: UInt32, received: UInt32)
    /// An AEAD field failed to authenticate: the handshake step named by `field` (e.g. "static",
    /// "timestamp", "empty", "cookie") was not made with the keys we expect.
    case authenticationFailed(field: String)
    /// An X25519 result was all zeros: the peer's public key is a low-order point.
    case weakPublicKey
    /// A key, pre-shared key, cookie, MAC, timestamp or nonce argument has the wrong length.
    case invalidLength(what: String, expected: Int, actual: Int)

    public var description: String {
        switch self {
        case let .malformedMessage(expected, length):
            return "malformed \(expected) message (\(length) bytes)"
        case let .invalidMAC1(type):
            return "\(type) message has an invalid mac1"
        case let .receiverIndexMismatch(expected, received):
            return "message is for receiver index \(received), expected \(expected)"
        case let .authenticationFailed(field):
            return "handshake field '\(field)' failed to authenticate"
        case .weakPublicKey:
            return "X25519 produced the all-zero value (low-order public key)"
        case let .invalidLength(what, expected, actual):
            return "\(what) must be \(expected) bytes, not \(actual)"
        }
    }
}
