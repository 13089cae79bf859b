import Lab
import LinuxSystem
import Netlink
import TunnelgateSettings

struct Commands {
    let runID: String?
    let registry = RunRegistry()

    func openRun(_ named: String? = nil) throws -> Lab {
        try Lab.open(try registry.resolve(named ?? runID))
    }

    func dispatch(_ command: LabCommand, _ args: [String]) throws -> Int32 {
        switch command {
        case .help: return ExitCode.success
        case .up: return try up(args)
        case .down:
            let a = try Arguments(args, command: .down, valued: [])
            try a.expect(0...1, .down)
            let id = try registry.resolve(a.positional.first ?? runID)
            guard FileSystem.exists(registry.directory(id)) || NamedNetworkNamespaces.names().contains(where: { $0.hasPrefix(RunRegistry.namespaceName(run: id, node: "")) }) else {
                throw LabError("no lab run \(JSONValue.quoted(id))")
            }
            let state = try? registry.load(id)
            let problems = Lab.tearDown(id: id, namespaces: state.map { Array($0.namespaces.values) } ?? [],
                                        cookies: state.map { Array(($0.namespaceCookies ?? [:]).values) } ?? [], registry: registry)
            if !problems.isEmpty { throw LabError("down \(id): " + problems.joined(separator: "; ")) }
            print("down \(id)")
            return ExitCode.success
        case .sweep:
            let a = try Arguments(args, command: .sweep, valued: [])
            try a.expect(0...0, .sweep)
            let (removed, problems) = Lab.sweep(registry: registry)
            for id in removed { print("swept \(id)") }
            if !problems.isEmpty { throw LabError("sweep: " + problems.joined(separator: "; ")) }
            return ExitCode.success
        case .list:
            for id in registry.ids() {
                if let s = try? registry.load(id) {
                    print("\(id) owner \(s.ownerPID)\(s.ownerIsGone ? " (gone)" : "") \(s.namespaces.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " "))")
                } else {
                    print("\(id) (no state)")
                }
            }
            return ExitCode.success
        case .exec: return try exec(args)
        case .impair: return try impair(args)
        case .addr:
            let a = try Arguments(args, command: .addr, valued: [])
            try a.expect(3...3, .addr)
            let lab = try openRun()
            try Impairments(lab: lab).changeAddress(node: a.positional[0], interface: a.positional[1], to: a.positional[2])
            print("\(a.positional[0]) \(a.positional[1]): \(lab.state.addressOverrides[a.positional[0]]?[a.positional[1]]?.joined(separator: " ") ?? "")")
            return ExitCode.success
        case .nat:
            let a = try Arguments(args, command: .nat, valued: [])
            try a.expect(2...2, .nat)
            let mode: NATMode?
            if a.positional[1] == "off" { mode = nil } else {
                guard let m = NATMode(rawValue: a.positional[1]) else {
                    throw UsageError(message: "unknown NAT mode \(JSONValue.quoted(a.positional[1]))", command: .nat)
                }
                mode = m
            }
            let lab = try openRun()
            try Impairments(lab: lab).setNAT(router: a.positional[0], mode: mode)
            print("nat \(a.positional[0]) \(mode?.rawValue ?? "off")")
            return ExitCode.success
        case .dnsHijack:
            let a = try Arguments(args, command: .dnsHijack, valued: [])
            try a.expect(2...2, .dnsHijack)
            let lab = try openRun()
            _ = try lab.namespace(of: a.positional[0])
            if a.positional[1] == "off" {
                try DNSServers(lab: lab).endHijack(node: a.positional[0])
                print("dns-hijack \(a.positional[0]) off")
            } else {
                guard let addr = IPAddress(a.positional[1]) else {
                    throw UsageError(message: "\(JSONValue.quoted(a.positional[1])) is not an address", command: .dnsHijack)
                }
                try DNSServers(lab: lab).hijack(node: a.positional[0], address: addr)
                print("dns-hijack \(a.positional[0]): every name is \(addr)")
            }
            return ExitCode.success
        case .kill: return try kill(args)
        case .leaks: return try leaks(args)
        case .expectNoLeaks: return try expectNoLeaks(args)
        case .snapshot: return try snapshot(args)
        case .diff:
            let a = try Arguments(args, command: .diff, valued: [])
            try a.expect(2...2, .diff)
            let (x, y) = (try readSnapshot(a.positional[0]), try readSnapshot(a.positional[1]))
            let d = x.difference(to: y)
            if d.isEmpty { print("same: \(a.positional[0]) \(a.positional[1])"); return ExitCode.success }
            print("--- \(a.positional[0])\n+++ \(a.positional[1])")
            for l in d { print(l) }
            return ExitCode.failure
        case .watch: return try watch(args)
        case .run: return try runScenario(args)
        case .phase:
            let a = try Arguments(args, command: .phase, valued: [])
            try a.expect(1...1, .phase)
            let lab = try openRun()
            try lab.mutateState { $0.phase = a.positional[0] }
            try LeakWatch(lab: lab).reset()
            print("# phase \(a.positional[0])")
            return ExitCode.success
        case .expect: return try expect(args)
        }
    }

