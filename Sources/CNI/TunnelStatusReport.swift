import TunnelgateSettings

/// What tunnelgate-cni reads of `tunnelgate status NAME --json`.
public struct TunnelStatusReport: Equatable, Sendable {
    /// NEVPNStatus: connecting, connected, reasserting, disconnecting, disconnected.
    public var status: String
    /// The owner's pid while one runs.
    public var pid: Int32?
    public var interface: String?
    public var interfaceIndex: Int?
    /// "ADDRESS/LENGTH".
    public var addresses: [String]
    /// True only when the kill switch's table is in the kernel as planned.
    public var killSwitch: Bool
    /// "as planned", "tampered with", "missing", "not verified".
    public var firewall: String?
    public var firewallDifferences: [String]
    /// What a dead owner left (rules, routes, the kill switch), to be removed by `down`.
    public var residue: Bool
    public var failedClosed: String?
    public var lastDisconnectError: String?
    /// The DNS backend as status says it ("netns resolv.conf (/etc/netns/NAME/resolv.conf)").
    public var dns: String?

    /// The resolv.conf of a namespace tunnelgate wrote the tunnel's DNS into, from `dns`.
    public var resolvConfPath: String? {
        guard let dns, let open = dns.firstIndex(of: "("), dns.hasSuffix(")") else { return nil }
        let path = String(dns[dns.index(after: open)..<dns.index(before: dns.endIndex)])
        guard path.hasPrefix("/etc/netns/"), path.hasSuffix("/resolv.conf"), !path.contains("/../") else { return nil }
        return path
    }

    public init(json text: String) throws(CNIError) {
        let value: JSONValue
        do { value = try JSONParser.parse(Array(text.utf8)) } catch {
            throw CNIError(.tunnelUnhealthy, "tunnelgate status --json printed something that is not JSON", details: error.description)
        }
        guard let status = value[member: "status"]?.stringValue else {
            throw CNIError(.tunnelUnhealthy, "tunnelgate status --json has no status")
        }
        self.status = status
        if case .number(let n, _)? = value[member: "pid"] { pid = Int32(exactly: n) }
        interface = value[member: "interface"]?.stringValue
        if case .number(let n, _)? = value[member: "interfaceIndex"] { interfaceIndex = Int(exactly: n) }
        addresses = []
        if case .array(let items)? = value[member: "addresses"] { addresses = items.compactMap(\.stringValue) }
        killSwitch = value[member: "killSwitch"] == .bool(true)
        firewall = value[member: "firewall"]?.stringValue
        firewallDifferences = []
        if case .array(let items)? = value[member: "firewallDifferences"] { firewallDifferences = items.compactMap(\.stringValue) }
        residue = value[member: "residue"] == .bool(true)
        failedClosed = value[member: "failedClosed"]?.stringValue
        lastDisconnectError = value[member: "lastDisconnectError"]?.stringValue
        dns = value[member: "dns"]?.stringValue
    }

    /// Nothing of the tunnel is left: no owner, no residue, no interface, no kill switch table.
    public var isGone: Bool {
        pid == nil && !residue && interface == nil && firewall == nil
    }

    /// Why CHECK fails, or nil when the tunnel is connected with its kill switch intact. `transient`
    /// is true for states that pass by themselves (connecting, reasserting).
    public func problem() -> (reason: String, transient: Bool)? {
        if let failedClosed { return ("the tunnel failed closed: \(failedClosed)", false) }
        guard pid != nil else {
            let why = lastDisconnectError.map { "; its last run ended with: \($0)" } ?? ""
            return ("the tunnel has no running owner (status \(status)\(residue ? ", residue left" : ""))\(why)", false)
        }
        guard killSwitch, firewall == "as planned" else {
            let differences = firewallDifferences.prefix(5).joined(separator: "; ")
            return ("the kill switch is not as planned (\(firewall ?? "absent"))" + (differences.isEmpty ? "" : ": \(differences)"), false)
        }
        guard interface != nil, interfaceIndex != nil else { return ("the tunnel's interface is missing", false) }
        switch status {
        case "connected": return nil
        case "connecting", "reasserting": return ("the tunnel is \(status)", true)
        default: return ("the tunnel is \(status)", false)
        }
    }
}
