import DNSConfig
import LinuxSystem
import RuntimeABI
import TUN
import Netlink
import Nftables
import TunnelgateSettings

/// The engine: plan → journal → apply → verify, and teardown, for the
/// network namespace the process is in. The JSON command line and the
/// NetworkExtension face both drive this.
public final class Engine {
    public let state: StateDirectory
    public let netlink: NetlinkSocket
    /// The netfilter socket of the tunnel's namespace.
    public let nftables: NftablesSocket?
    /// Set in isolate mode (`--netns NS`): the namespace the TUN is moved
    /// into and configured in, while this process, its TUN descriptor and a
    /// runtime's carrier sockets stay in the caller's namespace.
    public let isolatedNamespace: NetworkNamespace?
    /// A netlink socket in the caller's namespace, to move the TUN out of it.
    private let callerNetlink: NetlinkSocket?
    /// Where progress lines go (stderr for the command; nil to stay quiet).
    public var log: ((String) -> Void)?

    /// An engine for the calling thread's network namespace. `readOnly`
    /// engines (plan, status) do not create the state directory.
    ///
    /// With `namespace`, the engine acts in that namespace (isolate mode):
    /// its sockets and state directory are the namespace's.
    public init(readOnly: Bool = false, namespace: NetworkNamespace? = nil) throws(EngineError) {
        isolatedNamespace = namespace
        do {
            if let namespace {
                (state, netlink, nftables) = try Self.unwrap(namespace.perform { () throws(SystemCallError) in
                    (try StateDirectory(create: !readOnly), try NetlinkSocket(), try? NftablesSocket())
                })
                callerNetlink = readOnly ? nil : try NetlinkSocket()
            } else {
                state = try StateDirectory(create: !readOnly)
                netlink = try NetlinkSocket()
                nftables = try? NftablesSocket()
                callerNetlink = nil
            }
        } catch {
            throw .system(error)
        }
    }

    /// The isolate namespace's label when no name under /run/netns names it (a path, pid:, docker:).
    var unnamedIsolateNamespace: String? {
        guard let namespace = isolatedNamespace else { return nil }
        let own = namespace.inode
        let named = NamedNetworkNamespaces.names().contains { NamedNetworkNamespaces.inode($0) == own }
        return named ? nil : (namespace.name ?? "the namespace")
    }

    private static func unwrap<T>(_ body: @autoclosure () throws(NamespaceError<SystemCallError>) -> T) throws(SystemCallError) -> T {
        do { return try body() } catch {
            switch error {
            case .enter(let e), .body(let e): throw e
            }
        }
    }

    // MARK: - Plan

    /// Resolves the carriers and picks a slot. Reads the kernel, changes nothing.
    /// Carrier host names are resolved here, once: the plan pins the addresses for the tunnel's life.
    /// `carrierIdentity` says how the runtime's carrier sockets are told apart (default: the runtime
    /// kind's, `CarrierIdentity.forRuntime`).
    public func plan(_ settings: TunnelSettings, resolver: some HostResolver,
                     carrierIdentity: CarrierIdentity? = nil) throws(EngineError) -> TunnelPlan {
        try Self.requireResolvedAddresses(settings)
        let carriers: [PinnedCarrier]
        do { carriers = try settings.pinCarrierEndpoints(using: resolver) } catch { throw .configuration(error) }
        let slot = try freeSlot(for: settings.name)
        return TunnelPlan(settings: settings, slot: slot, carriers: carriers,
                          carrierIdentity: carrierIdentity ?? .forRuntime(settings.runtime),
                          isolatedIn: isolatedNamespace?.name,
                          forwardingInterfaces: try forwardingInterfaces(settings, slot: slot))
    }

    /// The interfaces by which the IPv4 forwarding sources are reached now (the main table's answer, with
    /// the slot's mark so no tunnel of this name steers the lookup).
    func forwardingInterfaces(_ settings: TunnelSettings, slot: TunnelSlot) throws(EngineError) -> [String] {
        let sources = (settings.forwarding?.sources ?? []).enumerated().filter { $0.element.family == .ipv4 }
        guard !sources.isEmpty else { return [] }
        var names: [String] = []
        var problems: [ConfigProblem] = []
        do throws(NetlinkError) {
            let links = try netlink.links()
            for (i, source) in sources {
                let lookup: RouteLookup
                do throws(NetlinkError) { lookup = try netlink.lookupRoute(to: source.network.address, mark: slot.fwmark) } catch {
                    problems.append(ConfigProblem(path: "forwarding.sources[\(i)]",
                                                  reason: "\(source) is not reachable from here (\(error.errno)): nothing to forward for"))
                    continue
                }
                guard let index = lookup.outputInterface, let link = links.first(where: { $0.index == index }) else { continue }
                if link.name != settings.name, !names.contains(link.name) { names.append(link.name) }
            }
        } catch {
            throw .netlink(error)
        }
        guard problems.isEmpty else { throw .configuration(ConfigurationError(problems)) }
        return names
    }

    /// An `"auto"` mesh address is filled in from the node's identity before
    /// planning (TunnelSettings.resolvingMeshAddress); a plan never holds 0.0.0.0.
    static func requireResolvedAddresses(_ settings: TunnelSettings) throws(EngineError) {
        guard let path = settings.meshAddressPath else { return }
        throw .configuration(ConfigurationError([ConfigProblem(
            path: path, reason: "'auto' (this node's mesh address) was not derived from the identity before planning")]))
    }