    func up(_ args: [String]) throws -> Int32 {
        let a = try Arguments(args, command: .up, valued: ["--run-id", "--owner"], flags: [])
        try a.expect(1...1, .up)
        let path = a.positional[0]
        guard let bytes = try FileSystem.read(path) else { throw LabError("no topology file \(path)") }
        let topology: Topology
        do { topology = try Topology.parse(json: bytes) } catch {
            throw ConfigurationError(error.problems.map { ConfigProblem(path: "\(path): \($0.path)", reason: $0.reason) })
        }
        var owner = ProcessControl.parentID
        if let o = a.one("--owner") {
            guard let p = Int32(o), p > 0, ProcessControl.exists(p) else { throw UsageError(message: "--owner \(o) is not a running process", command: .up) }
            owner = p
        }
        guard ProcessControl.effectiveUserID == 0 else { throw LabError("up creates network namespaces and must run as root") }
        let lab = try Lab.up(topology: topology, topologyBytes: bytes, topologyPath: path, id: a.one("--run-id") ?? runID, owner: owner)
        print("run \(lab.state.id)")
        for n in topology.nodes { print("\(n.name) \(lab.state.namespaces[n.name]!)") }
        return ExitCode.success
    }

    func exec(_ args: [String]) throws -> Int32 {
        guard let dash = args.firstIndex(of: "--") else { throw UsageError(message: "no `--` before the command", command: .exec) }
        let before = Array(args[..<dash]), command = Array(args[(dash + 1)...])
        guard !command.isEmpty else { throw UsageError(message: "no command after `--`", command: .exec) }
        let a = try Arguments(before, command: .exec, valued: [])
        try a.expect(1...2, .exec)
        let lab = try openRun(a.positional.count == 2 ? a.positional[0] : nil)
        let ns = try lab.namespace(of: a.positional.last!)
        let handle: NetworkNamespace
        do { handle = try NetworkNamespace(named: ns.namespaceName) } catch { throw LabError("node \(ns.node): \(error)") }
        do {
            try handle.enter()
            try NamedNetworkNamespaces.enterMountsForExec(ns.namespaceName)
        } catch {
            throw LabError("node \(ns.node): \(error)")
        }
        ProcessControl.flushStandardOutput()
        do {
            try ProcessControl.replaceProcess(with: command)
        } catch {
            ProcessControl.writeStandardError("tunnelgate-lab: exec: \(error)\n")
            return 127
        }
    }

    func impair(_ args: [String]) throws -> Int32 {
        let a = try Arguments(args, command: .impair, valued: [])
        try a.expect(2...4, .impair)
        let link = a.positional[0], what = a.positional[1], values = Array(a.positional.dropFirst(2))
        func number(_ i: Int, _ role: String) throws -> Int {
            guard i < values.count, let n = Int(values[i]), n >= 0 else {
                throw UsageError(message: "\(what) needs \(role) (a whole number)", command: .impair)
            }
            return n
        }
        let impairment: Impairment
        switch what {
        case "loss": impairment = .loss(percent: try number(0, "a percentage"))
        case "rate": impairment = .rate(kbit: UInt64(try number(0, "a rate in kbit/s")))
        case "mtu-blackhole": impairment = .mtuBlackhole(bytes: try number(0, "a packet size in bytes"))
        case "delay": impairment = .delay(milliseconds: try number(0, "milliseconds"), jitterMilliseconds: values.count > 1 ? try number(1, "milliseconds") : 0)
        case "jitter": impairment = .delay(milliseconds: 0, jitterMilliseconds: try number(0, "milliseconds"))
        case "down": impairment = .down
        case "up": impairment = .up
        case "clear": impairment = .clear
        default: throw UsageError(message: "unknown impairment \(JSONValue.quoted(what))", command: .impair)
        }
        let expected: Int
        switch impairment {
        case .down, .up, .clear: expected = 0
        case .delay: expected = values.count
        default: expected = 1
        }
        if values.count != expected { throw UsageError(message: "\(what) takes \(expected) value\(expected == 1 ? "" : "s")", command: .impair) }
        let lab = try openRun()
        try Impairments(lab: lab).apply(impairment, to: link)
        print("impair \(link) \(([what] + values).joined(separator: " "))")
        return ExitCode.success
    }

