import Foundation
import TunnelgateSettings

/// On-demand rules in the preferences file, and their checks on save:
///
///     {"action": "connect" | "disconnect" | "evaluateConnection" | "ignore",
///      "interfaceTypeMatch": "any" | "ethernet" | "wiFi" | "cellular",
///      "ssidMatch": […], "dnsSearchDomainMatch": […], "dnsServerAddressMatch": […], "probeURL": "https://…",
///      "connectionRules": [{"action": "connectIfNeeded" | "neverConnect", "matchDomains": […],
///                           "useDNSServers": […], "probeURL": …}]}
extension NEOnDemandRule {
    static let actionNames: [(NEOnDemandRuleAction, String)] =
        [(.connect, "connect"), (.disconnect, "disconnect"), (.evaluateConnection, "evaluateConnection"), (.ignore, "ignore")]
    static let interfaceNames: [(NEOnDemandRuleInterfaceType, String)] =
        [(.any, "any"), (.ethernet, "ethernet"), (.wiFi, "wiFi"), (.cellular, "cellular")]

    var tunnelgatePreference: [String: Any] {
        var o: [String: Any] = ["action": Self.actionNames.first { $0.0 == action }!.1,
                                "interfaceTypeMatch": Self.interfaceNames.first { $0.0 == interfaceTypeMatch }!.1]
        if let v = ssidMatch { o["ssidMatch"] = v }
        if let v = dnsSearchDomainMatch { o["dnsSearchDomainMatch"] = v }
        if let v = dnsServerAddressMatch { o["dnsServerAddressMatch"] = v }
        if let v = probeURL { o["probeURL"] = v.absoluteString }
        if let e = self as? NEOnDemandRuleEvaluateConnection, let rules = e.connectionRules {
            o["connectionRules"] = rules.map(\.tunnelgatePreference)
        }
        return o
    }

    /// The rule a preference object describes; `keyPath` names it in errors (`managers[0].onDemandRules[1]`).
    static func fromPreference(_ value: Any, keyPath: String) throws(NEVPNError) -> NEOnDemandRule {
        func fail(_ key: String, _ what: String) -> NEVPNError {
            NEVPNError(.configurationReadWriteFailed, "\(keyPath.isEmpty ? key : keyPath + "." + key): \(what)")
        }
        guard let o = value as? [String: Any] else { throw fail("", "not an on-demand rule (an object)") }
        let name = o["action"] as? String
        guard let action = actionNames.first(where: { $0.1 == name })?.0 else {
            throw fail("action", "\(name.map { "'\($0)'" } ?? "missing"); one of connect, disconnect, evaluateConnection, ignore")
        }
        let rule: NEOnDemandRule
        switch action {
        case .connect: rule = NEOnDemandRuleConnect()
        case .disconnect: rule = NEOnDemandRuleDisconnect()
        case .ignore: rule = NEOnDemandRuleIgnore()
        case .evaluateConnection:
            let e = NEOnDemandRuleEvaluateConnection()
            if let list = o["connectionRules"] {
                guard let array = list as? [Any] else { throw fail("connectionRules", "not an array") }
                var rules: [NEEvaluateConnectionRule] = []
                for (i, item) in array.enumerated() {
                    rules.append(try NEEvaluateConnectionRule.fromPreference(item, keyPath: "\(keyPath).connectionRules[\(i)]"))
                }
                e.connectionRules = rules
            }
            rule = e
        }
        if let t = o["interfaceTypeMatch"] {
            guard let type = interfaceNames.first(where: { $0.1 == t as? String })?.0 else {
                throw fail("interfaceTypeMatch", "not one of any, ethernet, wiFi, cellular")
            }
            rule.interfaceTypeMatch = type
        }
        func strings(_ key: String) throws(NEVPNError) -> [String]? {
            guard let v = o[key] else { return nil }
            guard let s = v as? [String] else { throw fail(key, "not an array of strings") }
            return s
        }
        rule.ssidMatch = try strings("ssidMatch")
        rule.dnsSearchDomainMatch = try strings("dnsSearchDomainMatch")
        rule.dnsServerAddressMatch = try strings("dnsServerAddressMatch")
        if let u = o["probeURL"] {
            guard let text = u as? String, let url = URL(string: text) else { throw fail("probeURL", "not a URL") }
            rule.probeURL = url
        }
        return rule
    }

