import LinuxSystem
import Netlink
import Nftables
import TunnelgateSettings

/// What `lab impair LINK …` can do to a link.
public enum Impairment: Sendable, Equatable {
    case loss(percent: Int)
    case rate(kbit: UInt64)
    case mtuBlackhole(bytes: Int)
    case delay(milliseconds: Int, jitterMilliseconds: Int)
    case down
    case up
    case clear
}

/// Impairments and NAT, kept in the run's state and applied to the kernel: per node one nftables
/// table `tunnelgate_lab` (loss, black holes, NAT), rebuilt whole on every change; htb qdiscs on
/// the link's interfaces for rates; the far end's link state for flaps.
public struct Impairments {
    public static let table = "tunnelgate_lab"
    let lab: Lab

    public init(lab: Lab) { self.lab = lab }

    public func apply(_ impairment: Impairment, to linkName: String) throws {
        let link = try lab.link(linkName)
        var current = lab.state.impairments[linkName] ?? LinkImpairment()
        switch impairment {
        case .loss(let p):
            guard (0...100).contains(p) else { throw LabError("loss is a percentage from 0 to 100, not \(p)") }
            current.lossPercent = p == 0 ? nil : p
        case .mtuBlackhole(let bytes):
            guard (68...65535).contains(bytes) else { throw LabError("mtu-blackhole takes a packet size from 68 to 65535 bytes, not \(bytes)") }
            current.blackholeBytes = bytes
        case .rate(let kbit):
            guard kbit >= 8 else { throw LabError("rate is at least 8 kbit/s, not \(kbit)") }
            for end in [link.a, link.b] {
                do {
                    // A burst of 10 ms at the rate, and never less than two full-size frames.
                    let burst = UInt32(max(kbit * 1000 / 8 / 100, 3200))
                    try lab.namespace(of: end.node).netlink().setRateLimit(device: end.interface, rateBitsPerSecond: kbit * 1000,
                                                                          burstBytes: burst)
                } catch { throw LabError("link \(linkName): \(error)") }
            }
            current.rateKbit = kbit
        case .delay(let ms, let jitter):
            // netem is the only qdisc that delays; refuse clearly where the kernel lacks it.
            do {
                for end in [link.a, link.b] {
                    try lab.namespace(of: end.node).netlink().setDelay(device: end.interface, delayNanoseconds: Int64(ms) * 1_000_000,
                                                                      jitterNanoseconds: Int64(jitter) * 1_000_000)
                }
            } catch let e as NetlinkError where e.errno == .noSuchEntry {
                throw LabError("delay and jitter need the kernel's netem qdisc (sch_netem, CONFIG_NET_SCH_NETEM), which this kernel does not have")
            } catch {
                throw LabError("link \(linkName): \(error)")
            }
            current.rateKbit = nil
        case .down, .up:
            let up = impairment == .up
            do { try lab.namespace(of: link.b.node).netlink().setLink(link.b.interface, up: up) } catch {
                throw LabError("link \(linkName): \(error)")
            }
            current.down = !up
            if up {
                // The near end's IPv4 routes through the link stay (carrier loss only marks them linkdown);
                // put back any that an outside change took.
                try lab.addRoutes(node: link.a.node)
                try lab.addRoutes(node: link.b.node)
            }
        case .clear:
            for end in [link.a, link.b] {
                do { try lab.namespace(of: end.node).netlink().removeRootQdisc(device: end.interface) } catch {
                    throw LabError("link \(linkName): \(error)")
                }
            }
            if current.down {
                do { try lab.namespace(of: link.b.node).netlink().setLink(link.b.interface, up: true) } catch {
                    throw LabError("link \(linkName): \(error)")
                }
            }
            current = LinkImpairment()
        }
        let stored = current
        try lab.mutateState { $0.impairments[linkName] = stored.isEmpty ? nil : stored }
        try rebuild(nodes: [link.a.node, link.b.node])
    }

    public func setNAT(router: String, mode: NATMode?) throws {
        guard let node = lab.topology.node(router) else { _ = try lab.namespace(of: router); return }
        guard node.wan != nil else {
            throw LabError("node \(router) has no \"wan\" interface in the topology: NAT needs one to translate to")
        }
        try lab.mutateState { $0.nat[router] = mode }
        try rebuild(nodes: [router])
    }

    /// Rebuilds the `tunnelgate_lab` table of each node from the state (or deletes it when nothing is in force).
    func rebuild(nodes: [String]) throws {
        for node in Set(nodes) {
            let program = self.program(for: node)
            let nft = try lab.namespace(of: node).nftables()
            do {
                if program.chains.isEmpty { try nft.delete(table: Self.table) } else { try nft.replace(program) }
            } catch {
                throw LabError("node \(node): \(error)")
            }
        }
    }

    private func r(_ n: UInt32) -> NftRegister { .r32(n) }

