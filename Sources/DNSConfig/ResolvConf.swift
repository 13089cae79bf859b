import TunnelgateSettings

/// The resolv.conf(5) that glibc reads: what Tunnelgate takes from the file
/// it replaces, and the file it writes.
public struct ResolvConf: Hashable, Sendable {
    /// `nameserver` addresses, at most `maximumNameservers`, in order; an
    /// IPv6 address may carry a `%scope`.
    public var nameservers: [Nameserver]
    /// The search list (`search`, or `domain`: the last of the two wins, as in glibc).
    public var searchDomains: [String]

    /// glibc uses the first three `nameserver` lines (MAXNS) and ignores the rest.
    public static let maximumNameservers = 3

    public struct Nameserver: Hashable, Sendable, CustomStringConvertible {
        public var address: IPAddress
        /// The interface of a link-local IPv6 address (`fe80::1%eth0`), as written.
        public var scope: String?

        public init(address: IPAddress, scope: String? = nil) {
            self.address = address
            self.scope = scope
        }

        public var description: String { scope.map { "\(address)%\($0)" } ?? address.description }
    }

    public init(nameservers: [Nameserver] = [], searchDomains: [String] = []) {
        self.nameservers = nameservers
        self.searchDomains = searchDomains
    }

    /// Reads a resolv.conf the way glibc's resolver does, for the parts
    /// Tunnelgate uses: lines starting with `#` or `;` are comments; a
    /// keyword starts its line; unreadable addresses are skipped.
    public init(parsing bytes: [UInt8]) {
        self.init()
        for rawLine in bytes.split(separator: UInt8(ascii: "\n")) {
            let line = String(decoding: rawLine, as: UTF8.self)
            guard let first = line.first, first != "#", first != ";" else { continue }
            let fields = line.split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "\r" })
            guard let keyword = fields.first, line.hasPrefix(keyword) else { continue }
            switch keyword {
            case "nameserver" where fields.count >= 2:
                guard nameservers.count < Self.maximumNameservers else { continue }
                let parts = fields[1].split(separator: "%", maxSplits: 1)
                guard let address = IPAddress(parts[0]) else { continue }
                nameservers.append(Nameserver(address: address, scope: parts.count == 2 ? String(parts[1]) : nil))
            case "search", "domain":
                searchDomains = fields.dropFirst().map(String.init)
            default:
                continue
            }
        }
    }
}

extension ResolvConf {
    /// The file Tunnelgate writes for a tunnel.
    ///
    /// - Without split DNS: the tunnel's first three servers as `nameserver`
    ///   lines (a link-local IPv6 server gets `%INTERFACE`), and the search
    ///   list of `DNSSettings.searchList()`.
    /// - With split DNS (`forwarder` given): one `nameserver` line, the
    ///   forwarder's address; the search list is the tunnel's followed by the
    ///   one of the file it replaces (`original`).
    ///
    /// No `options` line: glibc's defaults stay (in particular no `edns0`:
    /// answers over 512 bytes are retried over TCP, which the servers and
    /// the forwarder handle, instead of risking fragments over the tunnel).
    public static func render(_ settings: DNSSettings, tunnelName: String, interfaceName: String,
                              forwarder: IPAddress? = nil, original: ResolvConf = ResolvConf()) -> String {
        var text = "# Written by tunnelgate for tunnel \(tunnelName): the DNS settings of the tunnel.\n"
        text += "# `tunnelgate down \(tunnelName)` puts back what was here before; edits made meanwhile are lost then.\n"
        let search: [String]
        if let forwarder {
            let domains = (settings.matchDomains ?? []).filter { !$0.isEmpty }.joined(separator: " ")
            let servers = settings.servers.map(\.description).joined(separator: " ")
            let others = original.nameservers.isEmpty ? "127.0.0.1 (none were listed)"
                : original.nameservers.map(\.description).joined(separator: " ")
            text += "# Split DNS: tunnelgate's forwarder on \(forwarder) sends names in \(domains) to the\n"
            text += "# tunnel's servers (\(servers)) and every other name to the servers listed here before (\(others)).\n"
            text += "nameserver \(forwarder)\n"
            search = settings.searchList(appending: original.searchDomains)
        } else {
            let listed = settings.servers.prefix(maximumNameservers)
            for server in listed {
                if case .v6(let address) = server, address.isLinkLocal {
                    text += "nameserver \(server)%\(interfaceName)\n"
                } else {
                    text += "nameserver \(server)\n"
                }
            }
            if settings.servers.count > listed.count {
                let rest = settings.servers.dropFirst(listed.count).map(\.description).joined(separator: " ")
                text += "# Not listed, as glibc reads at most \(maximumNameservers) nameserver lines: \(rest)\n"
            }
            search = settings.searchList()
        }
        if !search.isEmpty {
            text += "search \(search.joined(separator: " "))\n"
        }
        return text
    }
}
