import Netlink
import Nftables
import TunnelgateSettings

/// The nftables table of a tunnel: `inet tunnelgate-NAME`. It exists when
/// `includeAllNetworks` is set (the kill switch) or when the tunnel forwards
/// for others; every rule's comment starts with `tunnelgate:NAME`, the marker
/// teardown and recovery go by.
public enum Firewall {
    public static func tableName(_ tunnel: String) -> String { "tunnelgate-\(tunnel)" }

    static let localIPv4 = RoutingIntent.localNetworks[.ipv4]!
    static let localIPv6 = RoutingIntent.localNetworks[.ipv6]!
    /// Router and neighbour solicitation/advertisement: IPv6 cannot reach
    /// even its carrier or gateway without them.
    static let neighbourDiscovery: [UInt8] = [133, 134, 135, 136]

    static let dnsPorts: [UInt16] = [53, 853]

    /// The table for a plan, or nil when the tunnel needs none.
    public static func table(for plan: TunnelPlan) -> NftTable? {
        let s = plan.settings
        let killSwitch = plan.hasKillSwitch
        let markCarriers = plan.carrierMarkRules
        guard killSwitch || s.forwarding != nil || !markCarriers.isEmpty else { return nil }
        let name = s.name
        let tag = "tunnelgate:\(name)"
        func rule(_ m: [NftMatch], _ v: NftVerdict, _ why: String, statements: [NftStatement] = []) -> NftRule {
            NftRule(m, v, statements: statements, comment: "\(tag) \(why)")
        }
        let dnsServers = s.dnsSettings?.servers ?? []
        let sets = [
            NftSet(name: "dns4", family: .ipv4, elements: dnsServers.filter { $0.family == .ipv4 }),
            NftSet(name: "dns6", family: .ipv6, elements: dnsServers.filter { $0.family == .ipv6 }),
        ]

        var output: [NftRule] = [rule([.outputInterface("lo")], .accept, "loopback")]
        // The carriers first (a carrier may listen on 53 or 853): only the identity's packets to each
        // carrier's address, protocol and port. In isolate mode the carriers are not in this namespace.
        output += carrierRules(plan, direction: .outbound).map { rule($0, .accept, "carrier") }
        // DNS reaches only the tunnel's servers, and only through the tunnel.
        for proto: UInt8 in [17, 6] {
            for port in dnsPorts {
                for family in IPFamily.allCases {
                    output.append(rule([.outputInterface(name), .destinationInSet(family == .ipv4 ? "dns4" : "dns6", family),
                                        .transport(protocolNumber: proto, destinationPort: port)], .accept, "dns via tunnel"))
                }
                output.append(rule([.transport(protocolNumber: proto, destinationPort: port)], .drop, "dns elsewhere"))
            }
        }
        output.append(rule([.outputInterface(name)], .accept, "tunnel"))
        for type in neighbourDiscovery {
            output.append(rule([.icmpv6Type(type)], .accept, "neighbour discovery"))
        }
        if s.excludeLocalNetworks {
            for p in localIPv4 + localIPv6 { output.append(rule([.destination(p)], .accept, "local network")) }
        }
        output.append(rule([], .drop, "blocked"))

        var input: [NftRule] = [
            rule([.inputInterface("lo")], .accept, "loopback"),
            rule([.inputInterface(name)], .accept, "tunnel"),
            rule([.establishedOrRelated], .accept, "replies"),
        ]
        input += carrierRules(plan, direction: .inbound).map { rule($0, .accept, "carrier") }
        for type in neighbourDiscovery { input.append(rule([.icmpv6Type(type)], .accept, "neighbour discovery")) }
        // DHCPv4 replies come from addresses not yet known to be local.
        input.append(rule([.transport(protocolNumber: 17, destinationPort: 68)], .accept, "dhcp"))
        if s.excludeLocalNetworks {
            for p in localIPv4 + localIPv6 { input.append(rule([.source(p)], .accept, "local network")) }
        }
        input.append(rule([], .drop, "blocked"))

        // Forwarding: the configured sources reach the tunnel (and, with excludeLocalNetworks, local
        // networks) and nothing else; replies come back; nothing that arrives from the tunnel is forwarded
        // anywhere else, and nobody else's packets are forwarded into it. TCP through the tunnel has its
        // MSS clamped to the tunnel's MTU both ways, for hosts behind a path that filters ICMP.
        let sources = s.forwarding?.sources ?? []
        var forward: [NftRule] = []
        if !sources.isEmpty {
            for family in IPFamily.allCases {
                let mss = plan.maximumSegmentSize(family)
                for direction: NftMatch in [.outputInterface(name), .inputInterface(name)] {
                    forward.append(rule([direction, .family(family), .tcpSYN, .tcpMaximumSegmentSizeAbove(mss)], .next,
                                        "clamp mss", statements: [.setTCPMaximumSegmentSize(mss)]))
                }
            }
        }
        forward.append(rule([.inputInterface(name), .establishedOrRelated], .accept, "replies from the tunnel"))
        if !sources.isEmpty {
            forward.append(rule([.inputInterface(name)], .drop, "nothing from the tunnel is forwarded"))
        }
        for p in sources { forward.append(rule([.source(p), .outputInterface(name)], .accept, "forwarded into the tunnel")) }
        if s.excludeLocalNetworks {
            for p in sources {
                for local in RoutingIntent.localNetworks[p.family]! {
                    forward.append(rule([.source(p), .destination(local)], .accept, "forwarded to a local network"))
                }
            }
        }
        for p in sources { forward.append(rule([.source(p)], .drop, "forwarded elsewhere")) }
        if !sources.isEmpty {
            // Only the configured sources are forwarded into the tunnel, kill switch or not.
            forward.append(rule([.outputInterface(name)], .drop, "not a configured source"))
        }
        if killSwitch {
            if sources.isEmpty { forward.append(rule([.outputInterface(name)], .accept, "into the tunnel")) }
            forward.append(rule([], .drop, "blocked"))
        }
        var postrouting: [NftRule] = []
        if s.forwarding?.masquerade == true {
            for p in sources { postrouting.append(rule([.source(p), .outputInterface(name)], .masquerade, "masquerade")) }
        }

        var chains: [NftChain] = []
        if killSwitch {
            chains.append(NftChain(name: "output", hook: .output, priority: 0, policy: .drop, rules: output))
            chains.append(NftChain(name: "input", hook: .input, priority: 0, policy: .drop, rules: input))
        }
        if killSwitch || s.forwarding != nil {
            chains.append(NftChain(name: "forward", hook: .forward, priority: 0, policy: killSwitch ? .drop : .accept, rules: forward))
        }
        if !markCarriers.isEmpty {
            // The carrier's replies get the tunnel's mark back (saved in the connection when the identity
            // sent to it), so with src_valid_mark a strict reverse-path check (rp_filter=1, or a
            // firewall's `fib saddr . mark . iif`) looks them up as the routing did, outside the tunnel.
            let mark = plan.slot.fwmark
            chains.append(NftChain(name: "carrier-save", hook: .postrouting, priority: -150, policy: .accept,
                                   rules: markCarriers.map { rule($0, .next, "carrier mark saved", statements: [.setConntrackMark(mark)]) }))
            chains.append(NftChain(name: "carrier-restore", hook: .prerouting, priority: -150, policy: .accept,
                                   rules: [rule([.conntrackMark(mark)], .next, "carrier mark restored",
                                                statements: [.restoreMarkFromConntrack])]))
        }
        if !postrouting.isEmpty {
            chains.append(NftChain(name: "postrouting", hook: .postrouting, kind: .nat, priority: 100, policy: .accept, rules: postrouting))
        }
        return NftTable(name: tableName(name), comment: tag, sets: sets, chains: chains)
    }

