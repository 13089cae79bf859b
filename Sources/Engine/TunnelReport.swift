import LinuxSystem
import RuntimeABI
import TUN
import Netlink
import Nftables
import TunnelgateSettings

/// What `tunnelgate status` shows of one tunnel: the owner's record and
/// what the kernel holds now (read back, not remembered).
public struct TunnelReport: Codable, Sendable {
    public struct RouteCounts: Codable, Sendable {
        public var included = 0
        public var excluded = 0
        /// Routes to the TUN's own subnets (TunnelPlan.ownsSubnetRoute), not counted as included; one an
        /// included route names exactly is a single route, counted here.
        public var subnets = 0

        public init() {}

        /// `subnets` may be missing (a report of a version before it).
        public init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            included = try c.decode(Int.self, forKey: .included)
            excluded = try c.decode(Int.self, forKey: .excluded)
            subnets = try c.decodeIfPresent(Int.self, forKey: .subnets) ?? 0
        }
    }
    public struct KernelCounters: Codable, Sendable {
        public var txPackets: UInt64
        public var rxPackets: UInt64
        public var txBytes: UInt64
        public var rxBytes: UInt64
    }

    public var name: String
    public var status: TunnelStatus
    public var pid: Int32?
    /// Isolate mode: the namespace the interface lives in.
    public var namespace: String?
    /// The DNS backend used (systemd-resolved, netns resolv.conf, resolv.conf).
    public var dns: String?
    /// Whose packets to the carriers bypass the tunnel (the plan's words).
    public var carrierExemption: String?
    /// A provider's proxy settings: the files written for the namespace and what they cannot say.
    public var proxy: ProxyRecord?
    /// disconnectOnSleep: whether logind's PrepareForSleep is followed, or why not (TunnelRecord).
    public var disconnectOnSleep: String?
    /// The packet plane running the tunnel's runtime: its pid and (unprivileged) uid.
    public var planePID: Int32?
    public var planeUser: UInt32?
    /// false when the plane runs without its read-only mount namespace (TunnelRecord).
    public var planeMountNamespace: Bool?
    public var interface: String?
    public var interfaceIndex: Int32?
    public var mtu: UInt32?
    public var addresses: [String] = []
    public var table: UInt32?
    public var rulePriority: UInt32?
    /// True when the owner runs with no settings applied (Engine.claim): no TUN, nothing in the kernel.
    public var noSettings: Bool?
    public var ipv4Routes = RouteCounts()
    public var ipv6Routes = RouteCounts()
    public var rules = 0
    /// The runtime's view of the packet flow.
    public var counters: PacketCounters?
    /// The hosted runtime's own status JSON, as it last answered (polled four
    /// times a second, published once a second; secrets scrubbed): its state,
    /// interface, and whatever else it reports (peers, handshakes, its own
    /// counters). nil without a runtime.
    public var runtime: JSONValue?
    /// The kernel's counters for the TUN interface (tx: host → tunnel).
    public var interfaceCounters: KernelCounters?
    /// True while the kernel holds the tunnel's kill switch exactly as its owner enforces it — the
    /// plan's table, or the block-all table once it failed closed — compared by content (every chain,
    /// rule, set and element; `FirewallVerification`), also after its process died (it stays until
    /// `down`). False while it differs in any way, and for a table of forwarding rules only.
    public var killSwitch: Bool = false
    /// How the tunnel's nftables table compares with the one its owner enforces (NAME.firewall); nil
    /// when the tunnel has none.
    public var firewall: FirewallCheck?
    /// The table compared (`inet` family).
    public var firewallTable: String?
    /// Whether that table is a kill switch (has an output chain), not forwarding rules only.
    public var firewallIsKillSwitch: Bool?
    /// Every difference of the kernel's table from the enforced one, one line each ("nftables: …").
    public var firewallDifferences: [String] = []
    /// Set when repairs could not win and the tunnel failed closed: why.
    public var failedClosed: String?
    /// Set when the owner died and left kernel state that `down` will remove.
    public var residue: Bool = false
    /// While not running: why its last run ended, when that was a failure (the runtime failed, a
    /// start or a teardown failed), as NEVPNConnection's fetchLastDisconnectError gives it. nil after
    /// a clean stop.
    public var lastDisconnectError: String?
}

/// A tunnel's nftables table against the one its owner enforces.
public enum FirewallCheck: String, Codable, Sendable {
    /// The kernel's table holds exactly what was planned (the plan's table, or the block-all one).
    case asPlanned = "as planned"
    /// It differs (`TunnelReport.firewallDifferences` says how).
    case tamperedWith = "tampered with"
    /// There is no such table.
    case missing
    /// A table is there, but no record of what it should hold (an owner that has not verified it yet).
    case notVerified = "not verified"
}

