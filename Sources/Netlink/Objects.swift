import TunnelgateSettings

/// The `protocol` Tunnelgate writes on its routes and rules (rtm_protocol,
/// FRA_PROTOCOL): a marker that says who made them. iproute2 shows it as
/// `proto 72`; /etc/iproute2/rt_protos can name it.
public let tunnelgateRouteProtocol: UInt8 = 72

/// What a route does with matching packets (rtm_type).
public enum RouteType: UInt8, Sendable, Hashable {
    /// RTN_UNICAST: forward to a device or gateway.
    case unicast = 1
    /// RTN_THROW: stop the lookup in this table and continue with the next rule.
    case `throw` = 9
}

/// A route in a routing table. Equivalent to
/// `ip route add [throw] PREFIX [via GW] [dev DEV] table T proto P`.
public struct RouteSpec: Sendable, Hashable, CustomStringConvertible {
    public var destination: IPPrefix
    public var type: RouteType
    public var table: UInt32
    public var outputInterface: Int32?
    /// The interface name, for descriptions only (the kernel uses the index).
    public var interfaceName: String?
    public var gateway: IPAddress?
    public var protocolID: UInt8
    /// `scope global` for a route without a gateway, instead of the usual `scope link`. The kernel
    /// resolves a new route's gateway only through routes of link scope or narrower: a `dev TUN` route
    /// of global scope can never become the next hop of a route someone else adds (`ip route replace
    /// default via GW` without `dev`), while packets still take it.
    public var globalScope: Bool

    public init(destination: IPPrefix, type: RouteType = .unicast, table: UInt32,
                outputInterface: Int32? = nil, interfaceName: String? = nil,
                gateway: IPAddress? = nil, protocolID: UInt8 = tunnelgateRouteProtocol,
                globalScope: Bool = false) {
        self.globalScope = globalScope
        self.destination = destination
        self.type = type
        self.table = table
        self.outputInterface = outputInterface
        self.interfaceName = interfaceName
        self.gateway = gateway
        self.protocolID = protocolID
    }

    public var family: IPFamily { destination.family }

    /// The route in ip(8) syntax, without the verb.
    public var description: String {
        var s = type == .throw ? "throw \(destination)" : "\(destination)"
        if let gateway { s += " via \(gateway)" }
        if type == .unicast, let name = interfaceName ?? outputInterface.map({ "if\($0)" }) { s += " dev \(name)" }
        if gateway != nil { s += " onlink" }
        if type == .unicast, gateway == nil, globalScope { s += " scope global" }
        s += " table \(table) proto \(protocolID)"
        return s
    }

    /// The route's identity for comparing plan and kernel: what a read-back must match.
    public func sameRoute(as other: RouteSpec) -> Bool {
        destination == other.destination && type == other.type && table == other.table
            && (type == .throw || outputInterface == other.outputInterface) && gateway == other.gateway
    }
}

/// What a policy rule does when it matches (fib_rule_hdr.action).
public enum RuleAction: Sendable, Hashable {
    /// FR_ACT_TO_TBL: look the destination up in the rule's table.
    case lookup
    /// FR_ACT_GOTO: continue with the rules from this priority on (FRA_GOTO).
    case goto(UInt32)
    /// FR_ACT_NOP: nothing; a target for `goto`.
    case nop
}

/// A policy routing rule. Equivalent to
/// `ip rule add [not] [to PREFIX] [fwmark M/MASK] [ipproto P] [dport N[-M]] [uidrange A-B]
/// lookup T|goto P|nop [suppress_prefixlength N] pref P proto P`.
public struct RuleSpec: Sendable, Hashable, CustomStringConvertible {
    public var family: IPFamily
    public var priority: UInt32
    /// The table of a `lookup` rule; 0 for `goto` and `nop`.
    public var table: UInt32
    public var action: RuleAction
    /// `to PREFIX` (FRA_DST).
    public var destination: IPPrefix?
    public var fwmark: UInt32?
    public var fwmask: UInt32?
    /// `ipproto P` (FRA_IP_PROTO): 6 tcp, 17 udp.
    public var ipProtocol: UInt8?
    /// `dport A-B` (FRA_DPORT_RANGE).
    public var destinationPorts: ClosedRange<UInt16>?
    /// `uidrange A-B` (FRA_UID_RANGE): the owner of the sending socket.
    public var uidRange: ClosedRange<UInt32>?
    /// `not`: the rule matches packets its selector does not match.
    public var invert: Bool
    public var suppressPrefixLength: UInt32?
    public var protocolID: UInt8