    func kill(_ args: [String]) throws -> Int32 {
        let a = try Arguments(args, command: .kill, valued: ["--signal"])
        try a.expect(2...2, .kill)
        let signals: [String: Int32] = ["KILL": 9, "TERM": 15, "INT": 2, "HUP": 1]
        let name = (a.one("--signal") ?? "KILL").uppercased().replacing("SIG", with: "")
        guard let signal = signals[name] else { throw UsageError(message: "unknown signal \(a.one("--signal")!)", command: .kill) }
        let lab = try openRun()
        let ns = try lab.namespace(of: a.positional[0])
        guard let inode = ns.inode else { throw LabError("node \(ns.node): its namespace is gone") }
        let pids = ProcessControl.processes(inNetworkNamespace: inode).filter {
            ProcessControl.commandName(of: $0) == a.positional[1] && !ProcessControl.hasExited($0)
        }
        guard !pids.isEmpty else { throw LabError("no process named \(a.positional[1]) in node \(ns.node)") }
        for p in pids { try ProcessControl.signal(p, signal) }
        _ = Lab.poll(seconds: signal == 9 ? 5 : 0) { pids.allSatisfy(ProcessControl.hasExited) }
        print("SIG\(name) \(pids.map(String.init).joined(separator: " ")) (\(a.positional[1]) in \(ns.node))")
        return ExitCode.success
    }

    func carriers(_ a: Arguments, _ command: LabCommand) throws -> [CarrierSpec] {
        try (a.options["--carrier"] ?? []).map { text in
            guard let c = CarrierSpec(text) else {
                throw UsageError(message: "--carrier \(JSONValue.quoted(text)) is not IP:PORT/udp|tcp[@[SADDR:]SPORT] ([IPv6]:PORT/udp@[IPv6]:SPORT for IPv6)", command: command)
            }
            return c
        }
    }

    func allowed(_ a: Arguments, _ command: LabCommand) throws -> [IPPrefix] {
        try (a.options["--allow"] ?? []).map { text in
            guard let p = IPPrefix(text) else { throw UsageError(message: "--allow \(JSONValue.quoted(text)) is not a prefix", command: command) }
            return p
        }
    }

    /// --after MS / --before MS: a moment in milliseconds since the epoch (`date +%s%3N`).
    func moment(_ a: Arguments, _ option: String, _ command: LabCommand) throws -> UInt64? {
        guard let text = a.one(option) else { return nil }
        guard let v = UInt64(text) else {
            throw UsageError(message: "\(option) \(JSONValue.quoted(text)) is not a time in milliseconds since the epoch (date +%s%3N)", command: command)
        }
        return v
    }

    func leaks(_ args: [String]) throws -> Int32 {
        let a = try Arguments(args, command: .leaks, valued: ["--carrier", "--allow"], flags: ["--json"])
        try a.expect(1...1, .leaks)
        let lab = try openRun()
        switch a.positional[0] {
        case "reset":
            try LeakWatch(lab: lab).reset()
            print("leak counters reset")
        case "show":
            let cs = try carriers(a, .leaks)
            let allow = try allowed(a, .leaks)
            let reading = try LeakWatch(lab: lab).read()
            if a.flags.contains("--json") {
                print(LeakVerdict.json(reading: reading, carriers: cs, allowed: allow))
                return ExitCode.success
            }
            for f in reading.flows { print("\(LeakVerdict.kind(of: f, carriers: cs, allowed: allow)) \(f.descriptionWithTime)") }
            for f in reading.flowsByUID { print("by-uid \(f.descriptionWithTime)") }
            if reading.unitemised > 0 { print("unitemised \(reading.unitemised) packets") }
        default:
            throw UsageError(message: "leaks takes reset or show, not \(JSONValue.quoted(a.positional[0]))", command: .leaks)
        }
        return ExitCode.success
    }

