import Lab
import LinuxSystem
import TunnelgateSettings

extension Commands {
    /// Polls every 200 ms and prints one timestamped line per transition:
    /// `2025-01-01T10:00:00.123Z client tunnel tg0 connecting -> connected`,
    /// `… client process wireguard-go started pid 123` / `exited pid 123`.
    func watch(_ args: [String]) throws -> Int32 {
        let a = try Arguments(args, command: .watch, valued: ["--tunnel", "--process", "--for", "--tunnelgate"])
        try a.expect(0...0, .watch)
        let lab = try openRun()
        var seconds: Double?
        if let f = a.one("--for") {
            guard let v = Double(f), v > 0 else { throw UsageError(message: "--for takes seconds", command: .watch) }
            seconds = v
        }
        let tunnelgate = a.one("--tunnelgate") ?? ProcessControl.environmentValue("TG") ?? "tunnelgate"
        var tunnels: [(node: String, name: String?)] = []
        for t in a.options["--tunnel"] ?? [] {
            let parts = t.split(separator: ":", maxSplits: 1).map(String.init)
            _ = try lab.namespace(of: parts[0])
            tunnels.append((parts[0], parts.count > 1 ? parts[1] : nil))
        }
        var processes: [(node: String, name: String)] = []
        for p in a.options["--process"] ?? [] {
            let parts = p.split(separator: ":", maxSplits: 1).map(String.init)
            guard parts.count == 2 else { throw UsageError(message: "--process takes NODE:NAME", command: .watch) }
            _ = try lab.namespace(of: parts[0])
            processes.append((parts[0], parts[1]))
        }
        if tunnels.isEmpty && processes.isEmpty { throw UsageError(message: "watch what? give --tunnel or --process", command: .watch) }
        let signals = try TerminationSignalDescriptor()
        let deadline = seconds.map { ProcessControl.monotonicSeconds() + $0 }
        var tunnelStates: [String: String] = [:]
        var processPIDs: [String: Set<Int32>] = [:]
        let out = "/tmp/tunnelgate-lab-watch-\(ProcessControl.id).json"
        defer { FileSystem.remove(out) }
        var first = true
        while true {
            for t in tunnels {
                let ns = try lab.namespace(of: t.node)
                var argv = [tunnelgate, "status"]
                if let n = t.name { argv.append(n) }
                argv.append("--json")
                let pid = try? ns.perform { () throws -> Int32 in try ProcessControl.spawnProcess(argv, standardOutput: out, standardError: "/dev/null") }
                var states: [String: String] = [:]
                if let pid, (try? ProcessControl.wait(for: pid)) != nil, let bytes = (try? FileSystem.read(out)) ?? nil,
                   let value = try? JSONParser.parse(bytes) {
                    for report in Self.reports(value) { states[report.name] = report.status }
                }
                if let n = t.name, states[n] == nil { states[n] = "disconnected" }
                for (name, status) in states.sorted(by: { $0.key < $1.key }) {
                    let key = "\(t.node)/\(name)"
                    let before = tunnelStates[key]
                    if before != status {
                        Self.emit("\(t.node) tunnel \(name) \(before.map { "\($0) -> " } ?? "")\(status)")
                        tunnelStates[key] = status
                    }
                }
            }
            for p in processes {
                let ns = try lab.namespace(of: p.node)
                let now = Set(ns.inode.map { ProcessControl.processes(inNetworkNamespace: $0) }?.filter {
                    ProcessControl.commandName(of: $0) == p.name && !ProcessControl.hasExited($0)
                } ?? [])
                let key = "\(p.node)/\(p.name)"
                let before = processPIDs[key] ?? []
                for pid in now.subtracting(before).sorted() { Self.emit("\(p.node) process \(p.name) \(first ? "running" : "started") pid \(pid)") }
                for pid in before.subtracting(now).sorted() { Self.emit("\(p.node) process \(p.name) exited pid \(pid)") }
                if first && now.isEmpty { Self.emit("\(p.node) process \(p.name) not running") }
                processPIDs[key] = now
            }
            first = false
            if let deadline, ProcessControl.monotonicSeconds() >= deadline { return ExitCode.success }
            if signals.wait(timeoutMilliseconds: 200) != nil { return ExitCode.success }
        }
    }

    static func reports(_ value: JSONValue) -> [(name: String, status: String)] {
        func one(_ v: JSONValue) -> (String, String)? {
            guard case .object(let m) = v else { return nil }
            var name: String?, status: String?
            for (k, x) in m {
                if k == "name", case .string(let s) = x { name = s }
                if k == "status", case .string(let s) = x { status = s }
            }
            guard let name, let status else { return nil }
            return (name, status)
        }
        if let r = one(value) { return [r] }
        if case .object(let m) = value, let list = m.first(where: { $0.key == "tunnels" })?.value, case .array(let items) = list {
            return items.compactMap(one)
        }
        return []
    }

    static func emit(_ line: String) {
        print("\(timestamp()) \(line)")
        ProcessControl.flushStandardOutput()
    }

    /// UTC, milliseconds: 2025-01-01T10:00:00.123Z.
    static func timestamp() -> String {
        let t = ProcessControl.wallClockSeconds()
        var days = Int(t) / 86400
        let secs = Int(t) % 86400
        let ms = Int((t - Double(Int(t))) * 1000)
        // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
        days += 719468
        let era = days / 146097
        let doe = days - era * 146097
        let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365
        var y = yoe + era * 400
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let d = doy - (153 * mp + 2) / 5 + 1
        let m = mp < 10 ? mp + 3 : mp - 9
        if m <= 2 { y += 1 }
        func two(_ v: Int) -> String { v < 10 ? "0\(v)" : "\(v)" }
        let msText = ms < 10 ? "00\(ms)" : ms < 100 ? "0\(ms)" : "\(ms)"
        return "\(y)-\(two(m))-\(two(d))T\(two(secs / 3600)):\(two(secs % 3600 / 60)):\(two(secs % 60)).\(msText)Z"
    }
}
