/// An initiation the responder authenticated: who sent it, when, and the Noise state needed to
/// answer it with `Handshake.createResponse`. The caller looks the peer up by `remoteStatic`,
/// refuses a `timestamp` not later than the last one it accepted from that peer (replayed
/// initiations) and only then answers. Secret: its description shows only public fields.
public struct ReceivedInitiation: Sendable, CustomStringConvertible, CustomReflectable {
    /// The initiator's static public key, decrypted from the message.
    public let remoteStatic: WireGuardKey
    /// The initiator's TAI64N timestamp (12 bytes).
    public let timestamp: [UInt8]
    /// The initiator's index: the receiver index of our response and of our transport messages.
    public let senderIndex: UInt32
    /// The initiation's mac1 (what a cookie reply to it would be bound to).
    public let mac1: [UInt8]
    /// E_pub_i.
    let remoteEphemeral: [UInt8]
    /// C_r after the initiation.
    let chainingKey: [UInt8]
    /// H_r after the initiation.
    let hash: [UInt8]

    public var description: String { "ReceivedInitiation(remoteStatic: \(remoteStatic), senderIndex: \(senderIndex))" }
    public var customMirror: Mirror {
        Mirror(self, children: ["remoteStatic": remoteStatic, "senderIndex": senderIndex])
    }
}
