import Glibc
import LinuxSystem
import Netlink
import Nftables

/// Watches the tunnel's namespace for changes made by others (links,
/// rules, routes, nf_tables) and repairs the tunnel when they touch it:
/// a policy rule deleted, the table flushed, the interface set down, the
/// kill switch removed. Checks are debounced and repairs rate-limited, so a
/// program fighting over the same objects cannot make Tunnelgate spin.
public final class Monitor {
    private let routeEvents: NetlinkSocket
    private let firewallEvents: NftablesSocket?
    private let gateway: Gateway
    private var checkDue: Double?
    private var repairTimes: [Double] = []
    /// At most this many repair passes in `window` seconds.
    private let burst = 10
    private let window = 10.0
    private let debounce = 0.02
    public private(set) var repairs = 0
    public private(set) var lastRepair: String?

    init(gateway: Gateway) throws(SystemCallError) {
        self.gateway = gateway
        let open = { () throws(SystemCallError) -> (NetlinkSocket, NftablesSocket?) in
            (try NetlinkSocket(monitoring: NetlinkSocket.linkAddressRuleAndRouteGroups), try? NftablesSocket(monitoring: true))
        }
        if let namespace = gateway.isolatedNamespace {
            do { (routeEvents, firewallEvents) = try namespace.perform(open) } catch {
                switch error { case .enter(let e), .body(let e): throw e }
            }
        } else {
            (routeEvents, firewallEvents) = try open()
        }
    }

    /// Descriptors to poll for readability.
    public var descriptors: [Int32] { [routeEvents.fileDescriptor] + (firewallEvents.map { [$0.fileDescriptor] } ?? []) }

    /// Call when a descriptor is readable: drains it and schedules a check.
    public func notificationsArrived() {
        let n = routeEvents.drainNotifications() + (firewallEvents?.drainNotifications() ?? 0)
        if n > 0, checkDue == nil { checkDue = ProcessControl.monotonicSeconds() + debounce }
    }

    /// Milliseconds until the next scheduled check, for poll's timeout; -1 for none.
    public func timeoutMilliseconds() -> Int32 {
        guard let due = checkDue else { return -1 }
        return Int32(max(0, (due - ProcessControl.monotonicSeconds()) * 1000).rounded(.up))
    }

    /// Runs a due check; returns what was repaired, if anything.
    public func runDueCheck(tunnel: ActiveTunnel) -> [String] {
        guard let due = checkDue, ProcessControl.monotonicSeconds() >= due else { return [] }
        let now = ProcessControl.monotonicSeconds()
        repairTimes.removeAll { now - $0 > window }
        if repairTimes.count >= burst {
            // Someone keeps undoing the tunnel: wait out the window instead of fighting.
            checkDue = (repairTimes.first ?? now) + window
            return []
        }
        checkDue = nil
        let repaired = gateway.repair(tunnel.plan, interfaceIndex: tunnel.interfaceIndex)
        // Our own repair causes notifications: drain them so they do not schedule another pass.
        _ = routeEvents.drainNotifications()
        _ = firewallEvents?.drainNotifications()
        if !repaired.isEmpty {
            repairTimes.append(now)
            repairs += 1
            lastRepair = repaired.joined(separator: "; ")
        }
        return repaired
    }
}

extension Gateway {
    /// A monitor of the tunnel's namespace.
    public func makeMonitor() throws(GatewayError) -> Monitor {
        do { return try Monitor(gateway: self) } catch { throw .system(error) }
    }
}
