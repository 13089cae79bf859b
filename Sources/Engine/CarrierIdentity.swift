import TunnelgateSettings

/// How the kernel tells a tunnel's own carrier traffic from everybody else's: the identity the routing
/// rules and the kill switch exempt, to the carriers' addresses, protocols and ports only (`.userAnywhere`:
/// to every address). Everyone else's packets to a carrier address go into the tunnel (with the kill
/// switch: into it or nowhere).
public enum CarrierIdentity: Sendable, Hashable {
    /// Sockets carrying the slot's own fwmark (`7460 + slot`), set with SO_MARK by Tunnelgate (the built-in
    /// WireGuard's sockets). Resolved to `.mark` when a slot is chosen.
    case slotMark
    /// Sockets carrying this fwmark.
    case mark(UInt32)
    /// Sockets owned by this user (`ip rule uidrange`, nftables `meta skuid`): a packet plane's sockets.
    case user(UInt32)
    /// Sockets owned by this user, exempt to ANY destination, not only the carriers: a NetworkExtension
    /// provider's packet plane, whose own connections (createTCPConnection, createUDPSession, its DNS
    /// queries) bypass its tunnel as on iOS. Its packets take the routes the namespace would take without
    /// the tunnel (`uidrange U-U goto L+1`, no destination) and the kill switch accepts them (`meta skuid
    /// U`). Only for a provider: a callback runtime's or MeshGuard's plane needs nothing but its carriers.
    case userAnywhere(UInt32)
    /// The packet plane's user, before `up` chooses it (what `plan` shows for runtimes that open their
    /// own sockets in the plane). A plan with it exempts nothing.
    case planeUser
    /// The runtime's sockets cannot be told apart from anyone else's: carriers are exempt by address
    /// only, for every process (throw routes in the tunnel's table; the kill switch lets anything reach
    /// the carrier addresses). Weaker, and said so in `plan` and `status`.
    case unidentified(reason: String)

    /// The identity a runtime kind's carrier sockets have in this process.
    public static func forRuntime(_ runtime: RuntimeSettings) -> CarrierIdentity {
        switch runtime {
        case .none: return .slotMark
        case .wireguard(let w): return w.fwMark.map { .mark($0) } ?? .slotMark
        case .callback, .mesh:
            // The runtime opens its own sockets, in its packet plane: they are the plane user's.
            return .planeUser
        }
    }

    /// The identity with the slot's mark filled in.
    func resolved(for slot: TunnelSlot) -> CarrierIdentity {
        if case .slotMark = self { return .mark(slot.fwmark) }
        return self
    }

    /// The sockets' owner, for the identities that are a user.
    public var uid: UInt32? {
        switch self {
        case .user(let u), .userAnywhere(let u): return u
        default: return nil
        }
    }

    /// True when the identity is exempt to every destination (a provider's plane).
    public var isExemptAnywhere: Bool {
        if case .userAnywhere = self { return true }
        return false
    }

    /// True when carriers are exempt for everyone (the weaker, address-only rule).
    public var isUnidentified: Bool {
        if case .unidentified = self { return true }
        return false
    }

    /// How `plan` and `status` name it.
    public var summary: String {
        switch self {
        case .slotMark: return "packets with the tunnel's fwmark"
        case .mark(let m): return "packets with fwmark 0x\(String(m, radix: 16))"
        case .user(let u): return "packets of uid \(u) (the packet plane)"
        case .userAnywhere(let u): return "packets of uid \(u) (the provider's packet plane)"
        case .planeUser: return "packets of the packet plane's own user (its uid is chosen at up)"
        case .unidentified: return "every process (by address only)"
        }
    }
}
