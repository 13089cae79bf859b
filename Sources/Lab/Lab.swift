import FoundationEssentials
import LinuxSystem
import Netlink
import Nftables
import TunnelgateSettings

/// A lab run on this host: builds a topology into namespaces, changes it while it runs, and
/// removes all of it. Every change goes through rtnetlink and nf_tables (Sources/Netlink,
/// Sources/Nftables); nothing spawns ip(8), nft(8) or tc(8).
public final class Lab {
    public let registry: RunRegistry
    public private(set) var state: RunState
    public let topology: Topology

    init(registry: RunRegistry, state: RunState, topology: Topology) {
        self.registry = registry
        self.state = state
        self.topology = topology
    }

    /// Opens a run that is up.
    public static func open(_ id: String, registry: RunRegistry = RunRegistry()) throws -> Lab {
        let state = try registry.load(id)
        let bytes: [UInt8]?
        do { bytes = try FileSystem.read(registry.topologyPath(id)) } catch { throw LabError("cannot read \(registry.topologyPath(id)): \(error)") }
        guard let bytes else { throw LabError("run \(id) has no \(registry.topologyPath(id))") }
        let topology = try Topology.parse(json: bytes)
        return Lab(registry: registry, state: state, topology: topology)
    }

    public func save() throws { try registry.save(state) }

    public func mutateState(_ change: (inout RunState) -> Void) throws {
        change(&state)
        try save()
    }

    public func namespace(of node: String) throws -> NodeNamespace {
        guard let ns = state.namespaces[node] else {
            throw LabError("no node \(JSONValueQuote.quote(node)) in run \(state.id) (nodes: \(topology.nodes.map(\.name).joined(separator: ", ")))")
        }
        return NodeNamespace(node: node, namespaceName: ns)
    }

    public func link(_ name: String) throws -> Topology.Link {
        guard let l = topology.link(name) else {
            throw LabError("no link \(JSONValueQuote.quote(name)) in run \(state.id) (links: \(topology.links.map(\.name).joined(separator: ", ")))")
        }
        return l
    }

    // MARK: - up

    /// Builds `topology` as run `id`, owned by process `owner`. On any failure, removes what it made
    /// and throws; the host is left as it was.
    public static func up(topology: Topology, topologyBytes: [UInt8], topologyPath: String, id: String?, owner: Int32,
                          registry: RunRegistry = RunRegistry()) throws -> Lab {
        let runID = id ?? RunRegistry.newID()
        if let reason = RunRegistry.idProblem(runID) { throw LabError(reason) }
        do { try FileSystem.makeDirectories(registry.root) } catch { throw LabError("cannot make \(registry.root): \(error)") }
        // The directory is the run's claim on its id: mkdir fails if another run has it.
        let dir = registry.directory(runID)
        if FileSystem.exists(dir) { throw LabError("a lab run \(runID) exists already (\(dir)); `tunnelgate-lab down \(runID)` removes it") }
        for n in topology.nodes where FileSystem.exists(NamedNetworkNamespaces.path(RunRegistry.namespaceName(run: runID, node: n.name))) {
            throw LabError("namespace \(RunRegistry.namespaceName(run: runID, node: n.name)) exists already; choose another --run-id")
        }
        do { try FileSystem.makeDirectory(dir, mode: 0o755) } catch { throw LabError("cannot make \(dir): \(error)") }
        var namespaces: [String: String] = [:]
        for n in topology.nodes { namespaces[n.name] = RunRegistry.namespaceName(run: runID, node: n.name) }
        let state = RunState(id: runID, ownerPID: owner, ownerStartTime: ProcessControl.startTime(of: owner),
                             topologyPath: topologyPath, namespaces: namespaces)
        let lab = Lab(registry: registry, state: state, topology: topology)
        do {
            do { try FileSystem.writeAtomically(registry.topologyPath(runID), topologyBytes, mode: 0o644) } catch {
                throw LabError("cannot write \(registry.topologyPath(runID)): \(error)")
            }
            try lab.save()
            try lab.build()
        } catch {
            lab.tearDown()
            throw error
        }
        return lab
    }

