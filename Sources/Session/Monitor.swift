import Engine
import LinuxSystem
import Netlink
import Nftables
import TunnelgateSettings

/// Watches the tunnel's namespace for changes made by others (links,
/// addresses, rules, routes, nf_tables: tables, chains, rules, sets and set
/// elements) and repairs the tunnel when they touch it: a policy rule
/// deleted, the table flushed, the interface set down, the kill switch
/// removed or changed in any way (its content is compared,
/// `FirewallVerification`), a set element added.
///
/// Repair never stops while the tunnel is up. Passes are coalesced: one
/// runs at a time on the owner's loop, `debounce` after the notification
/// that called for it, and every pass that repaired something is followed
/// by one more, `debounce` after it ended, that looks again (no notification
/// is thrown away unread: a change made while a pass ran calls for the
/// next). A program changing the tunnel in a tight loop is repaired
/// continuously, at most one pass per `debounce` plus the pass's own time.
///
/// When repairs cannot win, a tunnel with a kill switch fails closed
/// (`FirewallVerification.failClosedTable`, `failedClosed`): after
/// `recurrenceLimit` repairs in a row that did not hold even until the next
/// pass (the pass right after each, `debounce` later and within
/// `recurrenceWindow` of the repair's end, found again a difference that
/// repair had put back: someone undoes every repair as soon as it is made),
/// or after `refusalLimit` passes in a row whose repair the kernel refused.
/// From then on the monitor enforces the block-all table only, until the
/// tunnel is taken down. A tunnel without a kill switch keeps repairing
/// (there is nothing it promised to keep closed).
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
    private let gateway: Engine
    private var checkDue: Double?
    /// The first carrier check is due at once.
    private var carrierCheckDue: Double? = ProcessControl.monotonicSeconds()
    private var carrierPaths: [IPAddress: CarrierPath] = [:]
    /// True while the tunnel has carrier endpoints and none of them has a path.
    public private(set) var carrierPathGone = false
    /// Seconds from a notification (or the end of a repairing pass) to the next pass.
    public static let debounce = 0.02
    /// Fail closed after this many repairs in a row that were undone before the pass right after them …
    public static let recurrenceLimit = 8
    /// … which starts within this many seconds of the repair's end (a pass later than that, the loop
    /// having been held up, does not count).
    public static let recurrenceWindow = 0.1
    /// Fail closed after this many passes in a row whose repair the kernel refused.
    public static let refusalLimit = 3
    public private(set) var repairs = 0
    public private(set) var lastRepair: String?
    /// Why the tunnel failed closed, once it has; the block-all table it enforces from then on.
    public private(set) var failedClosed: String?
    private var closedTable: NftTable?
    /// Repairs in a row undone before the next pass; what the last repair put back, and when it ended.
    private var recurrences = 0
    private var lastRepaired: Set<String> = []
    private var lastRepairEnded = -Double.infinity
    private var refusals = 0
    private var lastUnrepairable: [String] = []

    /// What one pass found and did.
    public struct Pass: Sendable, Equatable {
        /// The differences put back: for the log ("repaired after an outside change: …") and `lastRepair`.
        public var repaired: [String] = []
        /// Lines for the log as they are: repairs that failed, what cannot be repaired, failing closed.
        public var problems: [String] = []
        /// This pass failed the tunnel closed (`failedClosed` says why).
        public var failedClosed = false

        public var isEmpty: Bool { repaired.isEmpty && problems.isEmpty && !failedClosed }
    }

    init(gateway: Engine) throws(SystemCallError) {
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
        if n > 0, checkDue == nil { checkDue = now + Self.debounce }
        let carrier = carrierEvents?.drainNotifications() ?? routing
        if carrier > 0, carrierCheckDue == nil { carrierCheckDue = now + Self.debounce }
    }

    /// Milliseconds until the next scheduled check, for poll's timeout; -1 for none.
    public func timeoutMilliseconds() -> Int32 {
        guard let due = [checkDue, carrierCheckDue].compactMap({ $0 }).min() else { return -1 }
        return Int32(max(0, (due - ProcessControl.monotonicSeconds()) * 1000).rounded(.up))
    }

    /// Runs a due check: compares the kernel with the plan (or, once failed closed, with the block-all
    /// table) and repairs what differs.
    public func runDueCheck(tunnel: ActiveTunnel) -> Pass {
        let started = ProcessControl.monotonicSeconds()
        guard let due = checkDue, started >= due else { return Pass() }
        checkDue = nil
        if let closedTable { return enforce(closedTable) }

        let outcome = gateway.repair(tunnel.plan, interfaceIndex: tunnel.interfaceIndex)
        // What cannot be repaired is said when it changes, not on every pass that meets it again.
        var pass = Pass(repaired: outcome.repaired,
                        problems: outcome.failed + (outcome.unrepairable == lastUnrepairable ? [] : outcome.unrepairable))
        lastUnrepairable = outcome.unrepairable
        guard !(outcome.repaired.isEmpty && outcome.failed.isEmpty) else {
            // Nothing needed putting back: the repairs before held.
            recurrences = 0
            refusals = 0
            lastRepaired = []
            return pass
        }
        let ended = ProcessControl.monotonicSeconds()
        let again = outcome.repaired.first { lastRepaired.contains($0) }
        recurrences = again != nil && started - lastRepairEnded <= Self.recurrenceWindow ? recurrences + 1 : 0
        lastRepaired = Set(outcome.repaired)
        lastRepairEnded = ended
        refusals = outcome.failed.isEmpty ? 0 : refusals + 1
        if !outcome.repaired.isEmpty {
            repairs += 1
            lastRepair = outcome.repaired.joined(separator: "; ")
        }
        // Look again once the repair's own notifications are in: a change made meanwhile is seen then.
        // A repair the kernel keeps refusing is tried again once a second, not on every debounce.
        checkDue = ended + (refusals >= Self.refusalLimit ? 1.0 : Self.debounce)
        // The repair may have changed what carrier lookups see (routes, rules, the link).
        if carrierEvents == nil, carrierCheckDue == nil { carrierCheckDue = ended }

        guard tunnel.plan.firewall?.chains.contains(where: { $0.hook == .output }) == true else {
            if recurrences == Self.recurrenceLimit {
                pass.problems.append("outside changes keep undoing the tunnel right after each repair; repairing on "
                                     + "(the tunnel has no kill switch to close)")
            }
            return pass
        }
        var reason: String?
        if refusals >= Self.refusalLimit {
            reason = "the kernel refused \(refusals) repairs in a row: \(outcome.failed.first ?? "")"
        } else if recurrences >= Self.recurrenceLimit, let again {
            reason = "\(recurrences) repairs in a row were undone before the next check: \(again)"
        }
        guard let reason else { return pass }
        let (table, problems) = gateway.failClosed(tunnel.plan)
        failedClosed = reason
        let name = tunnel.plan.interfaceName
        gateway.recordDisconnect(name, message: "failed closed: \(reason)")
        pass.problems.append("failed closed: \(reason); nothing leaves but loopback (nftables table inet "
                             + "\(table?.name ?? tunnel.plan.firewall?.name ?? "")) until `tunnelgate down \(name)`")
        // When the kernel took neither block-all table, each pass tries the tunnel's own again.
        closedTable = table ?? tunnel.plan.firewall.map { FirewallVerification.failClosedTable(name: $0.name, comment: $0.comment) }
        pass.failedClosed = true
        pass.problems += problems
        checkDue = ProcessControl.monotonicSeconds() + Self.debounce
        return pass
    }

    /// Runs a due check of a kill switch held with no tunnel (a provider's settings removed under a
    /// kill switch, its name held by a claim): `table`, as the tunnel left it, is put back when it
    /// differs, as the block-all table of a tunnel that failed closed is.
    public func runDueKillSwitchCheck(_ table: NftTable) -> Pass {
        guard let due = checkDue, ProcessControl.monotonicSeconds() >= due else { return Pass() }
        checkDue = nil
        return enforce(table)
    }

    /// Asks for a check at once (a state this monitor did not see made, such as a kill switch just
    /// left to a claim).
    public func checkNow() {
        if checkDue == nil { checkDue = ProcessControl.monotonicSeconds() }
    }

    /// Once failed closed: the block-all table is all the tunnel keeps; put back when it differs.
    private func enforce(_ table: NftTable) -> Pass {
        let found = gateway.firewallDifferences(table)
        guard !found.isEmpty else { return Pass() }
        var pass = Pass()
        do throws(NftablesError) {
            guard let nft = gateway.nftables else { throw NftablesError(operation: "nft transaction (no netfilter socket)", errno: .noSuchEntry) }
            try nft.replace(table)
            pass.repaired = found
            repairs += 1
            lastRepair = found.joined(separator: "; ")
            checkDue = ProcessControl.monotonicSeconds() + Self.debounce
        } catch {
            pass.problems.append("repair of the block-all table inet \(table.name) (\(found.first ?? "")) failed: \(error)")
            // Refused: tried again four times a second (and on the next change), not on every debounce.
            checkDue = ProcessControl.monotonicSeconds() + 0.25
        }
        return pass
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
            // Looked up as the carrier identity's own packets are routed: with the slot's mark, or as
            // the packet plane's user to the carrier's protocol and port (its exemption rules match
            // on those), so a rule that catches only one of them decides here as for the runtime.
            let carrier = plan.carriers.first { $0.address == address }
            let answer: Result<RouteLookup, NetlinkError>
            do {
                if let uid = plan.carrierIdentity.uid {
                    answer = .success(try carrierRequests.lookupRoute(to: address, uid: uid,
                                                                      ipProtocol: carrier?.transports.first?.protocolNumber ?? 17,
                                                                      destinationPort: carrier?.port))
                } else {
                    answer = .success(try carrierRequests.lookupRoute(to: address, mark: plan.slot.fwmark))
                }
            } catch {
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

extension Engine {
    /// A monitor of the tunnel's namespace.
    public func makeMonitor() throws(EngineError) -> Monitor {
        do { return try Monitor(gateway: self) } catch { throw .system(error) }
    }
}