    /// The slot the name already holds (residue of a crash), or the lowest
    /// slot no rule, route or journal of this namespace uses.
    func freeSlot(for name: String) throws(EngineError) -> TunnelSlot {
        var taken = Set<Int>()
        for other in state.tunnelNames() where other != name {
            if let j = try? Journal.read(path: state.journalPath(other)) { taken.insert(j.slot.index) }
            if let r = TunnelRecord.read(from: state.statePath(other)) { taken.insert(r.slot) }
        }
        if let own = try? Journal.read(path: state.journalPath(name)), !taken.contains(own.slot.index) {
            return own.slot
        }
        do throws(NetlinkError) {
            for family in IPFamily.allCases {
                for rule in try netlink.rules(family: family) {
                    if let s = TunnelSlot(table: rule.spec.table) { taken.insert(s.index) }
                    let p = rule.spec.priority
                    if p >= TunnelSlot.priorityBase, p < TunnelSlot.priorityBase + 10 * UInt32(TunnelSlot.count) {
                        taken.insert(Int((p - TunnelSlot.priorityBase) / 10))
                    }
                }
            }
            for index in 0..<TunnelSlot.count where !taken.contains(index) {
                let slot = TunnelSlot(index: index)
                // A table someone else fills is not free either.
                if try netlink.routes(family: .ipv4, table: slot.table).isEmpty,
                   try netlink.routes(family: .ipv6, table: slot.table).isEmpty {
                    return slot
                }
            }
        } catch {
            throw .netlink(error)
        }
        throw .noFreeSlot
    }

    // MARK: - Up

    /// Applies a tunnel and returns it running: the TUN held open, the name
    /// lock held, the journal committed. Residue of an earlier crash of the
    /// same name is removed first. On any failure everything applied is
    /// rolled back before the error is thrown.
    /// With `awaitingRuntime`, the tunnel stays `connecting` after apply until
    /// the caller reports its runtime ready. With `tunOffloads`, the TUN is
    /// asked for a virtio_net_hdr with checksum and TCP segmentation offload
    /// (`TunDevice(name:offloads:)`), for a runtime that reads and writes it
    /// itself and handles them.
    ///
    /// Fail-closed: a kill switch a dead owner left stays until this run's own replaces it (one
    /// transaction, the same table name) or, when this run has none, until it has applied and verified
    /// everything else. If this run fails, a kill switch stays in place, whether the dead owner's or this
    /// run's, until `down NAME` (see `teardown(keepFirewall:)`).
    ///
    /// With `claim` (this owner's hold on the name while it had no settings) the claim's lock is the
    /// tunnel's from here on; if the up fails, the claim keeps it and says so again in its record.
    public func up(_ settings: TunnelSettings, resolver: some HostResolver, configPath: String?,
                   awaitingRuntime: Bool = false, tunOffloads: Bool = false,
                   carrierIdentity: CarrierIdentity? = nil, claim: TunnelClaim? = nil) throws(EngineError) -> ActiveTunnel {
        let name = settings.name
        if let claim, claim.name != name { throw EngineError.system(SystemCallError("up: the claim is for \(claim.name), not \(name)", .invalidArgument)) }
        let lock: FileLock
        if let held = claim?.take() {
            lock = held
        } else {
            guard let acquired = try system({ () throws(SystemCallError) in try FileLock.tryAcquire(state.lockPath(name)) }) else {
                throw EngineError.alreadyRunning(name: name, pid: TunnelRecord.read(from: state.statePath(name))?.pid)
            }
            lock = acquired
        }
        do throws(EngineError) {
            try removeResidue(name, keepFirewall: true)
            // Slot choice and creation are serialised across this namespace.
            guard let allocation = try system({ () throws(SystemCallError) in try FileLock.acquire(state.allocationLockPath, timeout: 10) }) else {
                throw EngineError.system(SystemCallError("flock(\(state.allocationLockPath))", .busy))
            }
            defer { allocation.release() }
            let plan = try self.plan(settings, resolver: resolver, carrierIdentity: carrierIdentity)
            if try netlinkCall({ () throws(NetlinkError) in try netlink.link(named: name) }) != nil { throw EngineError.interfaceExists(name) }
            if let callerNetlink, try netlinkCall({ () throws(NetlinkError) in try callerNetlink.link(named: name) }) != nil {
                throw EngineError.interfaceExists(name)
            }
            return try apply(plan, lock: lock, configPath: configPath, awaitingRuntime: awaitingRuntime,
                             tunOffloads: tunOffloads)
        } catch {
            if let claim { claim.restore(lock) } else { lock.releaseAndRemove() }
            throw error
        }
    }

    /// Holds `name` for this process without applying anything: the name's lock and a record (`status`,
    /// no slot), so `status`, `down` and the control socket find the owner. For a provider whose
    /// startTunnel completed before it set any settings (connected, nothing routed) and one that
    /// removed its settings while running. Residue of an earlier run of the name is removed first, but
    /// for a kill switch, which stays (as at `up`) until settings of this run replace it, the claim is
    /// released, or `down`: a provider under a kill switch that removed its settings still lets nothing
    /// out but through the tunnel.
    public func claim(_ name: String, status: TunnelStatus) throws(EngineError) -> TunnelClaim {
        guard let lock = try system({ () throws(SystemCallError) in try FileLock.tryAcquire(state.lockPath(name)) }) else {
            throw EngineError.alreadyRunning(name: name, pid: TunnelRecord.read(from: state.statePath(name))?.pid)
        }
        do throws(EngineError) {
            try removeResidue(name, keepFirewall: true)
            let record = TunnelRecord(name: name, pid: ProcessControl.id, status: status, slot: TunnelRecord.noSlot,
                                      configPath: nil, since: ProcessControl.monotonicSeconds())
            try system { () throws(SystemCallError) in try record.write(to: state.statePath(name)) }
            return TunnelClaim(name: name, lock: lock, record: record, gateway: self)
        } catch {
            lock.releaseAndRemove()
            throw error
        }
    }