extension TunnelReport {
    /// The lines of `tunnelgate status` about the nftables table and failing closed.
    public var firewallLines: [String] {
        var lines: [String] = []
        if let failedClosed {
            lines.append("  failed closed: \(failedClosed); nothing leaves but loopback until `tunnelgate down \(name)`")
        }
        guard let firewall, let table = firewallTable.map({ "nftables table inet \($0)" }) else { return lines }
        let what = firewallIsKillSwitch == false ? "forwarding rules" : "kill switch"
        let repairer = pid != nil && !residue ? "its owner repairs it" : "no owner repairs it: `tunnelgate down \(name)`"
        switch firewall {
        case .asPlanned where failedClosed != nil:
            lines.append("  kill switch: on, failed closed (\(table) blocks everything but loopback, as recorded)")
        case .asPlanned where killSwitch:
            lines.append("  kill switch: on (\(table), content as planned); nothing leaves but the tunnel, the carriers and loopback")
        case .asPlanned:
            break
        case .tamperedWith:
            lines.append("  \(what): TAMPERED WITH, \(table) differs from the plan (\(repairer)):")
            lines += firewallDifferences.prefix(12).map { "    " + $0 }
            if firewallDifferences.count > 12 { lines.append("    … and \(firewallDifferences.count - 12) more") }
        case .missing:
            lines.append("  \(what): off, \(table) is missing (\(repairer))")
        case .notVerified:
            lines.append("  \(what): \(table) is there, its content not verified yet (no record of the plan's table)")
        }
        return lines
    }
}

/// Why a tunnel's last run ended, when it failed: NAME.lasterror. `domain` and `code` are those of
/// the NSError a provider gave (cancelTunnelWithError, or startTunnel's completion handler), as
/// fetchLastDisconnectError returns it; nil for Tunnelgate's own failures.
public struct DisconnectError: Codable, Sendable, Equatable {
    public var message: String
    public var domain: String?
    public var code: Int?

    public init(message: String, domain: String? = nil, code: Int? = nil) {
        self.message = message
        self.domain = domain
        self.code = code
    }
}

extension Engine {
    /// Reports every tunnel of this namespace, or only `name`.
    public func reports(name: String? = nil) throws(EngineError) -> [TunnelReport] {
        let names = name.map { [$0] } ?? state.tunnelNames()
        var out: [TunnelReport] = []
        for n in names {
            out.append(try report(n))
        }
        return out
    }

    /// Only the NEVPNStatus of `name`, from the state directory (no kernel
    /// dumps): cheap enough to poll.
    public func status(of name: String) throws(EngineError) -> TunnelStatus {
        // The record first, then the lock: a stopping owner writes `disconnected`, releases the lock and
        // then removes the record, so a record gone by the time the lock is looked at can never make a
        // stopping tunnel read as one starting (a held lock without a record).
        let record = TunnelRecord.read(from: state.statePath(name))
        let held = try system { () throws(SystemCallError) in try FileLock.isHeld(state.lockPath(name)) }
        guard held else { return .disconnected }
        return Self.heldStatus(record)
    }

    /// Records how the tunnel's run ended: `error` for a failure, nil for a clean stop (which clears
    /// the error of an earlier run).
    public func recordDisconnect(_ name: String, message: String?) {
        recordDisconnect(name, error: message.map { DisconnectError(message: $0) })
    }

    public func recordDisconnect(_ name: String, error: DisconnectError?) {
        let path = state.lastErrorPath(name)
        guard let error else { return FileSystem.remove(path) }
        guard let json = try? JSONCoding.encodeValue(error) else { return }
        try? FileSystem.writeAtomically(path, Array(json.sortingKeys().serialized().utf8) + [0x0a])
    }

    /// What `recordDisconnect` kept, if anything.
    public func lastDisconnect(_ name: String) -> DisconnectError? {
        guard let bytes = try? FileSystem.read(state.lastErrorPath(name)), !bytes.isEmpty else { return nil }
        return try? JSONCoding.decode(DisconnectError.self, from: bytes)
    }

    /// The message of `lastDisconnect`.
    public func lastDisconnectError(_ name: String) -> String? { lastDisconnect(name)?.message }

    /// The status of a held name: its record's, or connecting before the owner wrote one; a record
    /// whose process is gone is a dead owner's, being cleaned up by whoever holds the name now (`down`,
    /// or an `up` removing the residue first): disconnecting, not what the dead owner last said.
    static func heldStatus(_ record: TunnelRecord?) -> TunnelStatus {
        guard let record else { return .connecting }
        if record.pid != ProcessControl.id, !ProcessControl.exists(record.pid) { return .disconnecting }
        return record.status
    }