    private func build() throws {
        for n in topology.nodes {
            let ns = try namespace(of: n.name)
            do { try NamedNetworkNamespaces.create(ns.namespaceName) } catch {
                throw LabError("node \(n.name): cannot create namespace \(ns.namespaceName): \(error)")
            }
            // DAD off before any link exists, so that no address, link-local ones included, is ever tentative.
            try ns.setSysctl("net.ipv6.conf.all.accept_dad", "0")
            try ns.setSysctl("net.ipv6.conf.default.accept_dad", "0")
            // `lab addr` replaces an address by adding the new one before deleting the old: the new one
            // must then stay when the old (primary) one goes.
            try ns.setSysctl("net.ipv4.conf.all.promote_secondaries", "1")
            try ns.setSysctl("net.ipv4.conf.default.promote_secondaries", "1")
            if n.forwarding {
                try ns.setSysctl("net.ipv4.ip_forward", "1")
                try ns.setSysctl("net.ipv6.conf.all.forwarding", "1")
            }
            for s in n.sysctls { try ns.setSysctl(s.key, s.value) }
            try ns.netlink().setLink("lo", up: true)
        }
        try recordCookies()
        for l in topology.links {
            let a = try namespace(of: l.a.node), b = try namespace(of: l.b.node)
            let peer: NetworkNamespace
            do { peer = try NetworkNamespace(named: b.namespaceName) } catch { throw LabError("link \(l.name): \(error)") }
            do {
                try a.netlink().addVethPair(name: l.a.interface, peerName: l.b.interface, peerNamespace: peer.descriptor,
                                            peerNamespaceName: b.namespaceName)
            } catch let e as NetlinkError {
                throw LabError("link \(l.name): \(e)")
            }
        }
        for n in topology.nodes {
            let ns = try namespace(of: n.name)
            let nl = try ns.netlink()
            for e in topology.ends(of: n.name) {
                try configureAddresses(nl, node: n.name, interface: e.interface, addresses: e.addresses)
                do { try nl.setLink(e.interface, up: true) } catch { throw LabError("node \(n.name): \(error)") }
            }
        }
        // Links come up asynchronously (the kernel's link watch): wait before adding routes.
        for n in topology.nodes {
            let nl = try namespace(of: n.name).netlink()
            let names = topology.ends(of: n.name).map(\.interface)
            let settled = Lab.poll(seconds: 10) {
                guard let links = try? nl.links() else { return false }
                return names.allSatisfy { name in links.contains { $0.name == name && $0.isRunning && $0.hasCarrier } }
            }
            if !settled { throw LabError("node \(n.name): its links did not come up within 10 s") }
        }
        for n in topology.nodes { try addRoutes(node: n.name) }
        for n in topology.nodes { try writeResolvConf(node: n) }
        try LeakWatch(lab: self).install()
        for n in topology.nodes where !n.dnsRecords.isEmpty { try DNSServers(lab: self).startTruthful(node: n.name) }
    }

    func configureAddresses(_ nl: NetlinkSocket, node: String, interface: String, addresses: [IPPrefix]) throws {
        guard let link = try nl.link(named: interface) else { throw LabError("node \(node): no interface \(interface)") }
        do {
            try nl.apply(addresses.map { .addAddress(AddressSpec(interfaceIndex: link.index, interfaceName: interface, prefix: $0)) })
        } catch {
            throw LabError("node \(node): \(error)")
        }
    }

    /// Adds the node's routes; a route that is there already is kept.
    func addRoutes(node: String) throws {
        guard let n = topology.node(node), !n.routes.isEmpty else { return }
        let nl = try namespace(of: node).netlink()
        for r in n.routes {
            guard let dev = topology.interface(for: r, in: node), let link = try nl.link(named: dev) else {
                throw LabError("node \(node): no interface for the route to \(r.destination)")
            }
            // RTPROT_STATIC (4), as an administrator's route.
            let spec = RouteSpec(destination: r.destination, table: 254, outputInterface: link.index, interfaceName: dev,
                                 gateway: r.gateway, protocolID: 4)
            do {
                try nl.execute([.addRoute(spec)], tolerating: [.exists])
            } catch {
                throw LabError("node \(node): \(error)")
            }
        }
    }

    /// /etc/netns/NAMESPACE/resolv.conf, which `lab exec` (like `ip netns exec`) mounts over /etc/resolv.conf.
    private func writeResolvConf(node n: Topology.Node) throws {
        guard !n.nameservers.isEmpty else { return }
        let ns = try namespace(of: n.name)
        let dir = "/etc/netns/\(ns.namespaceName)"
        do {
            try FileSystem.makeDirectories(dir)
            try FileSystem.write("\(dir)/resolv.conf",
                                 "# tunnelgate-lab run \(state.id), node \(n.name)\n" + n.nameservers.map { "nameserver \($0)\n" }.joined())
        } catch {
            throw LabError("node \(n.name): cannot write \(dir)/resolv.conf: \(error)")
        }
    }

    // MARK: - down

    /// Removes everything of the run: its processes, namespaces (their veths, qdiscs and nftables go
    /// with them), /etc/netns files and its state directory. Never throws: what can be removed is.
    /// Returns the problems met.
    @discardableResult
    public func tearDown() -> [String] {
        Lab.tearDown(id: state.id, namespaces: Array(state.namespaces.values), cookies: Array((state.namespaceCookies ?? [:]).values),
                     registry: registry)
    }

