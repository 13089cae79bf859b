import Netlink
import RuntimeABI
import Nftables
import TunnelgateSettings

/// The kernel objects a tunnel wants, in the order they are made. Built
/// from validated settings without touching the kernel, so `plan` prints
/// exactly what `up` will do.
public struct TunnelPlan: Sendable {
    public var settings: TunnelSettings
    public var slot: TunnelSlot
    /// The carrier endpoints, resolved once and pinned for the tunnel's life.
    public var carriers: [PinnedCarrier]
    /// Whose packets to the carriers bypass the tunnel (resolved: never `.slotMark`).
    public var carrierIdentity: CarrierIdentity
    public var routing: RoutingIntent

    /// Isolate mode: the namespace the interface is moved into. Its only way
    /// out is the tunnel: the kill switch is always on there, with no
    /// exception for carriers (they stay in the caller's namespace).
    public var isolatedIn: String?

    /// Gateway mode: the interfaces by which the IPv4 `forwarding.sources` are reached (looked up
    /// when planning), whose own `forwarding` the tunnel turns on.
    public var forwardingInterfaces: [String] = []

    public init(settings: TunnelSettings, slot: TunnelSlot, carriers: [PinnedCarrier],
                carrierIdentity: CarrierIdentity = .slotMark, isolatedIn: String? = nil,
                forwardingInterfaces: [String] = []) {
        self.forwardingInterfaces = forwardingInterfaces
        self.isolatedIn = isolatedIn
        self.settings = settings
        self.slot = slot
        self.carriers = carriers
        self.carrierIdentity = carrierIdentity.resolved(for: slot)
        // Only an unidentified runtime's carriers are throw routes (exempt for everyone); an identified
        // one's are exempt by its rules. In isolate mode the carriers are not in this namespace at all.
        var seen = Set<IPAddress>()
        let throwRoutes = isolatedIn == nil && self.carrierIdentity.isUnidentified
            ? carriers.map(\.address).filter { seen.insert($0).inserted } : []
        self.routing = RoutingIntent(settings: settings, carrierAddresses: throwRoutes)
    }

    /// A plan whose carriers are bare addresses (any port and protocol).
    public init(settings: TunnelSettings, slot: TunnelSlot, carrierAddresses: [IPAddress],
                carrierIdentity: CarrierIdentity = .slotMark, isolatedIn: String? = nil) {
        self.init(settings: settings, slot: slot, carriers: carrierAddresses.map { PinnedCarrier(address: $0) },
                  carrierIdentity: carrierIdentity, isolatedIn: isolatedIn)
    }

    /// The carriers' addresses, each once.
    public var carrierAddresses: [IPAddress] {
        var seen = Set<IPAddress>()
        return carriers.map(\.address).filter { seen.insert($0).inserted }
    }

    /// Whether the tunnel's own routes take `address` into the tunnel: in its family, the most specific
    /// of the included and excluded prefixes that hold it is an included one (a tie is the exclusion's,
    /// as RoutingIntent has already decided). What table T's lookup answers for it.
    public func routesIntoTunnel(_ address: IPAddress) -> Bool {
        let family = address.family == .ipv4 ? routing.ipv4 : routing.ipv6
        let destinations = family.included.map(\.destination) + (family.isActive ? subnets(of: address.family) : [])
        let included = destinations.lazy.filter { $0.contains(address) }.map(\.length).max()
        guard let included else { return false }
        let excluded = family.excluded.lazy.filter { $0.contains(address) }.map(\.length).max() ?? -1
        return included > excluded
    }

    /// The carriers the tunnel's routes would take into the tunnel: the only ones whose identity needs
    /// an exemption (rules that jump past the tunnel's lookup, and a connection mark for the replies'
    /// reverse-path check). A carrier the routes leave outside reaches its physical path for every
    /// process anyway, as everything else the tunnel does not route; exempting it would cost every
    /// packet of the namespace a connection-tracking lookup (the mark is kept in the connection) and
    /// change nothing. The kill switch's accept rules are not this: they are for every carrier.
    public var capturedCarriers: [PinnedCarrier] {
        carriers.filter { routesIntoTunnel($0.address) }
    }

