/// What the initiator keeps between sending an initiation and consuming the response: the
/// Noise chaining key and hash after the initiation, and the ephemeral private key.
/// Secret: its description shows only the indices.
public struct InitiatorState: Sendable, CustomStringConvertible, CustomReflectable {
    /// The index we put in the initiation; the response's receiver index must equal it.
    public let senderIndex: UInt32
    /// The responder's static public key.
    public let remoteStatic: WireGuardKey
    /// The initiation's mac1: a cookie reply to the initiation is bound to it (`lastMAC1`).
    public let mac1: [UInt8]
    /// C_i after the initiation.
    let chainingKey: [UInt8]
    /// H_i after the initiation.
    let hash: [UInt8]
    /// E_priv_i.
    let ephemeral: PrivateKey

    public var description: String { "InitiatorState(senderIndex: \(senderIndex))" }
    public var customMirror: Mirror { Mirror(self, children: ["senderIndex": senderIndex]) }
}
