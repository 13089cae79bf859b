import Foundation
import TunnelgateSettings

/// On-demand rules evaluated as iOS does, as pure functions: given what the primary link looks like,
/// the first rule that matches decides. `tunnelgate on-demand` (TunnelgateOnDemandWatcher) calls
/// `evaluate` on each network change (links up and down, addresses, routes, DNS) for a manager with
/// `isOnDemandEnabled`, and connects, disconnects or leaves the tunnel as the decision says; the probe
/// is the caller's (an HTTP GET outside the tunnel; the watcher does not fetch one yet).
public enum TunnelgateOnDemand {
    /// The primary link as the rules see it.
    public struct Network: Sendable, Equatable {
        public enum InterfaceType: Sendable, Equatable {
            /// An Ethernet-like link (ARPHRD_ETHER without wireless): matches `.ethernet`.
            case wired
            /// A wireless link (`/sys/class/net/IF/wireless` or `phy80211`): matches `.wiFi`.
            case wireless
            /// A WWAN device (`DEVTYPE=wwan`): matches `.cellular`.
            case cellular
            /// Anything else (a bridge, a tunnel, no link): matches only `.any`.
            case other
        }

        public var interfaceType: InterfaceType
        /// The SSID of the wireless network, when the link is wireless and the system exposes it.
        public var ssid: String?
        /// The DNS search domains in effect for the link.
        public var dnsSearchDomains: [String]
        /// The DNS servers in effect for the link.
        public var dnsServers: [String]

        public init(interfaceType: InterfaceType, ssid: String? = nil, dnsSearchDomains: [String] = [], dnsServers: [String] = []) {
            self.interfaceType = interfaceType
            self.ssid = ssid
            self.dnsSearchDomains = dnsSearchDomains
            self.dnsServers = dnsServers
        }
    }

    /// The rule that decided, and where it is in the list.
    public struct Decision {
        public let action: NEOnDemandRuleAction
        public let ruleIndex: Int
        public let rule: NEOnDemandRule
    }

    /// The first rule in `rules` whose every criterion matches `network`, or nil when none does (iOS
    /// then changes nothing; a list usually ends with a rule without criteria). `probe` is called only
    /// for a rule with a `probeURL` whose other criteria all matched, and says whether the URL answered
    /// 200 OK.
    public static func evaluate(_ rules: [NEOnDemandRule], on network: Network, probe: (URL) -> Bool) -> Decision? {
        for (i, rule) in rules.enumerated() where matches(rule, network, probe) {
            return Decision(action: rule.action, ruleIndex: i, rule: rule)
        }
        return nil
    }

    /// For an `.evaluateConnection` decision: the first connection rule whose `matchDomains` holds the
    /// destination `host` or a domain above it, or nil (no rule: the VPN is not started for it).
    public static func evaluateConnection(toHost host: String, rules: [NEEvaluateConnectionRule]) -> NEEvaluateConnectionRule? {
        let name = OnDemandMatch.normalized(host)
        return rules.first { rule in
            rule.matchDomains.contains { domain in
                let d = OnDemandMatch.normalized(domain.hasPrefix("*.") ? String(domain.dropFirst(2)) : domain)
                return d == "*" || name == d || name.hasSuffix("." + d)
            }
        }
    }

    static func matches(_ rule: NEOnDemandRule, _ network: Network, _ probe: (URL) -> Bool) -> Bool {
        switch (rule.interfaceTypeMatch, network.interfaceType) {
        case (.any, _), (.ethernet, .wired), (.wiFi, .wireless), (.cellular, .cellular): break
        default: return false
        }
        if let ssids = rule.ssidMatch, !ssids.isEmpty {
            guard network.interfaceType == .wireless, let ssid = network.ssid, ssids.contains(ssid) else { return false }
        }
        if let patterns = rule.dnsSearchDomainMatch, !patterns.isEmpty {
            guard network.dnsSearchDomains.contains(where: { d in patterns.contains { OnDemandMatch.domain(d, matches: $0) } })
            else { return false }
        }
        if let patterns = rule.dnsServerAddressMatch, !patterns.isEmpty {
            guard !network.dnsServers.isEmpty,
                  network.dnsServers.allSatisfy({ s in patterns.contains { OnDemandMatch.server(s, matches: $0) } })
            else { return false }
        }
        if let url = rule.probeURL, !probe(url) { return false }
        return true
    }
}

/// The matching rules of on-demand criteria, and what a saved rule may hold.
enum OnDemandMatch {
    static func normalized(_ name: String) -> String {
        var n = name.lowercased()
        while n.hasSuffix(".") { n.removeLast() }
        return n
    }

    /// `pattern` is a domain (equal, ignoring case and a trailing dot), `*.DOMAIN` (any name under
    /// DOMAIN, not DOMAIN itself) or `*` (any).
    static func domain(_ name: String, matches pattern: String) -> Bool {
        let n = normalized(name)
        if pattern == "*" { return !n.isEmpty }
        if pattern.hasPrefix("*.") { return n.hasSuffix("." + normalized(String(pattern.dropFirst(2)))) }
        return n == normalized(pattern)
    }

    /// `pattern` is an address (compared in canonical form) or a prefix ending in `*` (`17.*`,
    /// `2001:db8:*`), compared with the address as written in canonical form.
    static func server(_ address: String, matches pattern: String) -> Bool {
        let canonical = IPAddress(address)?.description ?? address.lowercased()
        if pattern.hasSuffix("*") { return canonical.hasPrefix(pattern.dropLast().lowercased()) }
        return canonical == (IPAddress(pattern)?.description ?? pattern.lowercased())
    }

    static func domainPatternProblem(_ pattern: String) -> String? {
        if pattern == "*" { return nil }
        let domain = pattern.hasPrefix("*.") ? String(pattern.dropFirst(2)) : pattern
        return HostName.problem(domain).map { "'\(pattern)' is not a domain or *.DOMAIN (\($0))" }
    }

    static func serverPatternProblem(_ pattern: String) -> String? {
        if IPAddress(pattern) != nil { return nil }
        if pattern.hasSuffix("*"), !pattern.dropLast().contains("*"),
           pattern.dropLast().allSatisfy({ $0.isHexDigit || $0 == "." || $0 == ":" }) { return nil }
        return "'\(pattern)' is not an IP address or an address prefix ending in * (17.*)"
    }

    static func probeProblem(_ url: URL) -> String? {
        guard let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https", let host = url.host, !host.isEmpty else {
            return "'\(url.absoluteString)' is not an http or https URL with a host"
        }
        return nil
    }
}