    enum Direction { case outbound, inbound }

    /// The matches of the carrier exemption: per carrier and transport, the identity (outbound only:
    /// a mark or a socket's owner exists only for locally sent packets) and the carrier's address,
    /// protocol and port. Inbound, what comes from a carrier's address, protocol and port.
    /// `onlyCaptured`: only the carriers the tunnel's routes would take (`capturedCarriers`).
    /// `.userAnywhere` outbound is one match, the socket's owner, for every destination.
    static func carrierRules(_ plan: TunnelPlan, direction: Direction, onlyCaptured: Bool = false) -> [[NftMatch]] {
        guard plan.isolatedIn == nil else { return [] }
        var identity: [NftMatch] = []
        if direction == .outbound {
            switch plan.carrierIdentity {
            case .slotMark: identity = [.mark(plan.slot.fwmark)]
            case .mark(let m): identity = [.mark(m)]
            case .user(let u): identity = [.socketUser(u)]
            case .userAnywhere(let u):
                // A provider's plane: everything it sends, to any address (replies come back as
                // established connections; the inbound carrier rules stay for the carriers).
                if direction == .outbound { return [[.socketUser(u)]] }
            case .unidentified: identity = []
            case .planeUser: return []  // no uid yet: nothing is exempt
            }
        }
        var out: [[NftMatch]] = []
        for carrier in onlyCaptured ? plan.capturedCarriers : plan.carriers {
            let host = [NftMatch.destination(IPPrefix(address: carrier.address, length: carrier.address.family.bitWidth)!)]
            let source = [NftMatch.source(IPPrefix(address: carrier.address, length: carrier.address.family.bitWidth)!)]
            let transports = carrier.transports
            if transports.isEmpty {
                out.append(identity + (direction == .outbound ? host : source))
                continue
            }
            for t in transports {
                switch direction {
                case .outbound:
                    out.append(identity + host + [.transport(protocolNumber: t.protocolNumber, destinationPort: carrier.port)])
                case .inbound:
                    out.append(source + (carrier.port.map { [.transportSource(protocolNumber: t.protocolNumber, sourcePort: $0)] }
                                         ?? [.transport(protocolNumber: t.protocolNumber, destinationPort: nil)]))
                }
            }
        }
        return out
    }
}

extension TunnelPlan {
    /// The matches of the carrier identity's packets, whose connections remember the slot's mark for the
    /// replies (Firewall's carrier-save chain): for a tunnel that routes something, with an identity,
    /// outside isolate mode, to the carriers its routes would take (a reply from one it leaves outside
    /// passes a strict reverse-path check as it is). A provider's plane (`.userAnywhere`): all its packets,
    /// since its routes leave the tunnel for every destination.
    var carrierMarkRules: [[NftMatch]] {
        guard isolatedIn == nil, !carrierIdentity.isUnidentified, routing.families.contains(where: \.isActive) else { return [] }
        return Firewall.carrierRules(self, direction: .outbound, onlyCaptured: true)
    }

    /// The kill switch: `includeAllNetworks`, and always in isolate mode.
    public var hasKillSwitch: Bool { settings.includeAllNetworks || isolatedIn != nil }

    /// The largest TCP segment that fits the tunnel's MTU (IPv4: 20 + 20 bytes of headers; IPv6: 40 + 20).
    public func maximumSegmentSize(_ family: IPFamily) -> UInt16 {
        UInt16(clamping: mtu - (family == .ipv4 ? 40 : 60))
    }
}
