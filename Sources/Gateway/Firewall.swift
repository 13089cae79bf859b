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
        let killSwitch = s.includeAllNetworks || plan.isolatedIn != nil
        guard killSwitch || s.forwarding != nil else { return nil }
        // In isolate mode the carriers are reached from the caller's namespace, not from this one.
        let carriers = plan.isolatedIn == nil ? plan.carrierAddresses : []
        let name = s.name
        let tag = "tunnelgate:\(name)"
        func rule(_ m: [NftMatch], _ v: NftVerdict, _ why: String) -> NftRule { NftRule(m, v, comment: "\(tag) \(why)") }
        let dnsServers = s.dnsSettings?.servers ?? []
        let sets = [
            NftSet(name: "carriers4", family: .ipv4, elements: carriers.filter { $0.family == .ipv4 }),
            NftSet(name: "carriers6", family: .ipv6, elements: carriers.filter { $0.family == .ipv6 }),
            NftSet(name: "dns4", family: .ipv4, elements: dnsServers.filter { $0.family == .ipv4 }),
            NftSet(name: "dns6", family: .ipv6, elements: dnsServers.filter { $0.family == .ipv6 }),
        ]

        var output: [NftRule] = [rule([.outputInterface("lo")], .accept, "loopback")]
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
        output.append(rule([.destinationInSet("carriers4", .ipv4)], .accept, "carrier"))
        output.append(rule([.destinationInSet("carriers6", .ipv6)], .accept, "carrier"))
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
            rule([.sourceInSet("carriers4", .ipv4)], .accept, "carrier"),
            rule([.sourceInSet("carriers6", .ipv6)], .accept, "carrier"),
        ]
        for type in neighbourDiscovery { input.append(rule([.icmpv6Type(type)], .accept, "neighbour discovery")) }
        // DHCPv4 replies come from addresses not yet known to be local.
        input.append(rule([.transport(protocolNumber: 17, destinationPort: 68)], .accept, "dhcp"))
        if s.excludeLocalNetworks {
            for p in localIPv4 + localIPv6 { input.append(rule([.source(p)], .accept, "local network")) }
        }
        input.append(rule([], .drop, "blocked"))

        // Forwarding: the sources reach the tunnel and nothing else (local
        // networks too with excludeLocalNetworks); replies come back.
        let sources = s.forwarding?.sources ?? []
        var forward: [NftRule] = []
        for p in sources { forward.append(rule([.source(p), .outputInterface(name)], .accept, "forwarded into the tunnel")) }
        forward.append(rule([.inputInterface(name), .establishedOrRelated], .accept, "replies from the tunnel"))
        if s.excludeLocalNetworks {
            for p in sources {
                for local in RoutingIntent.localNetworks[p.family]! {
                    forward.append(rule([.source(p), .destination(local)], .accept, "forwarded to a local network"))
                }
            }
        }
        for p in sources { forward.append(rule([.source(p)], .drop, "forwarded elsewhere")) }
        if killSwitch {
            forward.append(rule([.outputInterface(name)], .accept, "into the tunnel"))
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
        chains.append(NftChain(name: "forward", hook: .forward, priority: 0, policy: killSwitch ? .drop : .accept, rules: forward))
        if !postrouting.isEmpty {
            chains.append(NftChain(name: "postrouting", hook: .postrouting, kind: .nat, priority: 100, policy: .accept, rules: postrouting))
        }
        return NftTable(name: tableName(name), comment: tag, sets: sets, chains: chains)
    }
}
