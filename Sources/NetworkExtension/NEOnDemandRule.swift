import Foundation

/// NEOnDemandRuleAction, with Apple's raw values.
public enum NEOnDemandRuleAction: Int, Sendable {
    /// Start the VPN (and keep it up) while the rule matches.
    case connect = 1
    /// Do not start it, and stop it when it runs.
    case disconnect = 2
    /// Start it for connections whose destination matches the rule's `connectionRules`.
    case evaluateConnection = 3
    /// Leave it as it is.
    case ignore = 4
}

/// NEOnDemandRuleInterfaceType, with Apple's raw values. On Linux: `.ethernet` is a wired link,
/// `.wiFi` a wireless one (a wireless extension or cfg80211 device), `.cellular` a WWAN device.
public enum NEOnDemandRuleInterfaceType: Int, Sendable {
    case any = 0
    case ethernet = 1
    case wiFi = 2
    case cellular = 3
}

/// NEOnDemandRule: one on-demand rule, an action and what the network must look like for it to match
/// (every criterion that is set). Made through its subclasses. Rules are evaluated in order and the
/// first that matches decides (`TunnelgateOnDemand.evaluate`).
open class NEOnDemandRule: NSObject, NSCopying, @unchecked Sendable {
    // @unchecked Sendable: a configuration object, mutated by its owner before it is saved (as on iOS).
    public let action: NEOnDemandRuleAction
    /// Matches when one of the link's DNS search domains is one of these (`*.example.com` matches any
    /// name under example.com). nil or empty: not a criterion.
    open var dnsSearchDomainMatch: [String]?
    /// Matches when each of the link's DNS servers is one of these (`17.*` matches any address written
    /// starting with `17.`). nil or empty: not a criterion.
    open var dnsServerAddressMatch: [String]?
    /// Matches links of this type; `.any` (the default) is not a criterion.
    open var interfaceTypeMatch: NEOnDemandRuleInterfaceType = .any
    /// Matches when the link is wireless and its SSID is one of these. nil or empty: not a criterion.
    open var ssidMatch: [String]?
    /// Matches when an HTTP(S) request to this URL gets 200 OK (probed last, only when everything else matched).
    open var probeURL: URL?

    /// The base class's own initialiser (as Apple's): a rule that ignores. Use a subclass.
    public override convenience init() { self.init(action: .ignore) }

    init(action: NEOnDemandRuleAction) {
        self.action = action
        super.init()
    }

    /// A copy of the rule and its criteria (and connection rules).
    open func copy(with zone: NSZone? = nil) -> Any {
        // The preference form holds every field: a copy is a decode of it.
        (try? NEOnDemandRule.fromPreference(tunnelgatePreference, keyPath: "")) ?? self
    }

    open override var description: String {
        var parts = ["\(action)"]
        if interfaceTypeMatch != .any { parts.append("interface \(interfaceTypeMatch)") }
        if let s = ssidMatch, !s.isEmpty { parts.append("ssid \(s)") }
        if let d = dnsSearchDomainMatch, !d.isEmpty { parts.append("search domains \(d)") }
        if let d = dnsServerAddressMatch, !d.isEmpty { parts.append("dns servers \(d)") }
        if let u = probeURL { parts.append("probe \(u.absoluteString)") }
        return parts.joined(separator: ", ")
    }
}

/// Connects the VPN while it matches.
open class NEOnDemandRuleConnect: NEOnDemandRule, @unchecked Sendable {
    public init() { super.init(action: .connect) }
}

/// Disconnects the VPN while it matches.
open class NEOnDemandRuleDisconnect: NEOnDemandRule, @unchecked Sendable {
    public init() { super.init(action: .disconnect) }
}

/// Leaves the VPN as it is while it matches.
open class NEOnDemandRuleIgnore: NEOnDemandRule, @unchecked Sendable {
    public init() { super.init(action: .ignore) }
}

/// Decides per connection by its destination (`connectionRules`, `TunnelgateOnDemand.evaluateConnection`).
open class NEOnDemandRuleEvaluateConnection: NEOnDemandRule, @unchecked Sendable {
    open var connectionRules: [NEEvaluateConnectionRule]?
    public init() { super.init(action: .evaluateConnection) }
}

/// NEEvaluateConnectionRuleAction, with Apple's raw values.
public enum NEEvaluateConnectionRuleAction: Int, Sendable {
    /// Connect when the destination cannot be reached otherwise (its name does not resolve with the
    /// link's DNS servers, or `probeURL` fails).
    case connectIfNeeded = 1
    /// Never connect for this destination.
    case neverConnect = 2
}

/// NEEvaluateConnectionRule: an action for connections to names in `matchDomains`.
open class NEEvaluateConnectionRule: NSObject, NSCopying, @unchecked Sendable {
    public let action: NEEvaluateConnectionRuleAction
    /// Destination names this rule is for: `example.com` matches example.com and every name under it.
    public let matchDomains: [String]
    /// For `.connectIfNeeded`: the servers that resolve the destination to decide whether to connect.
    open var useDNSServers: [String]?
    /// For `.connectIfNeeded`: connect when a request to this URL does not get 200 OK.
    open var probeURL: URL?

    public init(matchDomains domains: [String], andAction action: NEEvaluateConnectionRuleAction) {
        matchDomains = domains
        self.action = action
        super.init()
    }

    open func copy(with zone: NSZone? = nil) -> Any {
        let c = NEEvaluateConnectionRule(matchDomains: matchDomains, andAction: action)
        c.useDNSServers = useDNSServers
        c.probeURL = probeURL
        return c
    }
}