    func program(for node: String) -> NftProgram {
        var rules: [NftProgramRule] = []
        for l in lab.topology.links {
            guard let imp = lab.state.impairments[l.name] else { continue }
            for end in [l.a, l.b] where end.node == node {
                let out: [NftExpression] = [.meta(.outputName, r(0)), .compare(.equal, r(0), NftExpression.interfaceName(end.interface))]
                if let p = imp.lossPercent {
                    rules.append(NftProgramRule(out + [.random(modulus: 100, r(1)), .hostToNetwork32(r(1)),
                                                       .compare(.less, r(1), NftExpression.bigEndianBytes(UInt32(p))), .counter, .drop],
                                                comment: "loss \(p)% \(l.name)"))
                }
                if let size = imp.blackholeBytes {
                    rules.append(NftProgramRule(out + [.meta(.length, r(1)), .hostToNetwork32(r(1)),
                                                       .compare(.greater, r(1), NftExpression.bigEndianBytes(UInt32(size))), .counter, .drop],
                                                comment: "mtu black hole \(size) \(l.name)"))
                    // The messages that would tell the sender: ICMP fragmentation needed (3/4), ICMPv6 packet too big (2).
                    rules.append(NftProgramRule(out + [.meta(.nfproto, r(1)), .compare(.equal, r(1), [2]),
                                                       .meta(.l4proto, r(1)), .compare(.equal, r(1), [1]),
                                                       .payload(.transport, offset: 0, length: 2, r(1)), .compare(.equal, r(1), [3, 4]),
                                                       .counter, .drop], comment: "no fragmentation-needed \(l.name)"))
                    rules.append(NftProgramRule(out + [.meta(.nfproto, r(1)), .compare(.equal, r(1), [10]),
                                                       .meta(.l4proto, r(1)), .compare(.equal, r(1), [58]),
                                                       .payload(.transport, offset: 0, length: 1, r(1)), .compare(.equal, r(1), [2]),
                                                       .counter, .drop], comment: "no packet-too-big \(l.name)"))
                }
            }
        }
        var chains: [NftProgramChain] = []
        if !rules.isEmpty { chains.append(NftProgramChain(name: "impair", hook: .postrouting, priority: 500, rules: rules)) }
        if let mode = lab.state.nat[node], let wan = lab.topology.node(node)?.wan {
            let flags: UInt32 = switch mode {
            case .masquerade: 0
            case .portPreserving: NftExpression.natPersistent
            case .portRandom: NftExpression.natFullyRandom
            }
            chains.append(NftProgramChain(name: "nat", hook: .postrouting, kind: .nat, priority: 100, rules: [
                NftProgramRule([.meta(.outputName, r(0)), .compare(.equal, r(0), NftExpression.interfaceName(wan)), .counter,
                                .masquerade(flags: flags)], comment: "nat \(mode.rawValue) \(wan)"),
            ]))
        }
        return NftProgram(name: Self.table, comment: "tunnelgate-lab: impairments and NAT", chains: chains)
    }

    /// `lab addr NODE IFACE NEWADDR`: the new address first, then the old ones of its family go, so
    /// the prefix route never disappears; the node's routes are put back where the change took any.
    public func changeAddress(node: String, interface: String, to newText: String) throws {
        let nl = try lab.namespace(of: node).netlink()
        guard let link = try nl.link(named: interface) else { throw LabError("node \(node) has no interface \(interface)") }
        let old = try nl.addresses(interfaceIndex: link.index)
        let family: IPFamily
        var prefix: IPPrefix
        if newText.contains("/"), let p = IPPrefix(newText) {
            prefix = p
            family = p.family
        } else if let a = IPAddress(newText) {
            family = a.family
            let length = old.first { $0.prefix.family == family && !$0.prefix.address.isLinkLocal }?.prefix.length ?? family.bitWidth
            prefix = IPPrefix(address: a, length: length)!
        } else {
            throw LabError("\(JSONValueQuote.quote(newText)) is not an address (10.231.0.3, 10.231.0.3/24, fd00:231::3/64)")
        }
        let stale = old.filter { $0.prefix.family == family && !$0.prefix.address.isLinkLocal && $0.prefix != prefix }
        do {
            if !old.contains(where: { $0.prefix == prefix }) {
                try nl.apply([.addAddress(AddressSpec(interfaceIndex: link.index, interfaceName: interface, prefix: prefix))])
            }
            try nl.apply(stale.map { .deleteAddress(AddressSpec(interfaceIndex: link.index, interfaceName: interface, prefix: $0.prefix)) })
        } catch {
            throw LabError("node \(node): \(error)")
        }
        try lab.addRoutes(node: node)
        let now = try nl.addresses(interfaceIndex: link.index).filter { !$0.prefix.address.isLinkLocal }.map(\.prefix.description)
        try lab.mutateState { $0.addressOverrides[node, default: [:]][interface] = now }
    }
}

extension IPAddress {
    /// fe80::/10 (IPv6 link-local); 169.254.0.0/16 for IPv4.
    var isLinkLocal: Bool {
        switch self {
        case .v4(let a): return a.value >> 16 == 0xA9FE
        case .v6(let a): return a.high >> 54 == 0x3FA
        }
    }
}