    /// The nftables table (kill switch), when the settings ask for one.
    public var firewall: NftTable? { Firewall.table(for: self) }

    public var interfaceName: String { settings.name }
    public var mtu: Int { settings.effectiveMTU }

    public var addresses: [IPPrefix] {
        (settings.ipv4Settings?.interfaceAddresses ?? []) + (settings.ipv6Settings?.interfaceAddresses ?? [])
    }

    /// Whether an address's subnet route is the tunnel's (in table T) rather than the kernel's (in
    /// main): in a family the tunnel routes. The kernel puts a route to a TUN address's subnet in the
    /// main table, where every exemption from the tunnel (a packet plane's, a provider's own
    /// connections, a runtime's mark, a throw route) looks next: a carrier inside that subnet (a
    /// tunnelRemoteAddress of 192.168.1.1 with an address of 192.168.1.2/24) would be taken into the
    /// tunnel by it. So the address gets IFA_F_NOPREFIXROUTE and T the subnet route, which the
    /// exemptions pass over, as iOS keeps tunnelRemoteAddress outside the tunnel whatever the
    /// addresses. In a family the tunnel does not route (no rules look up T) the kernel's stays.
    public func ownsSubnetRoute(_ prefix: IPPrefix) -> Bool {
        (prefix.family == .ipv4 ? routing.ipv4 : routing.ipv6).isActive
    }

    /// The TUN's address `prefix` as rtnetlink adds it.
    public func addressSpec(_ prefix: IPPrefix, interfaceIndex: Int32) -> AddressSpec {
        AddressSpec(interfaceIndex: interfaceIndex, interfaceName: interfaceName, prefix: prefix, noPrefixRoute: ownsSubnetRoute(prefix))
    }

    /// The subnets of the TUN's addresses in `family` (not host addresses, which have none), each once,
    /// leaving out one an included route already has as its destination.
    func subnets(of family: IPFamily) -> [IPPrefix] {
        let included = Set((family == .ipv4 ? routing.ipv4 : routing.ipv6).included.map(\.destination))
        var seen = Set<IPPrefix>()
        return addresses.filter { $0.family == family && !$0.isHost }.map(\.network)
            .filter { !included.contains($0) && seen.insert($0).inserted }
    }

    /// Routes of table T; `interfaceIndex` is the TUN's once it exists.
    public func routes(interfaceIndex: Int32?) -> [RouteSpec] {
        var out: [RouteSpec] = []
        for family in routing.families where family.isActive {
            for route in family.included {
                // Global scope: never the next hop of a route another program adds (RouteSpec.globalScope).
                out.append(RouteSpec(destination: route.destination, type: .unicast, table: slot.table,
                                     outputInterface: interfaceIndex, interfaceName: interfaceName,
                                     gateway: route.gateway, globalScope: true))
            }
            // The TUN's subnets (`ownsSubnetRoute`), as the kernel's connected routes would have been.
            for subnet in subnets(of: family.family) {
                out.append(RouteSpec(destination: subnet, type: .unicast, table: slot.table,
                                     outputInterface: interfaceIndex, interfaceName: interfaceName, globalScope: true))
            }
            for prefix in family.excluded {
                out.append(RouteSpec(destination: prefix, type: .throw, table: slot.table))
            }
        }
        return out
    }