    private func apply(_ plan: TunnelPlan, lock: FileLock, configPath: String?, awaitingRuntime: Bool,
                       tunOffloads: Bool) throws(EngineError) -> ActiveTunnel {
        let name = plan.interfaceName
        var record = TunnelRecord(name: name, pid: ProcessControl.id, status: .connecting, slot: plan.slot.index,
                                  configPath: configPath, since: ProcessControl.monotonicSeconds(),
                                  isolatedIn: plan.isolatedIn)
        record.carrierExemption = plan.carrierExemption
        // Whatever fails from here on is rolled back, except a kill switch: from the moment one is in place
        // (this run's, or a dead owner's kept by removeResidue) only `down NAME` opens it.
        var tun: TunDevice?
        func rollBack() -> Bool { (try? teardown(name: name, tun: tun, keepFirewall: true)) != nil }
        let journal: Journal
        do {
            try record.write(to: state.statePath(name))
            journal = try Journal(path: state.journalPath(name), name: name, slot: plan.slot)
        } catch {
            _ = rollBack()
            throw .system(error)
        }
        // The kill switch first: in place before the TUN exists, so no route ever points into a tunnel
        // it does not guard. Replacing a dead owner's table is one transaction.
        if let table = plan.firewall {
            do throws(SystemCallError) { try journal.record(nftTable: table.name) } catch {
                _ = rollBack()
                throw .system(error)
            }
            let socket: NftablesSocket
            do throws(EngineError) { socket = try nft() } catch {
                _ = rollBack()
                throw error
            }
            do throws(NftablesError) { try socket.replace(table) } catch {
                throw .firewall(error, rolledBack: rollBack())
            }
        } else if hasResidueFirewall(name) {
            // A dead owner's kill switch stays journaled until this run is committed (then it goes).
            do throws(SystemCallError) { try journal.record(nftTable: Firewall.tableName(name)) } catch {
                _ = rollBack()
                throw .system(error)
            }
        }
        do {
            try journal.record(link: name)
            tun = try TunDevice(name: name, offloads: tunOffloads)
        } catch {
            _ = rollBack()
            throw .system(error)
        }
        guard let tun else { fatalError("unreachable: the TUN was just made") }
        if tunOffloads && !tun.carriesVirtioHeader {
            log?("\(name): the kernel refused TUN offloads (IFF_VNET_HDR, TSO); one packet per TUN read")
        }
        var interfaceIndex = tun.index
        if let namespace = isolatedNamespace, let callerNetlink {
            // Isolate mode: the TUN was made here, where its descriptor lives; its
            // interface moves into the namespace and is configured there.
            do throws(EngineError) {
                do throws(NetlinkBatchError) {
                    try callerNetlink.execute([.moveLink(index: tun.index, name: name, namespace: namespace.descriptor.rawValue,
                                                         namespaceName: namespace.name)])
                } catch { throw EngineError.apply(error, rolledBack: false) }
                guard let moved = try netlinkCall({ () throws(NetlinkError) in try netlink.link(named: name) }) else {
                    throw EngineError.verification(["link \(name) did not arrive in namespace \(namespace.name ?? "")"], rolledBack: false)
                }
                interfaceIndex = moved.index
            } catch {
                _ = rollBack()
                throw error
            }
        }
        // No IPv6 the settings did not ask for: without ipv6Settings the TUN gets no link-local address and
        // sends no router or neighbour solicitation or MLD report into the tunnel. Set before the link is up.
        if plan.settings.ipv6Settings == nil {
            do throws(SystemCallError) { try disableIPv6(on: name) } catch {
                _ = rollBack()
                throw .system(error)
            }
        } else if isolatedNamespace != nil {
            // Moved into a namespace whose net.ipv6.conf.default.disable_ipv6 is 1 (dockerd makes its
            // containers' so), the TUN arrives with IPv6 off and refuses the settings' addresses.
            do throws(SystemCallError) { try enableIPv6(on: name) } catch {
                _ = rollBack()
                throw .system(error)
            }
        }
        let ops = plan.operations(interfaceIndex: interfaceIndex)
        do {
            try journal.record(routes: plan.routes(interfaceIndex: interfaceIndex), rules: plan.rules)
        } catch {
            _ = rollBack()
            throw .system(error)
        }
        log?("applying \(ops.count) changes to \(name) (table \(plan.slot.table))")
        do {
            try netlink.execute(ops)
        } catch {
            throw .apply(error, rolledBack: rollBack())
        }
        do throws(SystemCallError) { try applySysctls(plan.sysctls, journal: journal) } catch {
            _ = rollBack()
            throw .system(error)
        }
        var dns: DNSApplied?
        if plan.settings.dnsSettings != nil, let unnamed = unnamedIsolateNamespace {
            // A namespace given by path, pid or container has no /etc/netns/NAME of its own, and the
            // resolv.conf its processes read is in their mount namespace (a container's image): the
            // one this process sees is the caller's, never to be written for another namespace.
            log?("dnsSettings: not written: \(unnamed) has no name under /run/netns, so no resolv.conf of its own "
                 + "here (its processes read their own); the tunnel's servers are reached through the tunnel")
            record.dnsBackend = "none (\(unnamed) has no name under /run/netns: its resolv.conf is its processes' own)"
        } else if let dnsSettings = plan.settings.dnsSettings {
            do throws(DNSConfigError) {
                dns = try inTunnelNamespace { () throws(DNSConfigError) in
                    try DNSConfigurator().apply(settings: dnsSettings, interfaceName: name, interfaceIndex: interfaceIndex,
                                                stateDirectory: state.path, tunnelName: name)
                }
                try dns?.forwarder?.start()
                record.dnsBackend = dns?.backend.description
            } catch {
                throw .dns(error.description, rolledBack: rollBack())
            }
        }
        // A provider's proxy settings: files for the namespace's programs, journaled (never enforced).
        if plan.settings.proxy != nil {
            do throws(SystemCallError) { record.proxy = try applyProxy(plan.settings.proxy, name: name, previous: nil) } catch {
                _ = rollBack()
                throw .system(error)
            }
        }
        let problems = verify(plan, interfaceIndex: interfaceIndex)
        if !problems.isEmpty {
            throw .verification(problems, rolledBack: rollBack())
        }
        if plan.firewall == nil, hasResidueFirewall(name) {
            // Everything of this run is in place: a dead owner's kill switch this run does not want goes now.
            let socket: NftablesSocket
            do throws(EngineError) { socket = try nft() } catch {
                _ = rollBack()
                throw error
            }
            do throws(NftablesError) { try socket.delete(table: Firewall.tableName(name)) } catch {
                throw .firewall(error, rolledBack: rollBack())
            }
        }
        do {
            try journal.recordCommitted()
            record.status = awaitingRuntime ? .connecting : .connected
            try record.write(to: state.statePath(name))
        } catch {
            _ = rollBack()
            throw .system(error)
        }
        return ActiveTunnel(plan: plan, tun: tun, interfaceIndex: interfaceIndex, lock: lock, record: record, dns: dns, gateway: self)
    }

