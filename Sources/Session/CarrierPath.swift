import Engine
import LinuxSystem
import Netlink
import TunnelgateSettings

/// Whether the tunnel's carrier packets to one endpoint can leave this host,
/// as the kernel decides it: a route lookup (RTM_GETROUTE) for the endpoint
/// carrying the slot's fwmark, so the policy rules apply exactly as to the
/// runtime's own carrier sockets, and the state of the link the route
/// leaves by.
///
/// A tunnel with several carrier endpoints has a path while *any* of them
/// has one: a runtime with two peers, one of them still reachable, is still
/// connected. Only when no endpoint has a path is the tunnel reasserting
/// (`tunnelStatus(runtime:carrierPathGone:)`). A tunnel without carrier
/// endpoints is never reasserting for this reason.
public enum CarrierPath: Sendable, Equatable, CustomStringConvertible {
    /// Packets to the endpoint leave by this link (its name).
    case present(via: String)
    /// Why they cannot: "no route", "blackhole route", "eth0 has no carrier", …
    case gone(String)

    public var isPresent: Bool {
        if case .present = self { return true }
        return false
    }

    public var description: String {
        switch self {
        case .present(let link): "via \(link)"
        case .gone(let reason): reason
        }
    }

    /// The verdict on the kernel's answer for one endpoint. `link` is the
    /// answer's output interface as read afterwards (nil when it has none or
    /// it vanished); `tunnelInterface` is the tunnel's own interface when it
    /// lives in the namespace the lookup was made in.
    ///
    /// Gone: the lookup was refused (no route, or an unreachable, blackhole
    /// or prohibit route), or it found such a route, or the route leads into
    /// the tunnel itself, or its link is down, has no carrier or is not
    /// operational, or there is no source address to send from (or only an
    /// IPv6 link-local one for a destination beyond the link).
    public static func judge(_ answer: Result<RouteLookup, NetlinkError>, link: LinkInfo?,
                             tunnelInterface: Int32?) -> CarrierPath {
        let lookup: RouteLookup
        switch answer {
        case .success(let found): lookup = found
        case .failure(let error):
            switch error.errno {
            // ENETUNREACH, EHOSTUNREACH, EINVAL: how a lookup says no route, an unreachable route
            // and a blackhole route (EACCES: prohibit).
            case .networkUnreachable: return .gone("no route")
            case .hostUnreachable: return .gone("unreachable route")
            // A blackhole says EINVAL without a message; a request the kernel finds malformed says why.
            case .invalidArgument where error.kernelMessage == nil: return .gone("blackhole route")
            case .accessDenied: return .gone("prohibit route")
            default: return .gone(error.description)
            }
        }
        guard lookup.kind == .unicast || lookup.kind == .local else { return .gone("\(lookup.kind) route") }
        guard let oif = lookup.outputInterface else { return .gone("a route without an output interface") }
        if let tunnelInterface, oif == tunnelInterface {
            return .gone("routed into the tunnel itself (\(link?.name ?? "if\(oif)"))")
        }
        guard let link else { return .gone("its interface if\(oif) is gone") }
        if !link.isUp { return .gone("\(link.name) is down") }
        if !link.hasCarrier { return .gone("\(link.name) has no carrier") }
        if !link.isRunning { return .gone("\(link.name) is not operational") }
        if lookup.kind == .unicast {
            guard let source = lookup.preferredSource else { return .gone("no source address on \(link.name)") }
            if case .v6(let s) = source, s.isLinkLocal, case .v6(let d) = lookup.destination, !d.isLinkLocal {
                return .gone("only a link-local source address on \(link.name)")
            }
        }
        return .present(via: link.name)
    }

    /// True when there are carrier endpoints and none of them has a path.
    public static func allGone(_ paths: [CarrierPath]) -> Bool {
        !paths.isEmpty && !paths.contains(where: \.isPresent)
    }

    /// The tunnel's NEVPNStatus from its runtime's (connected for a tunnel
    /// without one) and the carrier path: reasserting while the runtime
    /// would say connected but no carrier endpoint has a path; connected
    /// again only when both are fine. Every other runtime status stands.
    public static func tunnelStatus(runtime: TunnelStatus, carrierPathGone: Bool) -> TunnelStatus {
        runtime == .connected && carrierPathGone ? .reasserting : runtime
    }
}