    /// Per routed family: everything not carrying the tunnel's mark looks up T (`not fwmark T lookup T`,
    /// at the slot's lookup priority). A carrier identity other than the slot's mark is exempt before
    /// that by rules that jump past it (`goto`, to a `nop` right after the lookup, so the host's own
    /// later rules still apply): a packet plane's user only to its carriers' addresses, protocols and
    /// ports (a provider's plane, `.userAnywhere`: to every destination); another mark wherever it goes,
    /// as the slot's own. Isolate mode has no carriers here.
    public var rules: [RuleSpec] {
        var rules: [RuleSpec] = []
        let resume = slot.lookupPriority + 1
        for family in routing.families where family.isActive {
            var exemptions: [RuleSpec] = []
            if isolatedIn == nil {
                switch carrierIdentity {
                case .mark(let mark) where mark != slot.fwmark:
                    exemptions.append(RuleSpec(family: family.family, priority: slot.exemptionPriority, table: 0,
                                               action: .goto(resume), fwmark: mark, fwmask: 0xffff_ffff))
                case .user(let uid):
                    for carrier in capturedCarriers where carrier.address.family == family.family {
                        let host = IPPrefix(address: carrier.address, length: family.family.bitWidth)!
                        let transports: [CarrierTransport?] = carrier.transports.isEmpty ? [nil] : carrier.transports
                        for transport in transports {
                            exemptions.append(RuleSpec(family: family.family, priority: slot.exemptionPriority, table: 0,
                                                       action: .goto(resume), destination: host,
                                                       ipProtocol: transport?.protocolNumber,
                                                       destinationPorts: carrier.port.map { $0...$0 },
                                                       uidRange: uid...uid))
                        }
                    }
                case .userAnywhere(let uid):
                    // A provider's plane: out past the tunnel to any destination, as on iOS. The lookup
                    // then goes on with the namespace's own rules (main), as if there were no tunnel.
                    exemptions.append(RuleSpec(family: family.family, priority: slot.exemptionPriority, table: 0,
                                               action: .goto(resume), uidRange: uid...uid))
                default:
                    break
                }
            }
            rules += exemptions
            rules.append(RuleSpec(family: family.family, priority: slot.lookupPriority, table: slot.table,
                                  fwmark: slot.fwmark, fwmask: 0xffff_ffff, invert: true))
            if !exemptions.isEmpty {
                rules.append(RuleSpec(family: family.family, priority: resume, table: 0, action: .nop))
            }
        }
        return rules
    }

    /// The carrier exemption in words, for `plan` and `status`.
    public var carrierExemption: String {
        if isolatedIn != nil { return "none here (isolate mode: the carriers are reached from the caller's namespace)" }
        if case .userAnywhere = carrierIdentity {
            // A provider's own connections bypass its tunnel to every destination, carriers or not.
            guard routing.families.contains(where: \.isActive) || hasKillSwitch else { return "none needed: the tunnel routes nothing" }
            return "\(carrierIdentity.summary) to any address, outside the tunnel (a provider's own connections, as on iOS); "
                + "everyone else's packets go into the tunnel"
        }
        if carriers.isEmpty { return "no carrier endpoints" }
        let list = carriers.map(\.description).joined(separator: ", ")
        switch carrierIdentity {
        case .unidentified(let reason):
            return "by address only, for every process (weaker: \(reason)): \(list)"
        default:
            let captured = capturedCarriers
            let outside = carriers.filter { c in !captured.contains { $0.description == c.description } }
            var text = captured.isEmpty ? ""
                : "only \(carrierIdentity.summary) to \(captured.map(\.description).joined(separator: ", ")); everyone else's packets to these addresses go into the tunnel"
            if !outside.isEmpty {
                if !text.isEmpty { text += "; " }
                text += "none needed for \(outside.map(\.description).joined(separator: ", ")): the tunnel does not route "
                    + (outside.count == 1 ? "it" : "them") + " (reached directly, as everything it does not route)"
            }
            return text
        }
    }