    /// What saveToPreferences refuses in this rule, each naming its key path (`onDemandRules[0].ssidMatch[1]: …`).
    func tunnelgateProblems(keyPath: String) -> [String] {
        var problems: [String] = []
        for (i, ssid) in (ssidMatch ?? []).enumerated() where ssid.isEmpty || ssid.utf8.count > 32 {
            problems.append("\(keyPath).ssidMatch[\(i)]: an SSID is 1 to 32 bytes, '\(ssid)' is \(ssid.utf8.count)")
        }
        for (i, domain) in (dnsSearchDomainMatch ?? []).enumerated() {
            if let p = OnDemandMatch.domainPatternProblem(domain) { problems.append("\(keyPath).dnsSearchDomainMatch[\(i)]: \(p)") }
        }
        for (i, server) in (dnsServerAddressMatch ?? []).enumerated() {
            if let p = OnDemandMatch.serverPatternProblem(server) { problems.append("\(keyPath).dnsServerAddressMatch[\(i)]: \(p)") }
        }
        if let u = probeURL, let p = OnDemandMatch.probeProblem(u) { problems.append("\(keyPath).probeURL: \(p)") }
        if let e = self as? NEOnDemandRuleEvaluateConnection {
            let rules = e.connectionRules ?? []
            if rules.isEmpty {
                problems.append("\(keyPath).connectionRules: an evaluateConnection rule needs at least one connection rule")
            }
            for (i, r) in rules.enumerated() { problems += r.tunnelgateProblems(keyPath: "\(keyPath).connectionRules[\(i)]") }
        }
        return problems
    }
}

extension NEEvaluateConnectionRule {
    var tunnelgatePreference: [String: Any] {
        var o: [String: Any] = ["action": action == .connectIfNeeded ? "connectIfNeeded" : "neverConnect", "matchDomains": matchDomains]
        if let v = useDNSServers { o["useDNSServers"] = v }
        if let v = probeURL { o["probeURL"] = v.absoluteString }
        return o
    }

    static func fromPreference(_ value: Any, keyPath: String) throws(NEVPNError) -> NEEvaluateConnectionRule {
        func fail(_ key: String, _ what: String) -> NEVPNError {
            NEVPNError(.configurationReadWriteFailed, "\(keyPath).\(key): \(what)")
        }
        guard let o = value as? [String: Any] else { throw fail("", "not a connection rule (an object)") }
        let action: NEEvaluateConnectionRuleAction
        switch o["action"] as? String {
        case "connectIfNeeded": action = .connectIfNeeded
        case "neverConnect": action = .neverConnect
        default: throw fail("action", "not one of connectIfNeeded, neverConnect")
        }
        guard let domains = o["matchDomains"] as? [String] else { throw fail("matchDomains", "not an array of strings") }
        let rule = NEEvaluateConnectionRule(matchDomains: domains, andAction: action)
        if let v = o["useDNSServers"] {
            guard let s = v as? [String] else { throw fail("useDNSServers", "not an array of strings") }
            rule.useDNSServers = s
        }
        if let u = o["probeURL"] {
            guard let text = u as? String, let url = URL(string: text) else { throw fail("probeURL", "not a URL") }
            rule.probeURL = url
        }
        return rule
    }

    func tunnelgateProblems(keyPath: String) -> [String] {
        var problems: [String] = []
        if matchDomains.isEmpty { problems.append("\(keyPath).matchDomains: a connection rule needs at least one domain") }
        for (i, d) in matchDomains.enumerated() {
            if let p = OnDemandMatch.domainPatternProblem(d) { problems.append("\(keyPath).matchDomains[\(i)]: \(p)") }
        }
        for (i, s) in (useDNSServers ?? []).enumerated() where IPAddress(s) == nil {
            problems.append("\(keyPath).useDNSServers[\(i)]: '\(s)' is not an IP address")
        }
        if let u = probeURL, let p = OnDemandMatch.probeProblem(u) { problems.append("\(keyPath).probeURL: \(p)") }
        return problems
    }
}
