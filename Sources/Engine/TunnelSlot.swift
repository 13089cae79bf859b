import Netlink
import TunnelgateSettings

/// The routing resources one tunnel owns in its namespace, derived from a
/// small slot number so that tunnels of different names never collide:
/// a routing table, the fwmark its carrier sockets use, and a block of ten
/// rule priorities.
public struct TunnelSlot: Sendable, Hashable, Codable {
    public let index: Int

    public static let count = 64
    public static let tableBase: UInt32 = 7460
    public static let priorityBase: UInt32 = 7400

    public init(index: Int) {
        precondition((0..<Self.count).contains(index))
        self.index = index
    }

    /// Table T: included routes `dev TUN`, excluded routes and carriers `throw`.
    public var table: UInt32 { Self.tableBase + UInt32(index) }
    /// Packets carrying this mark (the runtime's own carrier sockets) skip T.
    public var fwmark: UInt32 { table }
    /// Priorities 7400+10·slot … 7409+10·slot belong to this tunnel.
    public var priorities: ClosedRange<UInt32> {
        let base = Self.priorityBase + 10 * UInt32(index)
        return base...(base + 9)
    }
    /// `not fwmark M lookup T`.
    public var lookupPriority: UInt32 { priorities.lowerBound + 5 }
    /// The carrier identity's exemptions (`… goto lookupPriority + 1`), before the lookup.
    public var exemptionPriority: UInt32 { priorities.lowerBound + 3 }

    /// The slot a table number belongs to, when it is one of Tunnelgate's.
    public init?(table: UInt32) {
        guard table >= Self.tableBase, table < Self.tableBase + UInt32(Self.count) else { return nil }
        self.init(index: Int(table - Self.tableBase))
    }
}
