/// Packet counters of the tunnel's packet flow.
public struct PacketCounters: Codable, Sendable, Equatable {
    /// Packets and bytes read from the TUN (sent by the host into the tunnel).
    public var packetsFromHost: UInt64 = 0
    public var bytesFromHost: UInt64 = 0
    /// Packets and bytes written to the TUN (delivered to the host).
    public var packetsToHost: UInt64 = 0
    public var bytesToHost: UInt64 = 0
    /// Drops by reason.
    public var droppedNoRuntime: UInt64 = 0
    public var droppedNotIP: UInt64 = 0
    public var droppedOverMTU: UInt64 = 0
    /// Packets from the runtime that were not a complete IP packet (bad version, truncated, length mismatch).
    public var droppedMalformed: UInt64 = 0
    /// Packets the TUN did not take (its queue full) or the runtime refused (INVALID_ARGUMENT, FAILED).
    public var droppedWriteFailed: UInt64 = 0
    public var droppedRefused: UInt64 = 0
    /// Callback path on a TUN with TCP segmentation offload: super-packets read (each cut into the
    /// segments counted in packetsFromHost), and reads with an offload the host cannot cut (dropped).
    /// nil without offloads.
    public var superPacketsFromHost: UInt64?
    public var droppedOffload: UInt64?
    /// Backpressure: QUEUE_FULL answers, and packets sent in again after one (never dropped for it).
    public var queueFull: UInt64 = 0
    public var retries: UInt64 = 0
    /// Callback path: hand-offs of packets read from the TUN to the runtime (one packet_in_batch call, or
    /// a run of packet_in calls when the runtime has none), and the wall time the loop spent inside them
    /// (copying, or sealing and sending when the runtime does that on the caller's thread): the part of
    /// the loop's CPU that is the runtime's. nil without such a runtime (and in older state files).
    public var handOffs: UInt64?
    public var handOffSeconds: Double?
    /// Repairs after others changed the tunnel's kernel state, and the last one.
    public var repairs: UInt64 = 0
    public var lastRepair: String?
    /// Set when repairs could not win and the tunnel failed closed (Monitor): why. Its block-all table
    /// stays until `tunnelgate down`.
    public var failedClosed: String?

    public init() {}
}