    /// True when the tunnel's namespace has a table `inet tunnelgate-NAME` marked as this tunnel's: a
    /// kill switch (or forwarding table) in place, also when its owner is gone.
    public func hasResidueFirewall(_ name: String) -> Bool {
        guard let nft = try? nft(), let tables = try? nft.tables() else { return false }
        return tables.contains { $0.name == Firewall.tableName(name) && $0.comment == "tunnelgate:\(name)" }
    }

    /// True when that table is a kill switch (it has the output chain; a forwarding-only table has none).
    public func hasKillSwitchInPlace(_ name: String) -> Bool {
        guard hasResidueFirewall(name), let nft = try? nft(), let rules = try? nft.rules(table: Firewall.tableName(name)) else {
            return false
        }
        return rules.contains { $0.chain == "output" && $0.comment?.hasPrefix("tunnelgate:\(name) ") == true }
    }

    /// `net.ipv6.conf.NAME.disable_ipv6 = 1` in the tunnel's namespace (the TUN goes with its setting).
    func disableIPv6(on name: String) throws(SystemCallError) {
        // A namespace (or kernel) without IPv6 has no such file: nothing to disable.
        guard (try readSysctl("net/ipv6/conf/\(name)/disable_ipv6")) != nil else { return }
        try writeSysctl("net/ipv6/conf/\(name)/disable_ipv6", "1")
    }

    /// `net.ipv6.conf.NAME.disable_ipv6 = 0` in the tunnel's namespace, when it is 1 (the TUN goes with
    /// its setting).
    func enableIPv6(on name: String) throws(SystemCallError) {
        guard let now = try readSysctl("net/ipv6/conf/\(name)/disable_ipv6"), now != "0" else { return }
        try writeSysctl("net/ipv6/conf/\(name)/disable_ipv6", "0")
    }

    // MARK: - Verify

    /// How the kernel differs from a plan, read back by dumps.
    public struct Differences {
        /// The link is missing or renamed, or the dumps failed: nothing to repair in place.
        public var fatal: [String] = []
        public var linkSettings: [String] = []
        public var missingAddresses: [IPPrefix] = []
        public var missingRoutes: [RouteSpec] = []
        public var extraRoutes = 0
        public var missingRules: [RuleSpec] = []
        public var firewall: [String] = []
        public var sysctls: [SysctlChange] = []

        public var descriptions: [String] {
            fatal + linkSettings + missingAddresses.map { "address \($0) is missing" }
                + missingRoutes.map { "route \($0) is missing" }
                + (extraRoutes > 0 ? ["the tunnel's table has \(extraRoutes) routes the plan does not have"] : [])
                + missingRules.map { "rule \($0) is missing" } + firewall
                + sysctls.map { "\($0.path) is not \($0.value)" }
        }
        public var isEmpty: Bool { descriptions.isEmpty }
    }

    /// Reads the kernel back and lists every difference from the plan. Records the plan's nftables
    /// table as the one the tunnel enforces (NAME.firewall), for `status` to compare with.
    public func verify(_ plan: TunnelPlan, interfaceIndex: Int32) -> [String] {
        recordEnforcedFirewall(plan.firewall, tunnel: plan.interfaceName)
        return differences(plan, interfaceIndex: interfaceIndex).descriptions
    }

    /// Everything of the plan the kernel holds differently. The nftables table is compared by content
    /// (`FirewallVerification`), also when the link is gone and nothing else can be.
    public func differences(_ plan: TunnelPlan, interfaceIndex: Int32) -> Differences {
        var d = Differences()
        linkAndRouting: do {
            guard let link = try netlink.links().first(where: { $0.index == interfaceIndex }) else {
                d.fatal.append("link \(plan.interfaceName) is missing")
                break linkAndRouting
            }
            if link.name != plan.interfaceName { d.fatal.append("link \(interfaceIndex) is named \(link.name), not \(plan.interfaceName)") }
            if link.kind != "tun" { d.fatal.append("link \(link.name) is of kind \(link.kind ?? "none"), not tun") }
            if link.mtu != UInt32(plan.mtu) { d.linkSettings.append("link \(link.name) has mtu \(link.mtu), not \(plan.mtu)") }
            if !link.isUp { d.linkSettings.append("link \(link.name) is down") }

            let addresses = Set(try netlink.addresses(interfaceIndex: interfaceIndex).map(\.prefix))
            d.missingAddresses = plan.addresses.filter { !addresses.contains($0) }

            struct Key: Hashable { var destination: IPPrefix; var type: RouteType; var oif: Int32?; var gateway: IPAddress? }
            func key(_ r: RouteSpec) -> Key {
                Key(destination: r.destination, type: r.type, oif: r.type == .throw ? nil : r.outputInterface, gateway: r.gateway)
            }
            let wanted = plan.routes(interfaceIndex: interfaceIndex)
            var present = Set<Key>()
            for family in IPFamily.allCases {
                for r in try netlink.routes(family: family, table: plan.slot.table) where r.protocolID == tunnelgateRouteProtocol {
                    present.insert(key(r))
                }
            }
            d.missingRoutes = wanted.filter { !present.contains(key($0)) }
            d.extraRoutes = present.subtracting(wanted.map(key)).count

            let rules = try netlink.rules(family: .ipv4) + netlink.rules(family: .ipv6)
            d.missingRules = plan.rules.filter { rule in !rules.contains { Self.sameRule($0.spec, rule) } }
        } catch {
            d.fatal.append("reading back: \(error)")
        }
        if let table = plan.firewall {
            d.firewall = verifyFirewall(table)
        }
        for change in plan.sysctls where (try? readSysctl(change.path)) != change.value {
            d.sysctls.append(change)
        }
        return d
    }