    /// Everything after the TUN is created, in one netlink batch: the link
    /// settings first (routes need the device up), then addresses, routes, rules.
    public func operations(interfaceIndex: Int32) -> [NetlinkOperation] {
        var ops: [NetlinkOperation] = [.setLink(index: interfaceIndex, name: interfaceName, mtu: UInt32(mtu), up: true)]
        ops += addresses.map { .addAddress(addressSpec($0, interfaceIndex: interfaceIndex)) }
        ops += routes(interfaceIndex: interfaceIndex).map { .addRoute($0) }
        ops += rules.map { .addRule($0) }
        return ops
    }

    /// The plan in ip(8) words, as `tunnelgate plan` prints it.
    public func describe(maximumRoutesShown: Int = 50) -> [String] {
        var lines: [String] = []
        lines.append("# tunnel \(interfaceName): table \(slot.table), fwmark 0x\(String(slot.fwmark, radix: 16)), rule priority \(slot.lookupPriority)")
        lines.append("# carrier exemption: \(carrierExemption)")
        for carrier in carriers where carrier.hostName != nil {
            lines.append("# \(carrier.hostName!) resolved to \(carrier.address), pinned for the tunnel's life")
        }
        lines.append("ip tuntap add dev \(interfaceName) mode tun   # TUNSETIFF, IFF_TUN|IFF_NO_PI, held open by tunnelgate")
        if let ns = isolatedIn {
            lines.append("ip link set dev \(interfaceName) netns \(ns)   # isolate mode: configured there, carriers stay here")
        }
        let ops = operations(interfaceIndex: 0)
        var shownRoutes = 0, hiddenRoutes = 0
        for op in ops {
            if case .addRoute = op {
                if shownRoutes >= maximumRoutesShown { hiddenRoutes += 1; continue }
                shownRoutes += 1
            }
            lines.append(op.description)
        }
        if hiddenRoutes > 0 { lines.append("# … and \(hiddenRoutes) more routes in table \(slot.table)") }
        for family in routing.families where !family.isActive {
            lines.append("# \(family.family): no included routes; the tunnel routes no \(family.family) traffic")
        }
        if let table = firewall {
            lines.append("nft add table inet \(table.name)   # \(table.ruleCount) rules; stays until `tunnelgate down \(interfaceName)`")
            for chain in table.chains {
                lines.append("nft add chain inet \(table.name) \(chain.name) { type \(chain.kind.rawValue) hook \(chain.hook) priority \(chain.priority); policy \(chain.policy); }   # \(chain.rules.count) rules")
            }
        }
        for change in sysctls { lines.append("\(change)   # \(change.goesWithTunnel ? "goes with the interface" : "restored on down")") }
        if settings.ipv6Settings == nil {
            lines.append("sysctl -w net.ipv6.conf.\(interfaceName).disable_ipv6=1   # no ipv6Settings: no IPv6 of any kind on the TUN")
        }
        if settings.dnsSettings != nil {
            lines.append("# dnsSettings: applied through the DNS backend detected at up")
        }
        switch settings.runtime {
        case .none:
            lines.append("# runtime: none (packets read from \(interfaceName) are counted and dropped)")
        case .callback(let r):
            lines.append("# runtime: \(r.library) behind the callback ABI, \(r.packetPath.rawValue) packet path")
        case .mesh(let m):
            lines.append("# runtime: MeshGuard \(m.library), mtu \(mtu) (tunnel payloads are at most \(MeshRuntimeSettings.maximumMTU) bytes; larger mtu is refused)")
        case .wireguard(let w):
            lines.append("# runtime: built-in WireGuard, \(w.peers.count) peer\(w.peers.count == 1 ? "" : "s")")
        }
        return lines
    }
}


extension TunnelPlan {
    /// What the tunnel's runtime may know of this plan.
    public var runtimeContext: RuntimeContext {
        var mark: UInt32?
        if case .mark(let m) = carrierIdentity { mark = m }
        return RuntimeContext(interfaceName: interfaceName, mtu: mtu, carriers: carriers, carrierMark: mark)
    }
}
