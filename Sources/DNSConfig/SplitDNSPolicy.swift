import TunnelgateSettings

/// Which names go to the tunnel's servers: those in one of the match
/// domains (NEDNSSettings.matchDomains), compared label by label from the
/// right, ignoring ASCII case. Everything else goes to the fallback servers.
public struct SplitDNSPolicy: Hashable, Sendable {
    public var matchDomains: [DNSName]

    public init(matchDomains: [DNSName]) {
        self.matchDomains = matchDomains
    }

    /// The policy of `matchDomains` as a configuration spells them. A domain
    /// that is not a valid name (validation refuses those) matches nothing.
    public init(matchDomains: [String]) {
        self.matchDomains = matchDomains.compactMap(DNSName.init)
    }

    /// True when `name` is one of the match domains or below one of them.
    public func sendsToTunnel(_ name: DNSName) -> Bool {
        matchDomains.contains { name.isInDomain($0) }
    }
}

extension DNSSettings {
    /// True when only names in `matchDomains` use the tunnel's servers:
    /// matchDomains is present, not empty, and has no `""` (which means
    /// "every name"). Absent, `[]` and any list with `""` make the tunnel's
    /// servers the default resolver.
    public var isSplitDNS: Bool {
        guard let matchDomains, !matchDomains.isEmpty else { return false }
        return !matchDomains.contains("")
    }

    /// The search list a resolver should use for this tunnel, in order,
    /// without duplicates (ignoring case and a trailing dot):
    /// 1. `searchDomains`;
    /// 2. `domainName`;
    /// 3. the non-empty `matchDomains`, unless `matchDomainsNoSearch`
    ///    (NEDNSSettings appends the match domains to the search domains by default);
    /// 4. `otherDomains` (for split DNS: the search list that was there before).
    public func searchList(appending otherDomains: [String] = []) -> [String] {
        var list: [String] = []
        var seen = Set<String>()
        func add(_ domain: String) {
            var key = domain.lowercased()
            if key.hasSuffix(".") { key.removeLast() }
            guard !key.isEmpty, seen.insert(key).inserted else { return }
            list.append(key)
        }
        searchDomains.forEach(add)
        domainName.map(add)
        if !matchDomainsNoSearch { (matchDomains ?? []).forEach(add) }
        otherDomains.forEach(add)
        return list
    }
}