    /// What one repair pass found and did.
    public struct RepairOutcome: Sendable, Equatable {
        /// The differences it put back (each a line of `Differences.descriptions`).
        public var repaired: [String] = []
        /// Repairs the kernel refused, with its error.
        public var failed: [String] = []
        /// Differences it cannot put back in place: the link gone or renamed, routes others added to the table.
        public var unrepairable: [String] = []

        public var isEmpty: Bool { repaired.isEmpty && failed.isEmpty && unrepairable.isEmpty }
    }

    /// Puts back whatever of the plan someone else changed: the link's MTU and up state, addresses,
    /// routes, rules, kernel parameters; and the nftables table, replaced as a whole in one transaction
    /// when its content differs in any way (also when the link is gone: the kill switch holds without it).
    public func repair(_ plan: TunnelPlan, interfaceIndex: Int32) -> RepairOutcome {
        let d = differences(plan, interfaceIndex: interfaceIndex)
        var outcome = RepairOutcome()
        outcome.unrepairable = d.fatal + (d.extraRoutes > 0 ? ["the tunnel's table has \(d.extraRoutes) routes the plan does not have"] : [])
        if d.fatal.isEmpty {
            var ops: [NetlinkOperation] = []
            if !d.linkSettings.isEmpty {
                ops.append(.setLink(index: interfaceIndex, name: plan.interfaceName, mtu: UInt32(plan.mtu), up: true))
            }
            ops += d.missingAddresses.map { .addAddress(plan.addressSpec($0, interfaceIndex: interfaceIndex)) }
            ops += d.missingRoutes.map { .addRoute($0) }
            ops += d.missingRules.map { .addRule($0) }
            let routing = d.linkSettings + d.missingAddresses.map { "address \($0) is missing" }
                + d.missingRoutes.map { "route \($0) is missing" } + d.missingRules.map { "rule \($0) is missing" }
            do throws(NetlinkBatchError) {
                try netlink.execute(ops, tolerating: [.exists])
                outcome.repaired += routing
            } catch {
                outcome.failed.append("repair of \(routing.joined(separator: "; ")) failed: \(error)")
            }
        }
        for change in d.sysctls {
            do throws(SystemCallError) {
                try writeSysctl(change.path, change.value)
                outcome.repaired.append("\(change.path) is not \(change.value)")
            } catch {
                outcome.failed.append("repair of \(change.path) failed: \(error)")
            }
        }
        if !d.firewall.isEmpty, let table = plan.firewall {
            do throws(NftablesError) {
                guard let nftables else { throw NftablesError(operation: "nft transaction (no netfilter socket)", errno: .noSuchEntry) }
                try nftables.replace(table)
                outcome.repaired += d.firewall
            } catch {
                outcome.failed.append("repair of the nftables table inet \(table.name) (\(d.firewall.first ?? "")) failed: \(error)")
            }
        }
        return outcome
    }

    /// Reads the nftables table back and compares it with `table` by content: the table's flags and
    /// comment, each chain's hook, type, priority and policy, each rule in order, each set and element.
    public func verifyFirewall(_ table: NftTable) -> [String] {
        firewallDifferences(table)
    }

    static func sameRule(_ a: RuleSpec, _ b: RuleSpec) -> Bool { a.sameRule(as: b) }

    /// Rules that belong to a slot: its table or its priorities, with Tunnelgate's marker.
    static func ownRule(_ r: RuleSpec, _ slot: TunnelSlot) -> Bool {
        r.protocolID == tunnelgateRouteProtocol && (r.table == slot.table || slot.priorities.contains(r.priority))
    }

    func nft() throws(EngineError) -> NftablesSocket {
        guard let nftables else {
            throw EngineError.system(SystemCallError("socket(AF_NETLINK, NETLINK_NETFILTER)", .current))
        }
        return nftables
    }

    // MARK: - Teardown