    public init(family: IPFamily, priority: UInt32, table: UInt32, action: RuleAction = .lookup,
                destination: IPPrefix? = nil, fwmark: UInt32? = nil, fwmask: UInt32? = nil,
                ipProtocol: UInt8? = nil, destinationPorts: ClosedRange<UInt16>? = nil,
                uidRange: ClosedRange<UInt32>? = nil, invert: Bool = false,
                suppressPrefixLength: UInt32? = nil, protocolID: UInt8 = tunnelgateRouteProtocol) {
        self.family = family
        self.priority = priority
        self.table = table
        self.action = action
        self.destination = destination
        self.fwmark = fwmark
        self.fwmask = fwmask
        self.ipProtocol = ipProtocol
        self.destinationPorts = destinationPorts
        self.uidRange = uidRange
        self.invert = invert
        self.suppressPrefixLength = suppressPrefixLength
        self.protocolID = protocolID
    }

    public var description: String {
        var s = "pref \(priority)"
        if invert { s += " not" }
        var selected = false
        if let destination { s += " to \(destination)"; selected = true }
        if let fwmark {
            s += " fwmark 0x\(String(fwmark, radix: 16))"
            if let fwmask { s += "/0x\(String(fwmask, radix: 16))" }
            selected = true
        }
        if let ipProtocol {
            s += " ipproto \(ipProtocol == 6 ? "tcp" : ipProtocol == 17 ? "udp" : String(ipProtocol))"
            selected = true
        }
        if let p = destinationPorts { s += p.count == 1 ? " dport \(p.lowerBound)" : " dport \(p.lowerBound)-\(p.upperBound)"; selected = true }
        if let u = uidRange { s += " uidrange \(u.lowerBound)-\(u.upperBound)"; selected = true }
        if !selected { s += " from all" }
        switch action {
        case .lookup: s += " lookup \(table == 254 ? "main" : String(table))"
        case .goto(let target): s += " goto \(target)"
        case .nop: s += " nop"
        }
        if let suppressPrefixLength { s += " suppress_prefixlength \(suppressPrefixLength)" }
        s += " proto \(protocolID)"
        return s
    }

    /// The rule's identity for comparing plan and kernel: every selector and the action.
    public func sameRule(as other: RuleSpec) -> Bool {
        family == other.family && priority == other.priority && action == other.action
            && (action != .lookup || table == other.table)
            && destination == other.destination
            && (fwmark ?? 0) == (other.fwmark ?? 0) && invert == other.invert
            && ipProtocol == other.ipProtocol && destinationPorts == other.destinationPorts
            && uidRange == other.uidRange && suppressPrefixLength == other.suppressPrefixLength
    }
}

/// An interface address. Equivalent to `ip addr add PREFIX dev DEV [nodad]`.
public struct AddressSpec: Sendable, Hashable, CustomStringConvertible {
    public var interfaceIndex: Int32
    public var interfaceName: String?
    public var prefix: IPPrefix
    /// IFA_F_NOPREFIXROUTE: the kernel adds no route to the address's subnet in the main table (the
    /// tunnel puts that route in its own table).
    public var noPrefixRoute: Bool

    public init(interfaceIndex: Int32, interfaceName: String? = nil, prefix: IPPrefix, noPrefixRoute: Bool = false) {
        self.interfaceIndex = interfaceIndex
        self.interfaceName = interfaceName
        self.prefix = prefix
        self.noPrefixRoute = noPrefixRoute
    }