    @discardableResult
    public static func tearDown(id: String, namespaces: [String], cookies recorded: [UInt64] = [], registry: RunRegistry) -> [String] {
        var problems: [String] = []
        // Namespaces named for this run but missing from its state (a state lost mid-way) go too.
        let named = NamedNetworkNamespaces.names().filter { $0.hasPrefix(RunRegistry.namespaceName(run: id, node: "")) }
        let all = Array(Set(namespaces + named)).sorted()
        // The cookies of the namespaces still there (a state without them, or a namespace it does not
        // list), with those recorded at up for the ones already gone.
        var cookies = Set(recorded)
        for ns in all where FileSystem.exists(NamedNetworkNamespaces.path(ns)) {
            if let c = cookie(ofNamespace: ns) { cookies.insert(c) }
        }
        for ns in all {
            if let inode = NamedNetworkNamespaces.inode(ns) { killProcesses(inNamespace: inode) }
        }
        for ns in all {
            FileSystem.removeTree("/etc/netns/\(ns)")
            guard FileSystem.exists(NamedNetworkNamespaces.path(ns)) else { continue }
            do { try NamedNetworkNamespaces.remove(ns) } catch { problems.append("namespace \(ns): \(error)") }
        }
        // What Tunnelgate kept for tunnels in them (a scenario SIGKILLed with a tunnel up), once their
        // processes are gone: by cookie, never another namespace's of the same inode, never a running tunnel's.
        problems += TunnelgateStateDirectories.remove(cookies: cookies)
        FileSystem.removeTree(registry.directory(id))
        return problems
    }

    /// The cookie (SO_NETNS_COOKIE) of the named namespace; nil when it cannot be entered.
    static func cookie(ofNamespace name: String) -> UInt64? {
        guard let ns = try? NetworkNamespace(named: name) else { return nil }
        return try? ns.perform { () throws(SystemCallError) -> UInt64 in try ProcessControl.networkNamespaceCookie() }
    }

    /// Records every node's namespace cookie in the run's state.
    private func recordCookies() throws {
        var cookies: [String: UInt64] = [:]
        for (node, ns) in state.namespaces {
            guard let c = Lab.cookie(ofNamespace: ns) else { throw LabError("node \(node): cannot read its namespace's cookie") }
            cookies[node] = c
        }
        try mutateState { $0.namespaceCookies = cookies }
    }

    /// SIGTERM to every process in the namespace, SIGKILL to those left after 5 s.
    static func killProcesses(inNamespace inode: UInt64) {
        let me = ProcessControl.id
        var pids = ProcessControl.processes(inNetworkNamespace: inode).filter { $0 != me }
        guard !pids.isEmpty else { return }
        for p in pids { try? ProcessControl.signal(p, 15) }
        _ = poll(seconds: 5) {
            pids = ProcessControl.processes(inNetworkNamespace: inode).filter { $0 != me && !ProcessControl.hasExited($0) }
            return pids.isEmpty
        }
        for p in pids { try? ProcessControl.signal(p, 9) }
        _ = poll(seconds: 5) {
            ProcessControl.processes(inNetworkNamespace: inode).filter { $0 != me && !ProcessControl.hasExited($0) }.isEmpty
        }
    }

    /// Removes every run whose owner is gone, and lab namespaces no run claims. Returns what it removed.
    public static func sweep(registry: RunRegistry = RunRegistry()) -> (removed: [String], problems: [String]) {
        var removed: [String] = [], problems: [String] = []
        for id in registry.ids() {
            if let state = try? registry.load(id) {
                guard state.ownerIsGone else { continue }
                problems += tearDown(id: id, namespaces: Array(state.namespaces.values), cookies: Array((state.namespaceCookies ?? [:]).values),
                                     registry: registry)
            } else {
                // A directory without a readable state: a run that died before writing it, or not ours to read.
                guard let st = try? FileSystem.status(registry.directory(id)), FileSystem.exists(registry.directory(id)) else { continue }
                _ = st
                problems += tearDown(id: id, namespaces: [], registry: registry)
            }
            removed.append(id)
        }
        // Namespaces tgl-RUN-NODE whose run has no directory.
        let known = Set(registry.ids())
        var orphans: Set<String> = []
        for ns in NamedNetworkNamespaces.names() where ns.hasPrefix(RunRegistry.namespacePrefix) {
            let rest = ns.dropFirst(RunRegistry.namespacePrefix.count)
            guard let dash = rest.firstIndex(of: "-") else { continue }
            let id = String(rest[..<dash])
            if !known.contains(id) { orphans.insert(id) }
        }
        for id in orphans.sorted() {
            problems += tearDown(id: id, namespaces: [], registry: registry)
            removed.append(id)
        }
        return (removed, problems)
    }

    /// Polls `condition` every 50 ms for up to `seconds`.
    public static func poll(seconds: Double, _ condition: () -> Bool) -> Bool {
        let deadline = ProcessControl.monotonicSeconds() + seconds
        while true {
            if condition() { return true }
            if ProcessControl.monotonicSeconds() >= deadline { return false }
            ProcessControl.sleep(seconds: 0.05)
        }
    }
}
