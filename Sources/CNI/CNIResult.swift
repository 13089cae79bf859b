import TunnelgateSettings

/// The ADD result tunnelgate-cni returns: the previous plugin's result with the tunnel added.
public enum CNIResult {
    /// The `mac` of the tunnel's interface (see `adding`).
    public static let noHardwareAddress = "00:00:00:00:00:00"

    /// `prevResult` (or an empty result, when the plugin runs alone) with:
    /// - the tunnel's interface appended to `interfaces`, in the container (`sandbox` is CNI_NETNS).
    ///   A TUN has no hardware address, but `mac` is the all-zero address all the same: Podman 4.3
    ///   refuses a result whose container interface has none (it parses every one with Go's
    ///   net.ParseMAC, which fails on "": "invalid MAC address"), and other runtimes only show it;
    /// - each tunnel address appended to `ips`, pointing at that interface (with `version` before
    ///   1.0.0, as 0.3.x and 0.4.0 have it);
    /// - `dns` replaced by the tunnel's servers and search domains when it has any: behind the kill
    ///   switch no other server can be reached;
    /// - `cniVersion` the configuration's. `routes` are left alone: the tunnel's routes live in a
    ///   table of its own, behind a policy rule, and are not the main table's routes the field means.
    public static func adding(tunnel interface: String, addresses: [String], dns: ResolverSettings?,
                              sandbox: String, to prevResult: JSONValue?, version: CNIVersion, versionText: String) -> JSONValue {
        var result = prevResult ?? .object([])
        var interfaces: [JSONValue] = []
        if case .array(let existing)? = result[member: "interfaces"] { interfaces = existing }
        let index = interfaces.count
        interfaces.append(.object([("name", .string(interface)), ("mac", .string(Self.noHardwareAddress)),
                                   ("sandbox", .string(sandbox))]))
        var ips: [JSONValue] = []
        if case .array(let existing)? = result[member: "ips"] { ips = existing }
        for address in addresses {
            var entry: [(key: String, value: JSONValue)] = []
            if version.ipsCarryVersion { entry.append(("version", .string(address.contains(":") ? "6" : "4"))) }
            entry.append(("interface", .integer(index)))
            entry.append(("address", .string(address)))
            ips.append(.object(entry))
        }
        result = result.setting("cniVersion", to: .string(versionText))
        result = result.setting("interfaces", to: .array(interfaces))
        result = result.setting("ips", to: .array(ips))
        if let dns, !dns.nameservers.isEmpty {
            var members: [(key: String, value: JSONValue)] = [("nameservers", .array(dns.nameservers.map { .string($0) }))]
            if !dns.search.isEmpty { members.append(("search", .array(dns.search.map { .string($0) }))) }
            result = result.setting("dns", to: .object(members))
        }
        // cniVersion first, as results are usually written.
        if case .object(var members) = result, let i = members.firstIndex(where: { $0.key == "cniVersion" }), i != 0 {
            members.insert(members.remove(at: i), at: 0)
            result = .object(members)
        }
        return result
    }

    /// The names of the interfaces in a result that are in `sandbox`.
    public static func interfaces(of result: JSONValue?, in sandbox: String) -> [String] {
        guard case .array(let items)? = result?[member: "interfaces"] else { return [] }
        return items.compactMap { item in
            guard item[member: "sandbox"]?.stringValue == sandbox else { return nil }
            return item[member: "name"]?.stringValue
        }
    }
}

/// A resolver configuration: the `nameserver` and `search` lines of a resolv.conf.
public struct ResolverSettings: Equatable, Sendable {
    public var nameservers: [String] = []
    public var search: [String] = []

    public init(nameservers: [String] = [], search: [String] = []) {
        self.nameservers = nameservers
        self.search = search
    }

    /// Reads the lines resolv.conf(5) defines for servers and domains; everything else is ignored.
    public init(resolvConf text: String) {
        for line in text.split(separator: "\n") {
            let words = line.split(whereSeparator: { $0 == " " || $0 == "\t" })
            guard let keyword = words.first, !keyword.hasPrefix("#"), !keyword.hasPrefix(";") else { continue }
            switch keyword {
            case "nameserver" where words.count >= 2: nameservers.append(String(words[1]))
            case "search": search = words.dropFirst().map(String.init)
            case "domain" where words.count >= 2 && search.isEmpty: search = [String(words[1])]
            default: continue
            }
        }
    }
}
