import LinuxSystem
import TunnelgateSettings

/// The DNS servers the lab runs in nodes: dnsmasq, in the foreground of a process of its own,
/// ended with its namespace. A truthful one answers the topology's `dnsServer.records`; a lying one
/// (`lab dns-hijack NODE ADDR`) answers every name with ADDR.
public struct DNSServers {
    let lab: Lab

    public init(lab: Lab) { self.lab = lab }

    static func dnsmasqPath() throws -> String {
        for dir in ["/usr/sbin", "/usr/bin", "/sbin", "/bin"] where FileSystem.exists("\(dir)/dnsmasq") { return "\(dir)/dnsmasq" }
        throw LabError("dnsmasq is not installed (Debian: dnsmasq-base)")
    }

    func start(node: String, answers: [String]) throws {
        let path = try Self.dnsmasqPath()
        try stop(node: node)
        let ns = try lab.namespace(of: node)
        let log = "\(lab.registry.directory(lab.state.id))/dnsmasq-\(node).log"
        // Port 53 on every address of the node, no upstream, no /etc/hosts.
        let args = [path, "--keep-in-foreground", "--no-resolv", "--no-hosts", "--no-poll", "--port=53",
                    "--pid-file=", "--user=root", "--log-facility=-"] + answers
        let pid = try ns.perform { () throws -> Int32 in
            do { return try ProcessControl.spawnDetached(path, args, environment: ["PATH=/usr/sbin:/usr/bin:/sbin:/bin"], logPath: log) } catch {
                throw LabError("node \(node): cannot start dnsmasq: \(error)")
            }
        }
        try lab.mutateState { $0.dnsServers[node] = pid }
        // Ready when it answers: its UDP socket on port 53 is bound (/proc/net/udp of the node).
        let bound = Lab.poll(seconds: 5) {
            if ProcessControl.hasExited(pid) { return true }
            return (try? ns.perform { () throws -> Bool in
                let text = String(decoding: (try? FileSystem.read("/proc/net/udp")) ?? nil ?? [], as: UTF8.self)
                return text.contains(":0035 ")
            }) ?? false
        }
        if ProcessControl.hasExited(pid) || !bound {
            let output = String(decoding: ((try? FileSystem.read(log)) ?? nil) ?? [], as: UTF8.self)
            throw LabError("node \(node): dnsmasq did not start: \(output.split(separator: "\n").last ?? "no output")")
        }
    }

    public func startTruthful(node: String) throws {
        guard let n = lab.topology.node(node) else { return }
        try start(node: node, answers: n.dnsRecords.map { "--address=/\($0.name)/\($0.address)" })
    }

    /// Replaces the node's DNS server with one answering every name with `address`.
    public func hijack(node: String, address: IPAddress) throws {
        try start(node: node, answers: ["--address=/#/\(address)"])
        try lab.mutateState { $0.dnsHijack[node] = address.description }
    }

    /// Ends the lie; the topology's truthful server, if it has one, comes back.
    public func endHijack(node: String) throws {
        try stop(node: node)
        try lab.mutateState { $0.dnsHijack[node] = nil }
        if let n = lab.topology.node(node), !n.dnsRecords.isEmpty { try startTruthful(node: node) }
    }

    func stop(node: String) throws {
        guard let pid = lab.state.dnsServers[node] else { return }
        if !ProcessControl.hasExited(pid) {
            try? ProcessControl.signal(pid, 15)
            _ = Lab.poll(seconds: 5) { ProcessControl.hasExited(pid) }
        }
        _ = try? ProcessControl.wait(for: pid, block: false)
        try lab.mutateState { $0.dnsServers[node] = nil }
    }
}