    /// Removes everything the journal of `name` records, and any route or
    /// rule of its table that carries Tunnelgate's marker, then checks the
    /// kernel holds none of it. `tun`, when given, is closed after its
    /// interface is deleted. Returns false when there was nothing to remove.
    @discardableResult
    public func teardown(name: String, tun: TunDevice?, keepFirewall: Bool = false,
                         keepRecord: Bool = false) throws(EngineError) -> Bool {
        /// The state file goes; with `keepRecord` (the owner stopping) it stays, saying disconnected,
        /// until the owner has released the name (ActiveTunnel.stop removes it then): `status` never
        /// sees the name held without a record, which reads as a tunnel starting.
        func finishRecord() {
            if keepRecord, var record = TunnelRecord.read(from: state.statePath(name)) {
                record.status = .disconnected
                try? record.write(to: state.statePath(name))
            } else {
                FileSystem.remove(state.statePath(name))
            }
        }
        let journal: JournalContents?
        do { journal = try Journal.read(path: state.journalPath(name)) } catch { throw .system(error) }
        guard let journal else {
            // DNS keeps its own journal; a crash between the two leaves only that one.
            if FileSystem.exists(state.path + "/\(name).dns") {
                let problems = restoreDNS(name)
                guard problems.isEmpty else { throw .residue(name: name, problems) }
                return true
            }
            finishRecord()
            return false
        }
        // Every caller holds the name's lock: the record says disconnecting from here on, also when it is
        // a dead owner's (down after a crash), which would otherwise show its last status meanwhile.
        if var record = TunnelRecord.read(from: state.statePath(name)), record.status != .disconnecting {
            record.status = .disconnecting
            try? record.write(to: state.statePath(name))
        }
        let slot = journal.slot
        let tolerated: Set<Errno> = [.noSuchEntry, .noSuchProcess, .noSuchDevice, .addressNotAvailable]
        var failures: [String] = []
        do throws(NetlinkError) {
            // Rules first, so nothing is steered into a table being emptied.
            var rules = journal.rules
            for family in IPFamily.allCases {
                for r in try netlink.rules(family: family)
                where Self.ownRule(r.spec, slot) && !rules.contains(where: { Self.sameRule($0, r.spec) }) {
                    rules.append(r.spec)
                }
            }
            // Deleting a rule matches on every attribute given: give what the dump said.
            let currentRules = try netlink.rules(family: .ipv4) + netlink.rules(family: .ipv6)
            let deletions = rules.compactMap { wanted in currentRules.first { Self.sameRule($0.spec, wanted) }?.spec }
            do throws(NetlinkBatchError) { try netlink.execute(deletions.map { .deleteRule($0) }, tolerating: tolerated) }
            catch { failures += error.failures.map(\.error.description) }

            // DNS before the TUN goes: systemd-resolved's per-link settings are
            // reverted while the link exists (RevertLink). Tried again below
            // when it failed: once the link is gone, resolved has dropped them.
            var dnsFailures = restoreDNS(name)

            // The TUN: deleting it takes its addresses and `dev` routes with it.
            for linkName in journal.links {
                if let link = try netlink.link(named: linkName), link.kind == "tun" {
                    do throws(NetlinkBatchError) { try netlink.execute([.deleteLink(index: link.index, name: link.name)], tolerating: tolerated) }
                    catch { failures += error.failures.map(\.error.description) }
                }
            }
            tun?.close()

            // Whatever of table T remains (throw routes) and carries the marker.
            var routes: [RouteSpec] = []
            for family in IPFamily.allCases {
                routes += try netlink.routes(family: family, table: slot.table).filter { $0.protocolID == tunnelgateRouteProtocol }
            }
            do throws(NetlinkBatchError) { try netlink.execute(routes.map { .deleteRoute($0) }, tolerating: tolerated) }
            catch { failures += error.failures.map(\.error.description) }

            // The kill switch goes last: until now it kept the host from leaking. With keepFirewall it
            // stays (a failed run under a kill switch; a dead owner's for the next run to replace).
            if !(keepFirewall && hasKillSwitchInPlace(journal.name)) {
                do throws(EngineError) {
                    let nft = try nft()
                    var names = journal.nftTables
                    let marked = Firewall.tableName(journal.name)
                    if !names.contains(marked),
                       (try? nft.tables())?.contains(where: { $0.name == marked && $0.comment == "tunnelgate:\(journal.name)" }) == true {
                        names.append(marked)
                    }
                    for table in names {
                        do throws(NftablesError) { try nft.delete(table: table) } catch { failures.append(error.description) }
                        if (try? nft.tables())?.contains(where: { $0.name == table }) != false {
                            failures.append("nftables table inet \(table) remains")
                        }
                    }
                } catch {
                    failures.append(error.description)
                }
            }

            failures += restoreSysctls(journal)
            failures += removeFiles(journal)
            if !dnsFailures.isEmpty { dnsFailures = restoreDNS(name) }
            failures += dnsFailures

            // Read back: nothing of ours may remain.
            for family in IPFamily.allCases {
                let left = try netlink.routes(family: family, table: slot.table).filter { $0.protocolID == tunnelgateRouteProtocol }
                if !left.isEmpty { failures.append("\(left.count) \(family) routes remain in table \(slot.table)") }
                let leftRules = try netlink.rules(family: family).filter { Self.ownRule($0.spec, slot) }
                if !leftRules.isEmpty { failures.append("\(leftRules.count) \(family) rules for table \(slot.table) remain") }
            }
            for linkName in journal.links where try netlink.link(named: linkName)?.kind == "tun" {
                failures.append("link \(linkName) remains")
            }
        } catch {
            throw .netlink(error)
        }
        guard failures.isEmpty else { throw .residue(name: name, failures) }
        if keepFirewall, hasKillSwitchInPlace(journal.name) {
            // The kill switch stays, and so does a journal that records it (and NAME.firewall, what it
            // must hold): `down NAME` removes it, and the next `up` of the name replaces it in one transaction.
            do throws(SystemCallError) {
                let kept = try Journal(path: state.journalPath(name), name: name, slot: slot)
                try kept.record(nftTable: Firewall.tableName(journal.name))
            } catch {
                throw .system(error)
            }
        } else {
            FileSystem.remove(state.journalPath(name))
            FileSystem.remove(state.firewallPath(name))  // what the owner enforced: gone with the table (FirewallVerification)
        }
        finishRecord()
        FileSystem.remove(state.logPath(name))
        return true
    }

    /// Puts back the DNS a tunnel changed, a resolv.conf or systemd-resolved's settings of its link
    /// (from NAME.dns; nothing when there is none).
    func restoreDNS(_ name: String) -> [String] {
        do throws(DNSConfigError) {
            try inTunnelNamespace { () throws(DNSConfigError) in
                try DNSConfigurator.restore(stateDirectory: state.path, tunnelName: name)
            }
            return []
        } catch {
            return ["restoring DNS: \(error)"]
        }
    }

