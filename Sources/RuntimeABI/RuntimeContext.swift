import TunnelgateSettings

/// What a runtime is told of the tunnel it runs in, before it starts: all it may know of the engine's
/// plan, and nothing of the engine itself.
public struct RuntimeContext: Sendable, Equatable, Codable {
    /// The TUN's interface name.
    public var interfaceName: String
    /// The tunnel's MTU.
    public var mtu: Int
    /// The carrier endpoints, resolved once and pinned for the tunnel's life: a runtime given a host
    /// name sends to the address pinned here.
    public var carriers: [PinnedCarrier]
    /// The fwmark the runtime's carrier sockets must carry (SO_MARK) to be the tunnel's carrier identity,
    /// when the identity is a mark.
    public var carrierMark: UInt32?

    public init(interfaceName: String, mtu: Int, carriers: [PinnedCarrier] = [], carrierMark: UInt32? = nil) {
        self.interfaceName = interfaceName
        self.mtu = mtu
        self.carriers = carriers
        self.carrierMark = carrierMark
    }
}
