import TunnelgateSettings

/// systemd-resolved's D-Bus API as Tunnelgate uses it
/// (org.freedesktop.resolve1(5)): the Manager object's per-link setters,
/// RevertLink, and the Link objects' properties to read back.
///
/// resolved allows these calls to a sender with CAP_NET_ADMIN (or root when
/// resolved itself is not root) without asking polkit; others need polkit's
/// org.freedesktop.resolve1.set-dns-servers & co.
struct ResolvedClient {
    static let service = "org.freedesktop.resolve1"
    static let managerPath = "/org/freedesktop/resolve1"
    static let manager = "org.freedesktop.resolve1.Manager"
    static let link = "org.freedesktop.resolve1.Link"
    /// RevertLink and the setters for an interface index resolved does not know.
    static let noSuchLink = "org.freedesktop.resolve1.NoSuchLink"

    let bus: SystemBus

    /// Who answers for org.freedesktop.resolve1: Peer.Ping first (which
    /// also starts resolved where D-Bus activation is set up), then its
    /// unique name and, when the bus daemon tells, its process id.
    func owner() throws(SystemBusError) -> (name: String, pid: UInt32?) {
        _ = try bus.call(Self.service, Self.managerPath, "org.freedesktop.DBus.Peer", "Ping")
        let reply = try bus.callBus("GetNameOwner", [.string(Self.service)])
        guard case .string(let name)? = reply.first else {
            throw SystemBusError("org.freedesktop.DBus.GetNameOwner(\"\(Self.service)\")",
                                 .unexpectedReply("\(reply)"))
        }
        let pid = try? bus.callBus("GetConnectionUnixProcessID", [.string(name)])
        if case .uint32(let value)? = pid?.first { return (name, value) }
        return (name, nil)
    }

    /// Sets everything of `settings` on link `index`: SetLinkDNS,
    /// SetLinkDomains, SetLinkDefaultRoute, SetLinkLLMNR,
    /// SetLinkMulticastDNS, SetLinkDNSOverTLS, in this order.
    func apply(_ settings: ResolvedLinkSettings, index: Int32) throws(SystemBusError) {
        try manager("SetLinkDNS", [.int32(index), settings.serversArgument])
        try manager("SetLinkDomains", [.int32(index), settings.domainsArgument])
        try manager("SetLinkDefaultRoute", [.int32(index), .boolean(settings.defaultRoute)])
        try manager("SetLinkLLMNR", [.int32(index), .string(settings.llmnr)])
        try manager("SetLinkMulticastDNS", [.int32(index), .string(settings.multicastDNS)])
        try manager("SetLinkDNSOverTLS", [.int32(index), .string(settings.dnsOverTLS)])
    }

    /// RevertLink: every per-link setting of `index` back to resolved's defaults.
    func revert(index: Int32) throws(SystemBusError) {
        try manager("RevertLink", [.int32(index)])
    }

    /// What resolved holds for link `index` now: the Link object's DNS,
    /// Domains and DefaultRoute properties (the other fields are this
    /// type's defaults).
    func settings(index: Int32) throws(SystemBusError) -> ResolvedLinkSettings {
        let reply = try bus.call(Self.service, Self.managerPath, Self.manager, "GetLink", [.int32(index)])
        guard case .objectPath(let path)? = reply.first else {
            throw SystemBusError("\(Self.manager).GetLink(\(index))", .unexpectedReply("\(reply)"))
        }
        func property(_ name: String) throws(SystemBusError) -> DBusValue {
            let reply = try bus.call(Self.service, path, "org.freedesktop.DBus.Properties", "Get",
                                     [.string(Self.link), .string(name)])
            guard case .variant(let value)? = reply.first else {
                throw SystemBusError("Get(\(Self.link).\(name)) of \(path)", .unexpectedReply("\(reply)"))
            }
            return value
        }
        let dns = try property("DNS"), domains = try property("Domains"), defaultRoute = try property("DefaultRoute")
        guard let servers = ResolvedLinkSettings.servers(from: dns) else {
            throw SystemBusError("Get(\(Self.link).DNS) of \(path)", .unexpectedReply("\(dns.signature) \(dns)"))
        }
        guard let names = ResolvedLinkSettings.domains(from: domains) else {
            throw SystemBusError("Get(\(Self.link).Domains) of \(path)", .unexpectedReply("\(domains.signature) \(domains)"))
        }
        guard case .boolean(let route) = defaultRoute else {
            throw SystemBusError("Get(\(Self.link).DefaultRoute) of \(path)",
                                 .unexpectedReply("\(defaultRoute.signature) \(defaultRoute)"))
        }
        return ResolvedLinkSettings(servers: servers, domains: names, defaultRoute: route)
    }

    private func manager(_ member: String, _ arguments: [DBusValue]) throws(SystemBusError) {
        _ = try bus.call(Self.service, Self.managerPath, Self.manager, member, arguments)
    }
}