    /// Removes what a dead owner of `name` left behind. The caller holds the
    /// name lock. `keepFirewall` leaves a kill switch in place for the next
    /// run to replace atomically, so the host is never unprotected between.
    func removeResidue(_ name: String, keepFirewall: Bool = false, keepRecord: Bool = false) throws(EngineError) {
        guard FileSystem.exists(state.journalPath(name)) || FileSystem.exists(state.path + "/\(name).dns") else { return }
        log?("removing what an earlier run of \(name) left behind\(keepFirewall ? " (its kill switch stays until replaced)" : "")")
        try teardown(name: name, tun: nil, keepFirewall: keepFirewall, keepRecord: keepRecord)
        // The built-in WireGuard's API socket, made by the dead owner (under the name, or under the name
        // and this namespace): gone unless someone listens on it.
        let inode = isolatedNamespace?.inode ?? (try? ProcessControl.networkNamespaceIdentity()) ?? 0
        for socket in [Self.wireGuardSocketPath(name), Self.wireGuardSocketPath(name, namespace: inode)] {
            if FileSystem.exists(socket), (try? UnixSocket.connect(to: socket)).map({ $0.close() }) == nil {
                FileSystem.remove(socket)
            }
        }
    }

    /// Where wg(8) looks for the userspace interface `name`'s API socket, which the engine makes for the
    /// built-in WireGuard's packet plane.
    public static func wireGuardSocketPath(_ name: String) -> String { "/var/run/wireguard/\(name).sock" }

    /// The API socket of the tunnel `name` in the namespace with inode `namespace` when a live tunnel of
    /// that name in another namespace holds `wireGuardSocketPath(name)`: wg(8) looks in one directory for
    /// every namespace, so the second is reached under `wireGuardAlias(name, namespace:)`.
    public static func wireGuardSocketPath(_ name: String, namespace: UInt64) -> String {
        "/var/run/wireguard/\(wireGuardAlias(name, namespace: namespace)).sock"
    }

    /// `NAME@ID`, ID the namespace's inode in base 36, NAME cut so that the whole is at most 15
    /// characters: wg(8) copies an interface name into IFNAMSIZ bytes before `set` looks for its socket.
    public static func wireGuardAlias(_ name: String, namespace: UInt64) -> String {
        let id = "@" + String(namespace, radix: 36)
        return String(name.prefix(max(1, 15 - id.count))) + id
    }

    /// `down`'s cleanup under the name's lock: the residue goes, the record says disconnected until the
    /// lock is released, and goes then (as when an owner stops) — unless a new owner has written its own.
    private func removeResidueAndRelease(_ name: String, lock: FileLock, keepKillSwitch: Bool) throws(EngineError) {
        defer {
            // A killed owner's control socket: nobody can listen on it while the name's lock is held here.
            let control = state.controlPath(name)
            if FileSystem.exists(control), (try? UnixSocket.connect(to: control)).map({ $0.close() }) == nil {
                FileSystem.remove(control)
            }
            lock.releaseAndRemove()
            let path = state.statePath(name)
            if let left = TunnelRecord.read(from: path), left.status == .disconnected || !ProcessControl.exists(left.pid) {
                FileSystem.remove(path)
            }
        }
        try removeResidue(name, keepFirewall: keepKillSwitch, keepRecord: true)
    }

    // MARK: - Down

    /// Stops the tunnel `name`: asks its owner to stop (SIGTERM) and waits for
    /// it; if the owner is dead or does not stop within `timeout`, removes
    /// the tunnel from the journal itself. Returns when nothing is left.
    ///
    /// `keepKillSwitch`: a dead run's kill switch (its nftables table) stays, journaled, with everything
    /// else removed, until a later `up` of the name replaces it or `down` without it removes it. A live
    /// owner asked to stop still removes everything itself (a clean stop).
    public func down(_ name: String, timeout: Double = 10, keepKillSwitch: Bool = false) throws(EngineError) {
        let lockPath = state.lockPath(name)
        let statePath = state.statePath(name)
        let journalPath = state.journalPath(name)
        do {
            if let lock = try system({ () throws(SystemCallError) in try FileLock.tryAcquire(lockPath) }) {
                guard FileSystem.exists(journalPath) || FileSystem.exists(statePath) else {
                    lock.releaseAndRemove()
                    throw EngineError.notFound(name)
                }
                return try removeResidueAndRelease(name, lock: lock, keepKillSwitch: keepKillSwitch)
            }
            guard let record = TunnelRecord.read(from: statePath) else {
                // An owner is starting and has not written its record yet.
                guard let lock = try system({ () throws(SystemCallError) in try FileLock.acquire(lockPath, timeout: timeout) }) else { throw EngineError.notFound(name) }
                lock.release()
                return try down(name, timeout: timeout, keepKillSwitch: keepKillSwitch)
            }
            try? ProcessControl.signal(record.pid, Signal.terminate)
            if let lock = try system({ () throws(SystemCallError) in try FileLock.acquire(lockPath, timeout: timeout) }) {
                return try removeResidueAndRelease(name, lock: lock, keepKillSwitch: keepKillSwitch)
            }
            try? ProcessControl.signal(record.pid, Signal.kill)
            guard let lock = try system({ () throws(SystemCallError) in try FileLock.acquire(lockPath, timeout: 2) }) else {
                throw EngineError.stopTimeout(name: name, pid: record.pid)
            }
            try removeResidueAndRelease(name, lock: lock, keepKillSwitch: keepKillSwitch)
        }
    }
}

/// Runs a system call wrapper, reporting its failure as a EngineError.
func system<T>(_ body: () throws(SystemCallError) -> T) throws(EngineError) -> T {
    do { return try body() } catch { throw .system(error) }
}

/// Runs a netlink request, reporting its failure as a EngineError.
func netlinkCall<T>(_ body: () throws(NetlinkError) -> T) throws(EngineError) -> T {
    do { return try body() } catch { throw .netlink(error) }
}

