import LinuxSystem
import TunnelgateSettings

/// What a tunnel's NEDNSSettings become on its link in systemd-resolved,
/// and what Tunnelgate reads back from resolved to check they were taken.
///
/// - `servers` → SetLinkDNS, in order (resolved has no limit of three).
/// - `domains` → SetLinkDomains, in this order without duplicates (ASCII
///   case and a trailing dot ignored; the first occurrence wins):
///   1. `searchDomains`, as search domains (resolved routes them too);
///   2. `domainName`, as a search domain;
///   3. the non-empty `matchDomains`: routing-only (`~corp.example`) when
///      `matchDomainsNoSearch` is true; otherwise search domains, because
///      NEDNSSettings appends match domains to the search list by default
///      and a search domain in resolved is also a routing domain;
///   4. not split DNS (no matchDomains, `[]`, or a list with `""`): the
///      routing-only root domain `~.`, so every name not claimed by a more
///      specific routing domain of another link goes to the tunnel, instead
///      of to every link with DefaultRoute at once.
/// - `defaultRoute` → SetLinkDefaultRoute: true unless split DNS.
/// - LLMNR and MulticastDNS off on the link (a tunnel is no multicast LAN),
///   DNSOverTLS off (NEDNSSettings servers speak plain DNS on port 53, whatever
///   the global DNSOverTLS= says). DNSSEC is left at the system's setting.
public struct ResolvedLinkSettings: Hashable, Sendable {
    public struct Domain: Hashable, Sendable, CustomStringConvertible {
        /// Lower case, no trailing dot; "." is the root.
        public var name: String
        /// True: used only to route queries, never to complete single-label names (`~name`).
        public var routingOnly: Bool

        public init(_ name: String, routingOnly: Bool) {
            self.name = name
            self.routingOnly = routingOnly
        }

        /// resolvectl's notation: `corp.example`, `~corp.example`, `~.`.
        public var description: String { (routingOnly ? "~" : "") + name }
    }

    public var servers: [IPAddress]
    public var domains: [Domain]
    public var defaultRoute: Bool
    /// SetLinkLLMNR, SetLinkMulticastDNS, SetLinkDNSOverTLS.
    public var llmnr: String
    public var multicastDNS: String
    public var dnsOverTLS: String

    public init(servers: [IPAddress], domains: [Domain], defaultRoute: Bool,
                llmnr: String = "no", multicastDNS: String = "no", dnsOverTLS: String = "no") {
        self.servers = servers
        self.domains = domains
        self.defaultRoute = defaultRoute
        self.llmnr = llmnr
        self.multicastDNS = multicastDNS
        self.dnsOverTLS = dnsOverTLS
    }

    /// The link settings for `settings` (the mapping above).
    public init(_ settings: DNSSettings) {
        var domains: [Domain] = []
        var seen = Set<String>()
        func add(_ raw: String, routingOnly: Bool) {
            let name = Self.normalized(raw)
            guard !name.isEmpty, seen.insert(name).inserted else { return }
            domains.append(Domain(name, routingOnly: routingOnly))
        }
        settings.searchDomains.forEach { add($0, routingOnly: false) }
        settings.domainName.map { add($0, routingOnly: false) }
        (settings.matchDomains ?? []).forEach { add($0, routingOnly: settings.matchDomainsNoSearch) }
        if !settings.isSplitDNS { add(".", routingOnly: true) }
        self.init(servers: settings.servers, domains: domains, defaultRoute: !settings.isSplitDNS)
    }

    /// "Corp.Example." → "corp.example"; "." stays "."; "" stays "".
    static func normalized(_ domain: String) -> String {
        guard domain != "." else { return "." }
        var name = domain.lowercased()
        if name.hasSuffix(".") { name.removeLast() }
        return name
    }

    /// What differs between these (wanted) settings and `actual` (read back
    /// from resolved), one line each; empty when resolved holds what was set.
    /// Domains compare ignoring case and a trailing dot.
    public func differences(from actual: ResolvedLinkSettings) -> [String] {
        var out: [String] = []
        if servers != actual.servers {
            out.append("DNS servers are [\(actual.servers.map(\.description).joined(separator: " "))], "
                + "not [\(servers.map(\.description).joined(separator: " "))]")
        }
        let normalizedActual = actual.domains.map { Domain(Self.normalized($0.name), routingOnly: $0.routingOnly) }
        if domains != normalizedActual {
            out.append("domains are [\(actual.domains.map(\.description).joined(separator: " "))], "
                + "not [\(domains.map(\.description).joined(separator: " "))]")
        }
        if defaultRoute != actual.defaultRoute {
            out.append("DefaultRoute is \(actual.defaultRoute), not \(defaultRoute)")
        }
        return out
    }

    // MARK: D-Bus arguments

    /// SetLinkDNS's `a(iay)`: (AF_INET, 4 bytes) or (AF_INET6, 16 bytes) per server.
    var serversArgument: DBusValue {
        .array(element: "(iay)", servers.map { server in
            .structure([.int32(server.family == .ipv4 ? SocketFamily.ipv4 : SocketFamily.ipv6), .bytes(server.bytes)])
        })
    }

    /// SetLinkDomains's `a(sb)`: (name, routing-only) per domain.
    var domainsArgument: DBusValue {
        .array(element: "(sb)", domains.map { .structure([.string($0.name), .boolean($0.routingOnly)]) })
    }

    /// The servers of a Link object's `DNS` property (`a(iay)`); nil when it has another form.
    static func servers(from value: DBusValue) -> [IPAddress]? {
        guard case .array(_, let items) = value else { return nil }
        var servers: [IPAddress] = []
        for item in items {
            guard case .structure(let fields) = item, fields.count == 2,
                  case .int32(let family) = fields[0], case .bytes(let bytes) = fields[1] else { return nil }
            switch (family, bytes.count) {
            case (SocketFamily.ipv4, 4): servers.append(.v4(IPv4Address(bytes: bytes)))
            case (SocketFamily.ipv6, 16): servers.append(.v6(IPv6Address(bytes: bytes)))
            default: return nil
            }
        }
        return servers
    }

    /// The domains of a Link object's `Domains` property (`a(sb)`); nil when it has another form.
    static func domains(from value: DBusValue) -> [Domain]? {
        guard case .array(_, let items) = value else { return nil }
        var domains: [Domain] = []
        for item in items {
            guard case .structure(let fields) = item, fields.count == 2,
                  case .string(let name) = fields[0], case .boolean(let routingOnly) = fields[1] else { return nil }
            domains.append(Domain(name, routingOnly: routingOnly))
        }
        return domains
    }
}