    public var description: String {
        "\(prefix) dev \(interfaceName ?? "if\(interfaceIndex)")\(prefix.family == .ipv6 ? " nodad" : "")\(noPrefixRoute ? " noprefixroute" : "")"
    }
}

/// One change to make through rtnetlink.
public enum NetlinkOperation: Sendable, Hashable, CustomStringConvertible {
    /// `ip link set dev DEV [mtu N] [up|down]`.
    case setLink(index: Int32, name: String?, mtu: UInt32?, up: Bool?)
    /// `ip link set dev DEV netns NS` (IFLA_NET_NS_FD).
    case moveLink(index: Int32, name: String?, namespace: Int32, namespaceName: String?)
    /// `ip link del dev DEV`.
    case deleteLink(index: Int32, name: String?)
    case addAddress(AddressSpec)
    case deleteAddress(AddressSpec)
    case addRoute(RouteSpec)
    case deleteRoute(RouteSpec)
    case addRule(RuleSpec)
    case deleteRule(RuleSpec)

    /// The operation in ip(8) words, as plans and errors print it.
    public var description: String {
        switch self {
        case .setLink(let index, let name, let mtu, let up):
            var s = "ip link set dev \(name ?? "if\(index)")"
            if let mtu { s += " mtu \(mtu)" }
            if let up { s += up ? " up" : " down" }
            return s
        case .moveLink(let index, let name, let fd, let ns):
            return "ip link set dev \(name ?? "if\(index)") netns \(ns ?? "fd\(fd)")"
        case .deleteLink(let index, let name): return "ip link del dev \(name ?? "if\(index)")"
        case .addAddress(let a): return "ip \(a.prefix.family == .ipv6 ? "-6" : "-4") addr add \(a)"
        case .deleteAddress(let a): return "ip \(a.prefix.family == .ipv6 ? "-6" : "-4") addr del \(a)"
        case .addRoute(let r): return "ip \(r.family == .ipv6 ? "-6" : "-4") route add \(r)"
        case .deleteRoute(let r): return "ip \(r.family == .ipv6 ? "-6" : "-4") route del \(r)"
        case .addRule(let r): return "ip \(r.family == .ipv6 ? "-6" : "-4") rule add \(r)"
        case .deleteRule(let r): return "ip \(r.family == .ipv6 ? "-6" : "-4") rule del \(r)"
        }
    }
}

/// A link as a dump reads it back.
public struct LinkInfo: Sendable, Hashable {
    public var index: Int32
    public var name: String
    public var mtu: UInt32
    public var flags: UInt32
    /// IFLA_INFO_KIND: "tun", "veth", … (nil for devices without one, like lo).
    public var kind: String?
    public var statistics: LinkStatistics?

    /// IFF_UP (<linux/if.h>): the link is administratively up.
    static let upFlag: UInt32 = 0x1
    public var isUp: Bool { flags & Self.upFlag != 0 }
    /// IFF_LOWER_UP: the driver signals carrier (a veth whose peer is down has none).
    public var hasCarrier: Bool { flags & 0x1_0000 != 0 }
    /// IFF_RUNNING: operationally up (RFC 2863 OPER_UP, or UNKNOWN for devices that do not say).
    public var isRunning: Bool { flags & 0x40 != 0 }
}

/// IFLA_STATS64, the counters shown by `ip -s link`.
public struct LinkStatistics: Sendable, Hashable {
    public var rxPackets: UInt64
    public var txPackets: UInt64
    public var rxBytes: UInt64
    public var txBytes: UInt64
    public var rxDropped: UInt64
    public var txDropped: UInt64
}

/// An address as a dump reads it back.
public struct AddressInfo: Sendable, Hashable {
    public var interfaceIndex: Int32
    public var prefix: IPPrefix
}

/// A rule as a dump reads it back; `spec` holds the fields Tunnelgate sets.
public struct RuleInfo: Sendable, Hashable {
    public var spec: RuleSpec
    /// FR_ACT_TO_TBL (1) for lookups.
    public var action: UInt8
}
