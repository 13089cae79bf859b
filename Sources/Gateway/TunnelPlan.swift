import Netlink
import Nftables
import TunnelgateSettings

/// The kernel objects a tunnel wants, in the order they are made. Built
/// from validated settings without touching the kernel, so `plan` prints
/// exactly what `up` will do.
public struct TunnelPlan: Sendable {
    public var settings: TunnelSettings
    public var slot: TunnelSlot
    public var carrierAddresses: [IPAddress]
    public var routing: RoutingIntent

    /// Isolate mode: the namespace the interface is moved into. Its only way
    /// out is the tunnel: the kill switch is always on there, with no
    /// exception for carriers (they stay in the caller's namespace).
    public var isolatedIn: String?

    public init(settings: TunnelSettings, slot: TunnelSlot, carrierAddresses: [IPAddress], isolatedIn: String? = nil) {
        self.isolatedIn = isolatedIn
        self.settings = settings
        self.slot = slot
        self.carrierAddresses = carrierAddresses
        self.routing = RoutingIntent(settings: settings, carrierAddresses: carrierAddresses)
    }

    /// The nftables table (kill switch), when the settings ask for one.
    public var firewall: NftTable? { Firewall.table(for: self) }

    public var interfaceName: String { settings.name }
    public var mtu: Int { settings.effectiveMTU }

    public var addresses: [IPPrefix] {
        (settings.ipv4Settings?.interfaceAddresses ?? []) + (settings.ipv6Settings?.interfaceAddresses ?? [])
    }

    /// Routes of table T; `interfaceIndex` is the TUN's once it exists.
    public func routes(interfaceIndex: Int32?) -> [RouteSpec] {
        var out: [RouteSpec] = []
        for family in routing.families where family.isActive {
            for route in family.included {
                out.append(RouteSpec(destination: route.destination, type: .unicast, table: slot.table,
                                     outputInterface: interfaceIndex, interfaceName: interfaceName,
                                     gateway: route.gateway))
            }
            for prefix in family.excluded {
                out.append(RouteSpec(destination: prefix, type: .throw, table: slot.table))
            }
        }
        return out
    }

    /// One rule per routed family: everything not carrying the tunnel's mark looks up T.
    public var rules: [RuleSpec] {
        var rules: [RuleSpec] = []
        for family in routing.families where family.isActive {
            rules.append(RuleSpec(family: family.family, priority: slot.lookupPriority, table: slot.table,
                                  fwmark: slot.fwmark, fwmask: 0xffff_ffff, invert: true))
        }
        return rules
    }

    /// Everything after the TUN is created, in one netlink batch: the link
    /// settings first (routes need the device up), then addresses, routes, rules.
    public func operations(interfaceIndex: Int32) -> [NetlinkOperation] {
        var ops: [NetlinkOperation] = [.setLink(index: interfaceIndex, name: interfaceName, mtu: UInt32(mtu), up: true)]
        ops += addresses.map { .addAddress(AddressSpec(interfaceIndex: interfaceIndex, interfaceName: interfaceName, prefix: $0)) }
        ops += routes(interfaceIndex: interfaceIndex).map { .addRoute($0) }
        ops += rules.map { .addRule($0) }
        return ops
    }

    /// The plan in ip(8) words, as `tunnelgate plan` prints it.
    public func describe(maximumRoutesShown: Int = 50) -> [String] {
        var lines: [String] = []
        lines.append("# tunnel \(interfaceName): table \(slot.table), fwmark 0x\(String(slot.fwmark, radix: 16)), rule priority \(slot.lookupPriority)")
        let carriers = carrierAddresses.map(\.description).joined(separator: ", ")
        lines.append("# carrier endpoints (kept off the tunnel): \(carriers.isEmpty ? "none" : carriers)")
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
        for change in sysctls { lines.append("\(change)   # restored on down") }
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

