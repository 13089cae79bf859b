import TunnelgateSettings

/// The netfilter hook a base chain attaches to (NF_INET_*).
public enum NftHook: UInt32, Sendable, Hashable {
    case prerouting = 0   // NF_INET_PRE_ROUTING
    case input = 1        // NF_INET_LOCAL_IN
    case forward = 2      // NF_INET_FORWARD
    case output = 3       // NF_INET_LOCAL_OUT
    case postrouting = 4  // NF_INET_POST_ROUTING
}

public enum NftVerdict: Sendable, Hashable {
    case accept, drop
    /// `masquerade` (nat chains on postrouting).
    case masquerade
    /// No verdict: the rule's statements run and evaluation goes on with the next rule.
    case next
}

/// A statement a rule runs when it matches, before its verdict.
public enum NftStatement: Sendable, Hashable {
    /// `tcp option maxseg size set N`.
    case setTCPMaximumSegmentSize(UInt16)
    /// `ct mark set N`: the connection remembers a mark.
    case setConntrackMark(UInt32)
    /// `meta mark set ct mark`: the packet gets its connection's mark back.
    case restoreMarkFromConntrack
    /// `log group G snaplen N`: a copy of the packet's first `snaplen` bytes goes to nfnetlink_log
    /// group G (NetfilterLogSocket); the packet itself is not changed.
    case log(group: UInt16, snaplen: UInt32)
}

/// One condition of a rule; a rule matches when all of its conditions do.
public enum NftMatch: Sendable, Hashable {
    /// `oifname "NAME"` (by name, so it holds while the interface is absent).
    case outputInterface(String)
    /// `iifname "NAME"`.
    case inputInterface(String)
    /// `meta nfproto ipv4|ipv6`.
    case family(IPFamily)
    /// `ip daddr PREFIX` / `ip6 daddr PREFIX`.
    case destination(IPPrefix)
    /// `ip saddr PREFIX` / `ip6 saddr PREFIX`.
    case source(IPPrefix)
    /// `ip daddr @SET` / `ip6 daddr @SET`.
    case destinationInSet(String, IPFamily)
    /// `ip saddr @SET` / `ip6 saddr @SET`.
    case sourceInSet(String, IPFamily)
    /// `meta l4proto P [th dport N]` (6 tcp, 17 udp, 58 ipv6-icmp).
    case transport(protocolNumber: UInt8, destinationPort: UInt16?)
    /// `icmpv6 type N`.
    case icmpv6Type(UInt8)
    /// `ct state established,related`.
    case establishedOrRelated
    /// `meta mark N`.
    case mark(UInt32)
    /// `meta skuid N`: the sending socket's owner (output and postrouting hooks only).
    case socketUser(UInt32)
    /// `ct mark N`.
    case conntrackMark(UInt32)
    /// `meta l4proto P th sport N`.
    case transportSource(protocolNumber: UInt8, sourcePort: UInt16)
    /// `tcp flags syn` (SYN set, with or without ACK).
    case tcpSYN
    /// `tcp option maxseg size > N`.
    case tcpMaximumSegmentSizeAbove(UInt16)
}

public struct NftRule: Sendable, Hashable {
    public var matches: [NftMatch]
    public var statements: [NftStatement]
    public var verdict: NftVerdict
    /// Shown by `nft list` as the rule's comment; also the ownership marker.
    public var comment: String
    public var counter: Bool

    public init(_ matches: [NftMatch], _ verdict: NftVerdict, statements: [NftStatement] = [], comment: String,
                counter: Bool = true) {
        self.matches = matches
        self.statements = statements
        self.verdict = verdict
        self.comment = comment
        self.counter = counter
    }
}

public struct NftChain: Sendable, Hashable {
    public enum Kind: String, Sendable { case filter, nat }
    public var name: String
    public var hook: NftHook
    public var kind: Kind
    public var priority: Int32
    public var policy: NftVerdict
    public var rules: [NftRule]

    public init(name: String, hook: NftHook, kind: Kind = .filter, priority: Int32, policy: NftVerdict, rules: [NftRule]) {
        self.name = name
        self.hook = hook
        self.kind = kind
        self.priority = priority
        self.policy = policy
        self.rules = rules
    }
}

/// A named set of addresses (`type ipv4_addr` / `ipv6_addr`).
public struct NftSet: Sendable, Hashable {
    public var name: String
    public var family: IPFamily
    public var elements: [IPAddress]

    public init(name: String, family: IPFamily, elements: [IPAddress]) {
        self.name = name
        self.family = family
        self.elements = elements
    }
}

/// One `inet` table with everything in it, replaced atomically as a whole.
public struct NftTable: Sendable, Hashable {
    public var name: String
    public var comment: String
    public var sets: [NftSet]
    public var chains: [NftChain]

    public init(name: String, comment: String, sets: [NftSet], chains: [NftChain]) {
        self.name = name
        self.comment = comment
        self.sets = sets
        self.chains = chains
    }

    public var ruleCount: Int { chains.reduce(0) { $0 + $1.rules.count } }
}