    public func report(_ name: String) throws(EngineError) -> TunnelReport {
        var report = TunnelReport(name: name, status: .disconnected)
        // The record before the lock, as in status(of:).
        let record = TunnelRecord.read(from: state.statePath(name))
        let held = try system { () throws(SystemCallError) in try FileLock.isHeld(state.lockPath(name)) }
        let journal = try? Journal.read(path: state.journalPath(name))
        if held {
            report.status = Self.heldStatus(record)
            report.pid = record?.pid
            report.namespace = record?.isolatedIn
            report.dns = record?.dnsBackend
            report.carrierExemption = record?.carrierExemption
            report.proxy = record?.proxy
            report.disconnectOnSleep = record?.disconnectOnSleep
            report.planePID = record?.planePID
            report.planeUser = record?.planeUser
            report.planeMountNamespace = record?.planeMountNamespace
            report.counters = record?.counters
            report.runtime = record?.runtimeStatus.flatMap { try? JSONParser.parse(Array($0.utf8)) }
            // An owner that holds a tunnel whose runtime failed (its kill switch in place) says why.
            if report.status == .disconnected { report.lastDisconnectError = lastDisconnectError(name) }
        } else {
            report.lastDisconnectError = lastDisconnectError(name)
            guard journal != nil else { return report }
            report.residue = true
        }
        if held, record?.slot == TunnelRecord.noSlot {
            // A claim: the owner runs with no settings applied (a provider's start completed without any,
            // or it removed them); what the kernel holds is only a kill switch it keeps, if any.
            report.noSettings = true
            if journal == nil { return report }
        }
        guard let slot = journal?.slot ?? record.flatMap({ $0.slot >= 0 ? TunnelSlot(index: $0.slot) : nil }) else { return report }
        report.table = slot.table
        report.rulePriority = slot.lookupPriority
        do throws(NetlinkError) {
            if held, let link = try netlink.link(named: name), link.kind == "tun" {
                report.interface = link.name
                report.interfaceIndex = link.index
                report.mtu = link.mtu
                report.addresses = try netlink.addresses(interfaceIndex: link.index)
                    .filter { !($0.prefix.family == .ipv6 && $0.prefix.address.isLinkLocalV6) }
                    .map(\.prefix.description)
                if let s = link.statistics {
                    report.interfaceCounters = .init(txPackets: s.txPackets, rxPackets: s.rxPackets,
                                                     txBytes: s.txBytes, rxBytes: s.rxBytes)
                }
            }
            reportFirewall(name, into: &report)
            report.failedClosed = record?.counters?.failedClosed
            let subnets = Set(report.addresses.compactMap { IPPrefix($0) }.filter { !$0.isHost }.map(\.network))
            for family in IPFamily.allCases {
                var counts = TunnelReport.RouteCounts()
                for r in try netlink.routes(family: family, table: slot.table) where r.protocolID == tunnelgateRouteProtocol {
                    if r.type == .throw { counts.excluded += 1 } else if subnets.contains(r.destination) { counts.subnets += 1 } else { counts.included += 1 }
                }
                if family == .ipv4 { report.ipv4Routes = counts } else { report.ipv6Routes = counts }
                report.rules += try netlink.rules(family: family).filter { Self.ownRule($0.spec, slot) }.count
            }
        } catch {
            throw .netlink(error)
        }
        return report
    }
}

extension Engine {
    /// The tunnel's nftables table against the one its owner recorded as enforced (the plan's, or the
    /// block-all table), read back and compared by content: `killSwitch` only when it matches.
    func reportFirewall(_ name: String, into report: inout TunnelReport) {
        guard let expected = enforcedFirewall(name) else {
            let table = Firewall.tableName(name)
            if (try? nftables?.tables())??.contains(where: { $0.name == table && $0.comment == "tunnelgate:\(name)" }) == true {
                report.firewall = .notVerified
                report.firewallTable = table
            }
            return
        }
        report.firewallTable = expected.name
        report.firewallIsKillSwitch = expected.isKillSwitch
        let actual: NftTableContents?
        do {
            let socket = try nft()
            actual = try socket.contents(of: expected.name)
        } catch {
            report.firewall = .notVerified
            report.firewallDifferences = ["nftables: reading back table inet \(expected.name): \(error)"]
            return
        }
        report.firewallDifferences = FirewallVerification.differences(expected: expected, actual: actual)
        report.firewall = actual == nil ? .missing : report.firewallDifferences.isEmpty ? .asPlanned : .tamperedWith
        report.killSwitch = report.firewall == .asPlanned && expected.isKillSwitch
    }
}

extension IPAddress {
    var isLinkLocalV6: Bool {
        if case .v6(let a) = self { return a.isLinkLocal }
        return false
    }
}