    func expectNoLeaks(_ args: [String]) throws -> Int32 {
        let a = try Arguments(args, command: .expectNoLeaks, valued: ["--carrier", "--allow", "--uid", "--name", "--after", "--before", "--only"])
        try a.expect(0...0, .expectNoLeaks)
        let cs = try carriers(a, .expectNoLeaks)
        let allowed = try allowed(a, .expectNoLeaks)
        var window = LeakWindow(after: try moment(a, "--after", .expectNoLeaks), before: try moment(a, "--before", .expectNoLeaks))
        if let only = a.one("--only") {
            guard let c = LeakClass(rawValue: only) else {
                throw UsageError(message: "--only \(JSONValue.quoted(only)) is not one of \(LeakClass.allCases.map(\.rawValue).joined(separator: ", "))", command: .expectNoLeaks)
            }
            window.only = c
        }
        if let after = window.after, let before = window.before, after >= before {
            throw UsageError(message: "--after \(after) is not before --before \(before)", command: .expectNoLeaks)
        }
        var uid: UInt32?
        if let u = a.one("--uid") {
            guard let v = UInt32(u) else { throw UsageError(message: "--uid \(u) is not a uid", command: .expectNoLeaks) }
            uid = v
        }
        let lab = try openRun()
        let started = ProcessControl.monotonicSeconds()
        let reading = try LeakWatch(lab: lab).read()
        let verdict = LeakVerdict(reading: reading, carriers: cs, allowed: allowed, uid: uid, window: window)
        var name = a.one("--name") ?? "no leaks (carriers: \(cs.isEmpty ? "none" : cs.map(\.description).joined(separator: " "))\(uid.map { ", from uid \($0)" } ?? ""))"
        if a.one("--name") == nil, !allowed.isEmpty { name += " allowing \(allowed.map(\.description).joined(separator: " "))" }
        if a.one("--name") == nil { name += window.description }
        let detail = verdict.passed ? "\(verdict.carrierPackets) carrier packets, nothing else" : verdict.lines.joined(separator: "\n")
        Expectations.record(TestResult(phase: lab.state.phase ?? "", name: name, passed: verdict.passed, detail: detail,
                                       seconds: ProcessControl.monotonicSeconds() - started))
        return verdict.passed ? ExitCode.success : ExitCode.failure
    }

    func snapshot(_ args: [String]) throws -> Int32 {
        let a = try Arguments(args, command: .snapshot, valued: ["--out"])
        try a.expect(1...1, .snapshot)
        let node = a.positional[0]
        let snap: Snapshot
        if node == "host" {
            snap = try Snapshot.take(title: "host", namespaceName: nil)
        } else {
            let lab = try openRun()
            let ns = try lab.namespace(of: node)
            snap = try ns.perform { try Snapshot.take(title: "\(node) (\(ns.namespaceName))", namespaceName: ns.namespaceName) }
        }
        if let out = a.one("--out") {
            do { try FileSystem.write(out, snap.text) } catch { throw LabError("cannot write \(out): \(error)") }
        } else {
            print(snap.text, terminator: "")
        }
        return ExitCode.success
    }

    func readSnapshot(_ path: String) throws -> Snapshot {
        guard let bytes = try FileSystem.read(path) else { throw LabError("no snapshot file \(path)") }
        let text = String(decoding: bytes, as: UTF8.self)
        guard text.hasPrefix("# tunnelgate-lab snapshot: ") else { throw LabError("\(path) is not a snapshot (`tunnelgate-lab snapshot NODE --out FILE` writes one)") }
        return Snapshot.parse(text)
    }

