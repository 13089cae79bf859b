import TunnelgateSettings

/// A lab topology: nodes (each a network namespace) joined by links (each a veth pair), with
/// addresses, routes, forwarding, a resolver per node and the node whose links are watched for
/// leaks. Parsed from JSON (`Topology.parse`, docs/lab.md has every key).
public struct Topology: Sendable, Equatable {
    public var name: String
    public var nodes: [Node]
    public var links: [Link]
    /// The node whose links are its "physical" ones: packets leaving it by them are counted by
    /// the leak watch (on the far end of each link, and by uid on the node itself).
    public var client: String?

    public struct Node: Sendable, Equatable {
        public var name: String
        /// net.ipv4.ip_forward and net.ipv6.conf.all.forwarding.
        public var forwarding: Bool
        public var routes: [Route]
        /// The nameservers of the node's resolv.conf (/etc/netns/NAMESPACE/resolv.conf).
        public var nameservers: [IPAddress]
        /// A truthful DNS server (dnsmasq) run in the node, answering these names.
        public var dnsRecords: [(name: String, address: IPAddress)]
        /// The interface NAT (`lab nat`) translates to.
        public var wan: String?
        /// Extra sysctls written in the node after it is made (keys under net.).
        public var sysctls: [(key: String, value: String)]

        public init(name: String, forwarding: Bool = false, routes: [Route] = [], nameservers: [IPAddress] = [],
                    dnsRecords: [(name: String, address: IPAddress)] = [], wan: String? = nil,
                    sysctls: [(key: String, value: String)] = []) {
            self.name = name
            self.forwarding = forwarding
            self.routes = routes
            self.nameservers = nameservers
            self.dnsRecords = dnsRecords
            self.wan = wan
            self.sysctls = sysctls
        }

        public static func == (a: Node, b: Node) -> Bool {
            a.name == b.name && a.forwarding == b.forwarding && a.routes == b.routes && a.nameservers == b.nameservers
                && a.dnsRecords.map(\.name) == b.dnsRecords.map(\.name) && a.dnsRecords.map(\.address) == b.dnsRecords.map(\.address)
                && a.wan == b.wan && a.sysctls.map(\.key) == b.sysctls.map(\.key) && a.sysctls.map(\.value) == b.sysctls.map(\.value)
        }
    }

    public struct Route: Sendable, Equatable {
        public var destination: IPPrefix
        public var gateway: IPAddress?
        /// The interface; when absent, the one whose address covers the gateway.
        public var interface: String?
    }

    /// One end of a link: an interface in a node with its addresses.
    public struct End: Sendable, Equatable {
        public var node: String
        public var interface: String
        public var addresses: [IPPrefix]
    }

    public struct Link: Sendable, Equatable {
        public var name: String
        /// `a` is the near end (the client's side of its links); `lab impair LINK down` takes the
        /// far end `b` down, so that `a` sees its carrier go, as when a cable is pulled upstream.
        public var a: End
        public var b: End
    }

    public func node(_ name: String) -> Node? { nodes.first { $0.name == name } }
    public func link(_ name: String) -> Link? { links.first { $0.name == name } }

    /// The ends of links in `node`.
    public func ends(of node: String) -> [End] {
        links.flatMap { [$0.a, $0.b] }.filter { $0.node == node }
    }

    /// For each link of the client: the far end, where the leak watch counts what arrives from the client.
    public var clientLinks: [(link: Link, near: End, far: End)] {
        guard let client else { return [] }
        return links.compactMap { l in
            if l.a.node == client { return (l, l.a, l.b) }
            if l.b.node == client { return (l, l.b, l.a) }
            return nil
        }
    }

    /// The route's interface: the one named, else the end of `node` whose prefix holds the gateway.
    public func interface(for route: Route, in node: String) -> String? {
        if let i = route.interface { return i }
        guard let gw = route.gateway else { return nil }
        return ends(of: node).first { $0.addresses.contains { $0.contains(gw) } }?.interface
    }
}
