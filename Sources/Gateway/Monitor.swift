import Glibc
import LinuxSystem
import Netlink
import Nftables
import TunnelgateSettings

/// Watches the tunnel's namespace for changes made by others (links,
/// addresses, rules, routes, nf_tables) and repairs the tunnel when they
/// touch it: a policy rule deleted, the table flushed, the interface set
/// down, the kill switch removed. Checks are debounced and repairs
/// rate-limited, so a program fighting over the same objects cannot make
/// Tunnelgate spin.
///
/// The same notifications tell it when the carrier path may have changed:
/// a debounced carrier check then looks up the route to every carrier
/// endpoint (`CarrierPath`) and says whether any still has one.
public final class Monitor {
    private let routeEvents: NetlinkSocket
    private let firewallEvents: NftablesSocket?
    /// Isolate mode: the carrier sockets stay in the caller's namespace, so
    /// carrier paths are looked up, and their changes watched, there.
    /// Otherwise the tunnel's namespace is the carriers' too.
    private let carrierEvents: NetlinkSocket?
    private let carrierRequests: NetlinkSocket
    private let gateway: Gateway
    private var checkDue: Double?
    /// The first carrier check is due at once.
    private var carrierCheckDue: Double? = ProcessControl.monotonicSeconds()
    private var carrierPaths: [IPAddress: CarrierPath] = [:]
    /// True while the tunnel has carrier endpoints and none of them has a path.
    public private(set) var carrierPathGone = false
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
            // This thread is in the caller's namespace, where the carrier sockets are.
            carrierEvents = try NetlinkSocket(monitoring: NetlinkSocket.linkAddressRuleAndRouteGroups)
            carrierRequests = try NetlinkSocket()
        } else {
            (routeEvents, firewallEvents) = try open()
            carrierEvents = nil
            carrierRequests = gateway.netlink
        }
    }

    /// Descriptors to poll for readability.
    public var descriptors: [Int32] {
        [routeEvents.fileDescriptor] + [firewallEvents?.fileDescriptor, carrierEvents?.fileDescriptor].compactMap { $0 }
    }

    /// Call when a descriptor is readable: drains it and schedules the checks it calls for.
    public func notificationsArrived() {
        let routing = routeEvents.drainNotifications()
        let n = routing + (firewallEvents?.drainNotifications() ?? 0)
        let now = ProcessControl.monotonicSeconds()
        if n > 0, checkDue == nil { checkDue = now + debounce }
        let carrier = carrierEvents?.drainNotifications() ?? routing
        if carrier > 0, carrierCheckDue == nil { carrierCheckDue = now + debounce }
    }

    /// Milliseconds until the next scheduled check, for poll's timeout; -1 for none.
    public func timeoutMilliseconds() -> Int32 {
        guard let due = [checkDue, carrierCheckDue].compactMap({ $0 }).min() else { return -1 }
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
        // An outside change drained with them is read by a carrier check right after.
        if routeEvents.drainNotifications() > 0, carrierEvents == nil, carrierCheckDue == nil { carrierCheckDue = now }
        _ = firewallEvents?.drainNotifications()
        if !repaired.isEmpty {
            repairTimes.append(now)
            repairs += 1
            lastRepair = repaired.joined(separator: "; ")
        }
        return repaired
    }

    /// Runs a due carrier check: looks up the path to every carrier endpoint
    /// of the plan and updates `carrierPathGone`. Returns one line for each
    /// endpoint whose path went, came back or moved to another link, and at
    /// least one whenever `carrierPathGone` changed (none when nothing did).
    public func runDueCarrierCheck(tunnel: ActiveTunnel) -> [String] {
        guard let due = carrierCheckDue, ProcessControl.monotonicSeconds() >= due else { return [] }
        carrierCheckDue = nil
        let plan = tunnel.plan
        // In isolate mode the TUN is not in the namespace the lookups are made in.
        let tunnelInterface = plan.isolatedIn == nil ? tunnel.interfaceIndex : nil
        var lines: [String] = []
        var paths: [IPAddress: CarrierPath] = [:]
        for address in plan.carrierAddresses {
            let answer: Result<RouteLookup, NetlinkError>
            do { answer = .success(try carrierRequests.lookupRoute(to: address, mark: plan.slot.fwmark)) } catch {
                answer = .failure(error)
            }
            var link: LinkInfo?
            if case .success(let found) = answer, let oif = found.outputInterface {
                link = try? carrierRequests.link(index: oif)
            }
            let path = CarrierPath.judge(answer, link: link, tunnelInterface: tunnelInterface)
            paths[address] = path
            switch (carrierPaths[address], path) {
            case (.present?, .gone(let reason)), (nil, .gone(let reason)):
                lines.append("carrier path to \(address) gone: \(reason)")
            case (.gone?, .present(let link)):
                lines.append("carrier path to \(address) back via \(link)")
            case (.present(let before)?, .present(let link)) where before != link:
                lines.append("carrier path to \(address) moved from \(before) to \(link)")
            default:
                break
            }
        }
        carrierPaths = paths
        let gone = CarrierPath.allGone(plan.carrierAddresses.compactMap { paths[$0] })
        if gone != carrierPathGone {
            carrierPathGone = gone
            if gone, plan.carrierAddresses.count > 1 || lines.isEmpty {
                lines.append("no carrier endpoint has a path")
            } else if lines.isEmpty {
                // The endpoints themselves changed (new settings applied): the verdict did too.
                lines.append(plan.carrierAddresses.isEmpty ? "no carrier endpoints any more" : "a carrier path is there")
            }
        }
        return lines
    }
}

extension Gateway {
    /// A monitor of the tunnel's namespace.
    public func makeMonitor() throws(GatewayError) -> Monitor {
        do { return try Monitor(gateway: self) } catch { throw .system(error) }
    }
}