    func expect(_ args: [String]) throws -> Int32 {
        guard let kind = args.first else { throw UsageError(message: "expect what?", command: .expect) }
        if kind == "ok" {
            // expect ok NAME -- CMD…: passes when CMD (run here, not in a node) exits 0.
            guard args.count >= 4, args[2] == "--" else { throw UsageError(message: "expect ok NAME -- CMD…", command: .expect) }
            let started = ProcessControl.monotonicSeconds()
            let pid = try ProcessControl.spawnProcess(Array(args[3...]))
            let status = try ProcessControl.wait(for: pid)
            let phase = (try? openRun())?.state.phase ?? ""
            let r = TestResult(phase: phase, name: args[1], passed: status == .exited(0),
                               detail: status == .exited(0) ? "" : "\(args[3...].joined(separator: " ")): \(status.map { "\($0)" } ?? "?")",
                               seconds: ProcessControl.monotonicSeconds() - started)
            Expectations.record(r)
            return r.passed ? ExitCode.success : ExitCode.failure
        }
        let a = try Arguments(Array(args.dropFirst()), command: .expect, valued: ["--name"])
        let started = ProcessControl.monotonicSeconds()
        var result: TestResult
        switch kind {
        case "reach", "no-reach":
            try a.expect(2...2, .expect)
            guard let addr = IPAddress(a.positional[1]) else { throw UsageError(message: "\(JSONValue.quoted(a.positional[1])) is not an address", command: .expect) }
            let lab = try openRun()
            let (ok, text) = try Expectations.reaches(lab, node: a.positional[0], address: addr)
            let want = kind == "reach"
            result = TestResult(phase: lab.state.phase ?? "", name: a.one("--name") ?? "\(a.positional[0]) \(want ? "reaches" : "does not reach") \(addr)",
                                passed: ok == want, detail: text)
        case "route":
            try a.expect(3...3, .expect)
            guard let addr = IPAddress(a.positional[1]) else { throw UsageError(message: "\(JSONValue.quoted(a.positional[1])) is not an address", command: .expect) }
            let lab = try openRun()
            let (dev, words) = try Expectations.routeDevice(lab, node: a.positional[0], address: addr)
            result = TestResult(phase: lab.state.phase ?? "", name: a.one("--name") ?? "\(a.positional[0]) routes \(addr) via \(a.positional[2])",
                                passed: dev == a.positional[2], detail: dev == a.positional[2] ? words : "expected dev \(a.positional[2]), got: \(words)")
        case "carrier":
            try a.expect(3...3, .expect)
            guard ["on", "off"].contains(a.positional[2]) else { throw UsageError(message: "carrier takes on or off", command: .expect) }
            let lab = try openRun()
            let link = try lab.namespace(of: a.positional[0]).netlink().link(named: a.positional[1])
            let want = a.positional[2] == "on"
            let words = link.map { "\($0.name): \($0.isUp ? "up" : "down"), carrier \($0.hasCarrier ? "on" : "off")" } ?? "no interface \(a.positional[1])"
            result = TestResult(phase: lab.state.phase ?? "", name: a.one("--name") ?? "\(a.positional[0]) \(a.positional[1]) has carrier \(a.positional[2])",
                                passed: link?.hasCarrier == want, detail: words)
        case "same-snapshot":
            try a.expect(2...2, .expect)
            let (x, y) = (try readSnapshot(a.positional[0]), try readSnapshot(a.positional[1]))
            let d = x.difference(to: y)
            let phase = (try? openRun())?.state.phase ?? ""
            result = TestResult(phase: phase, name: a.one("--name") ?? "same snapshot: \(a.positional[0]) \(a.positional[1])",
                                passed: d.isEmpty, detail: d.joined(separator: "\n"))
        default:
            throw UsageError(message: "unknown expectation \(JSONValue.quoted(kind))", command: .expect)
        }
        result.seconds = ProcessControl.monotonicSeconds() - started
        Expectations.record(result)
        return result.passed ? ExitCode.success : ExitCode.failure
    }

    func runScenario(_ args: [String]) throws -> Int32 {
        let dash = args.firstIndex(of: "--")
        let own = dash.map { Array(args[..<$0]) } ?? args
        let extra = dash.map { Array(args[($0 + 1)...]) } ?? []
        let a = try Arguments(own, command: .run, valued: ["--topology", "--tap", "--junit", "--run-id"])
        try a.expect(1...1, .run)
        guard ProcessControl.effectiveUserID == 0 else { throw LabError("run creates network namespaces and must run as root") }
        let topology = a.one("--topology") ?? defaultTopology()
        guard let topology else { throw UsageError(message: "no --topology given and no default topology found (Examples/lab/vpn-client.json)", command: .run) }
        let binary = ProcessControl.executablePath() ?? CommandLine.arguments[0]
        if let id = a.one("--run-id") ?? runID, let reason = RunRegistry.idProblem(id) { throw UsageError(message: reason, command: .run) }
        return ScenarioRunner(scenario: a.positional[0], scenarioArguments: extra, topologyPath: topology, runID: a.one("--run-id") ?? runID,
                              tapPath: a.one("--tap"), junitPath: a.one("--junit"), labBinary: binary).run()
    }

    /// Examples/lab/vpn-client.json beside the package this binary was built in, or installed in share/.
    func defaultTopology() -> String? {
        var candidates = ["Examples/lab/vpn-client.json", "/usr/share/tunnelgate-lab/vpn-client.json"]
        if let exe = ProcessControl.executablePath() {
            // .build/debug/tunnelgate-lab → the package root three levels up.
            var parts = exe.split(separator: "/").map(String.init)
            if parts.count > 3 {
                parts.removeLast(3)
                candidates.insert("/" + parts.joined(separator: "/") + "/Examples/lab/vpn-client.json", at: 1)
            }
        }
        return candidates.first { FileSystem.exists($0) }
    }
}