/// A name held with nothing applied (`Engine.claim`): the lock and the record, until `Engine.up` takes
/// the lock over or `release` gives the name up.
public final class TunnelClaim {
    public let name: String
    public private(set) var record: TunnelRecord
    private var lock: FileLock?
    private unowned let gateway: Engine

    init(name: String, lock: FileLock, record: TunnelRecord, gateway: Engine) {
        self.name = name
        self.lock = lock
        self.record = record
        self.gateway = gateway
    }

    /// True while the claim holds the name (not taken over by a tunnel, not released).
    public var isHeld: Bool { lock != nil }

    /// The lock, for Engine.up; the claim no longer holds it.
    func take() -> FileLock? {
        defer { lock = nil }
        return lock
    }

    /// The lock back after an up that failed: the claim's record is written again.
    func restore(_ lock: FileLock) {
        self.lock = lock
        try? record.write(to: gateway.state.statePath(name))
    }

    public func publish(status: TunnelStatus) {
        guard lock != nil else { return }
        record.status = status
        try? record.write(to: gateway.state.statePath(name))
    }

    public func publish(planePID: Int32?, planeUser: UInt32?, mountNamespace: Bool? = nil) {
        guard lock != nil else { return }
        record.setPlane(pid: planePID, user: planeUser, mountNamespace: mountNamespace)
        try? record.write(to: gateway.state.statePath(name))
    }

    /// Gives the name up: what an earlier tunnel of this owner left under the claim (a kill switch held
    /// while the settings were removed) goes, but for the kill switch with `keepingKillSwitch`, and then
    /// the record and the lock.
    public func release(keepingKillSwitch: Bool = false) {
        guard let lock else { return }
        self.lock = nil
        do throws(EngineError) { try gateway.removeResidue(name, keepFirewall: keepingKillSwitch, keepRecord: true) } catch {
            gateway.log?("removing what \(name) held without settings failed: \(error)")
        }
        let path = gateway.state.statePath(name)
        if let left = TunnelRecord.read(from: path), left.pid == ProcessControl.id { FileSystem.remove(path) }
        lock.releaseAndRemove()
    }

    deinit { release() }
}

/// A tunnel that is up: it owns the TUN descriptor and the name lock.
public final class ActiveTunnel {
    public internal(set) var plan: TunnelPlan
    public let tun: TunDevice
    /// The interface's index in the namespace it is configured in.
    public let interfaceIndex: Int32
    public private(set) var record: TunnelRecord
    private let lock: FileLock
    private unowned let gateway: Engine
    private var stopped = false

    /// The DNS applied, with its split-DNS forwarder when there is one.
    public internal(set) var dns: DNSApplied?

    init(plan: TunnelPlan, tun: TunDevice, interfaceIndex: Int32, lock: FileLock, record: TunnelRecord, dns: DNSApplied?, gateway: Engine) {
        self.dns = dns
        self.plan = plan
        self.tun = tun
        self.interfaceIndex = interfaceIndex
        self.lock = lock
        self.record = record
        self.gateway = gateway
    }

    /// Removes everything and releases the name. Safe to call once; later calls do nothing. With
    /// `keepFirewall` (a run that failed under a kill switch) the kill switch stays, journaled, until
    /// `down NAME`.
    public func stop(keepFirewall: Bool = false) throws(EngineError) {
        guard !stopped else { return }
        stopped = true
        defer {
            lock.releaseAndRemove()
            // Only once the name is free: until then the record said disconnected (teardown's keepRecord).
            let path = gateway.state.statePath(plan.interfaceName)
            if let left = TunnelRecord.read(from: path), left.pid == ProcessControl.id, left.status == .disconnected {
                FileSystem.remove(path)
            }
        }
        try? dns?.forwarder?.stop()
        try gateway.teardown(name: plan.interfaceName, tun: tun, keepFirewall: keepFirewall, keepRecord: true)
    }

    /// Stops a run that failed: everything goes but a kill switch, which stays closed until `down NAME`.
    /// Returns what to tell the user about what is left.
    public func stopFailed() -> String {
        let name = plan.interfaceName
        let keep = plan.hasKillSwitch
        let removed = (try? stop(keepFirewall: keep)) != nil
        var note = ""
        if keep { note += "\nthe kill switch stays in place (nothing leaves but through the tunnel) until `tunnelgate down \(name)`" }
        if !removed { note += "\n(removing the tunnel failed too: run `tunnelgate down \(name)`)" }
        return note
    }

    /// Changes the record and writes it (while the tunnel runs).
    func updateRecord(_ change: (inout TunnelRecord) -> Void) {
        guard !stopped else { return }
        change(&record)
        try? record.write(to: gateway.state.statePath(plan.interfaceName))
    }

    /// Publishes counters (and the runtime's status JSON) in the state file for `status`.
    public func publish(counters: PacketCounters, runtimeStatus: String? = nil) {
        guard !stopped else { return }  // the record is gone with the name
        record.counters = counters
        if let runtimeStatus { record.runtimeStatus = runtimeStatus }
        try? record.write(to: gateway.state.statePath(plan.interfaceName))
    }

    /// Publishes who the packet plane is (nil pid: none runs now).
    public func publish(planePID: Int32?, planeUser: UInt32?, mountNamespace: Bool? = nil) {
        guard !stopped else { return }
        record.setPlane(pid: planePID, user: planeUser, mountNamespace: mountNamespace)
        try? record.write(to: gateway.state.statePath(plan.interfaceName))
    }

    /// Publishes a lifecycle transition (and the runtime's status JSON).
    public func publish(status: TunnelStatus, runtimeStatus: String? = nil) {
        guard !stopped else { return }
        if status == .reasserting, record.status != .reasserting { record.lastReasserting = ProcessControl.monotonicSeconds() }
        record.status = status
        if let runtimeStatus { record.runtimeStatus = runtimeStatus }
        try? record.write(to: gateway.state.statePath(plan.interfaceName))
    }
}
