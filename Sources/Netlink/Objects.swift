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

    public init(destination: IPPrefix, type: RouteType = .unicast, table: UInt32,
                outputInterface: Int32? = nil, interfaceName: String? = nil,
                gateway: IPAddress? = nil, protocolID: UInt8 = tunnelgateRouteProtocol) {
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
        s += " table \(table) proto \(protocolID)"
        return s
    }

    /// The route's identity for comparing plan and kernel: what a read-back must match.
    public func sameRoute(as other: RouteSpec) -> Bool {
        destination == other.destination && type == other.type && table == other.table
            && (type == .throw || outputInterface == other.outputInterface) && gateway == other.gateway
    }
}

/// A policy routing rule. Equivalent to
/// `ip rule add [not] [fwmark M/MASK] [lookup T] [suppress_prefixlength N] pref P proto P`.
public struct RuleSpec: Sendable, Hashable, CustomStringConvertible {
    public var family: IPFamily
    public var priority: UInt32
    public var table: UInt32
    public var fwmark: UInt32?
    public var fwmask: UInt32?
    /// `not`: the rule matches packets its selector does not match.
    public var invert: Bool
    public var suppressPrefixLength: UInt32?
    public var protocolID: UInt8

    public init(family: IPFamily, priority: UInt32, table: UInt32, fwmark: UInt32? = nil,
                fwmask: UInt32? = nil, invert: Bool = false, suppressPrefixLength: UInt32? = nil,
                protocolID: UInt8 = tunnelgateRouteProtocol) {
        self.family = family
        self.priority = priority
        self.table = table
        self.fwmark = fwmark
        self.fwmask = fwmask
        self.invert = invert
        self.suppressPrefixLength = suppressPrefixLength
        self.protocolID = protocolID
    }

    public var description: String {
        var s = "pref \(priority)"
        if invert { s += " not" }
        if let fwmark {
            s += " fwmark 0x\(String(fwmark, radix: 16))"
            if let fwmask { s += "/0x\(String(fwmask, radix: 16))" }
        } else {
            s += " from all"
        }
        s += " lookup \(table == 254 ? "main" : String(table))"
        if let suppressPrefixLength { s += " suppress_prefixlength \(suppressPrefixLength)" }
        s += " proto \(protocolID)"
        return s
    }
}

/// An interface address. Equivalent to `ip addr add PREFIX dev DEV [nodad]`.
public struct AddressSpec: Sendable, Hashable, CustomStringConvertible {
    public var interfaceIndex: Int32
    public var interfaceName: String?
    public var prefix: IPPrefix

    public init(interfaceIndex: Int32, interfaceName: String? = nil, prefix: IPPrefix) {
        self.interfaceIndex = interfaceIndex
        self.interfaceName = interfaceName
        self.prefix = prefix
    }

    public var description: String {
        "\(prefix) dev \(interfaceName ?? "if\(interfaceIndex)")\(prefix.family == .ipv6 ? " nodad" : "")"
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

    public var isUp: Bool { flags & 0x1 != 0 }          // IFF_UP
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
