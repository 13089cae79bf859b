import CTunnelgateShims
import FoundationEssentials
import Gateway
import Glibc
import LinuxSystem
import TunnelgateSettings

/// A configuration file that failed to parse or validate.
struct InvalidConfiguration: Error, CustomStringConvertible {
    let path: String
    let error: ConfigurationError
    var description: String {
        "\(path) is not a valid configuration (\(error.problems.count) problem\(error.problems.count == 1 ? "" : "s")):\n\(error)"
    }
}

struct Failure: Error, CustomStringConvertible {
    let description: String
    init(_ d: String) { description = d }
}

func loadSettings(_ path: String) throws -> TunnelSettings {
    let bytes: [UInt8]
    do {
        guard let b = try FileSystem.read(path) else { throw Failure("cannot read \(path): no such file") }
        bytes = b
    } catch let e as SystemCallError {
        throw Failure("cannot read \(path): \(e.errno)")
    }
    do {
        return try TunnelSettings.parse(json: bytes)
    } catch {
        throw InvalidConfiguration(path: path, error: error)
    }
}

/// Parses, validates and resolves: everything short of touching the kernel.
func loadAndResolve(_ path: String) throws -> (TunnelSettings, [IPAddress]) {
    let settings = try loadSettings(path)
    do {
        return (settings, try settings.resolveCarrierEndpoints(using: SystemResolver()))
    } catch {
        throw InvalidConfiguration(path: path, error: error)
    }
}

extension CommandLine {
    static func validate(_ path: String) throws -> Int32 {
        let (settings, carriers) = try loadAndResolve(path)
        let intent = RoutingIntent(settings: settings, carrierAddresses: carriers)
        print("\(path): valid: tunnel \(settings.name), "
              + "\(intent.ipv4.included.count + intent.ipv6.included.count) included and "
              + "\(intent.ipv4.excluded.count + intent.ipv6.excluded.count) excluded routes, "
              + "\(carriers.count) carrier address\(carriers.count == 1 ? "" : "es")")
        return ExitCode.success
    }

    /// The namespace of `--netns NS`, with a clear error when there is none.
    static func namespace(_ name: String?) throws -> NetworkNamespace? {
        guard let name else { return nil }
        do { return try NetworkNamespace(named: name) } catch {
            throw Failure("no network namespace named \(name) (/run/netns/\(name): \(error.errno))")
        }
    }

    static func plan(_ path: String, netns: String?) throws -> Int32 {
        let settings = try loadSettings(path)
        let gateway = try Gateway(readOnly: true, namespace: try namespace(netns))
        let plan: TunnelPlan
        do {
            plan = try gateway.plan(settings, resolver: SystemResolver())
        } catch GatewayError.configuration(let e) {
            throw InvalidConfiguration(path: path, error: e)
        }
        for line in plan.describe() { print(line) }
        return ExitCode.success
    }

    static func up(_ path: String, netns: String?, detach: Bool, readyFD: Int32?) throws -> Int32 {
        // Validate in the caller's process so that errors reach the terminal
        // directly and nothing is started for a bad configuration.
        let settings = try loadSettings(path)
        let isolated = try namespace(netns)
        if detach { return try spawnDetached(path, netns: netns, settings: settings) }

        let ready = readyFD.map { FileDescriptor(rawValue: $0) }
        let signals = try NoRuntimeLoop.blockTerminationSignals()
        let gateway = try Gateway(namespace: isolated)
        if ready == nil { gateway.log = { printError("tunnelgate: \($0)") } }
        let tunnel: ActiveTunnel
        do {
            tunnel = try gateway.up(settings, resolver: SystemResolver(), configPath: absolutePath(path))
        } catch {
            let message: String
            if case .configuration(let e) = error { message = InvalidConfiguration(path: path, error: e).description }
            else { message = error.description }
            if let ready { try? ready.writeAll(Array(("error " + message).utf8)); ready.close() }
            throw Failure(message)
        }
        let summary = "\(tunnel.plan.interfaceName): connected (table \(tunnel.plan.slot.table), "
            + "\(tunnel.plan.routes(interfaceIndex: nil).count) routes, \(tunnel.plan.rules.count) rules)"
        if let ready {
            try? ready.writeAll(Array(("ready " + summary).utf8))
            ready.close()
            printError("tunnelgate: \(summary)")
        } else {
            printError("tunnelgate: \(summary); stop with Ctrl-C or `tunnelgate down \(tunnel.plan.interfaceName)`")
        }
        let monitor = try? gateway.makeMonitor()
        if monitor == nil { printError("tunnelgate: warning: cannot watch for outside changes; they will not be repaired") }
        let signal = NoRuntimeLoop(tunnel: tunnel).run(signals: signals, monitor: monitor) { printError("tunnelgate: \($0)") }
        printError("tunnelgate: \(tunnel.plan.interfaceName): stopping (signal \(signal))")
        do {
            try tunnel.stop()
        } catch {
            throw Failure(error.description)
        }
        printError("tunnelgate: \(tunnel.plan.interfaceName): disconnected, everything removed")
        return ExitCode.success
    }

    /// Starts `tunnelgate up CONFIG --ready-fd 3` in its own session and waits
    /// until it reports the tunnel applied and verified, or its error.
    static func spawnDetached(_ path: String, netns: String?, settings: TunnelSettings) throws -> Int32 {
        var pipeFDs: [Int32] = [0, 0]
        _ = try syscall("pipe") { pipe(&pipeFDs) }
        let readEnd = FileDescriptor(rawValue: pipeFDs[0]), writeEnd = FileDescriptor(rawValue: pipeFDs[1])
        try readEnd.setCloseOnExec(true)
        try writeEnd.setCloseOnExec(true)
        defer { readEnd.close() }
        let state = try Gateway(namespace: try namespace(netns)).state
        let executable = "/proc/self/exe"
        let argv = ["tunnelgate", "up", absolutePath(path), "--ready-fd", "3"] + (netns.map { ["--netns", $0] } ?? [])
        var cArgs = argv.map { strdup($0) } + [nil]
        defer { for p in cArgs { free(p) } }
        var pid: pid_t = 0
        let rc = CTunnelgateShims_spawn_detached(executable, &cArgs, writeEnd.rawValue, state.logPath(settings.name), &pid)
        writeEnd.close()
        guard rc == 0 else { throw Failure("starting the tunnel process failed: \(Errno(rawValue: rc))") }

        var reply: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = chunk.withUnsafeMutableBytes { Glibc.read(readEnd.rawValue, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { break }
            reply += chunk[0..<n]
        }
        let text = String(decoding: reply, as: UTF8.self)
        if text.hasPrefix("ready ") {
            print("\(text.dropFirst(6)); running in the background as pid \(pid)")
            return ExitCode.success
        }
        var status: Int32 = 0
        waitpid(pid, &status, 0)
        if text.hasPrefix("error ") { throw Failure(String(text.dropFirst(6))) }
        throw Failure("the tunnel process exited before the tunnel was up (wait status \(status)); see \(state.logPath(settings.name))")
    }

    static func down(_ name: String, netns: String?) throws -> Int32 {
        if let reason = InterfaceName.problem(name) { throw UsageError(message: reason, command: .down) }
        let gateway = try Gateway(namespace: try namespace(netns))
        try gateway.down(name)
        print("\(name): down, everything removed")
        return ExitCode.success
    }

    static func status(_ name: String?, netns: String?, json: Bool) throws -> Int32 {
        if let name, let reason = InterfaceName.problem(name) { throw UsageError(message: reason, command: .status) }
        let gateway = try Gateway(readOnly: true, namespace: try namespace(netns))
        let reports = try gateway.reports(name: name)
        if json {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
            let data: Data
            if name != nil, let one = reports.first { data = try encoder.encode(one) }
            else { data = try encoder.encode(["tunnels": reports]) }
            print(String(decoding: data, as: UTF8.self))
            return ExitCode.success
        }
        if reports.isEmpty { print("no tunnels in this network namespace") }
        for r in reports { print(describe(r)) }
        return ExitCode.success
    }

    static func describe(_ r: TunnelReport) -> String {
        var lines = ["\(r.name): \(r.status.rawValue)\(r.pid.map { " (pid \($0))" } ?? "")"]
        if r.residue { lines.append("  residue of a run that did not stop cleanly; `tunnelgate down \(r.name)` removes it") }
        if let i = r.interface {
            lines.append("  interface: \(i) (index \(r.interfaceIndex ?? 0)), mtu \(r.mtu ?? 0)" + (r.namespace.map { ", in namespace \($0) (isolate mode)" } ?? ""))
        }
        if !r.addresses.isEmpty { lines.append("  addresses: \(r.addresses.joined(separator: ", "))") }
        if let t = r.table {
            lines.append("  routes (table \(t)): IPv4 \(r.ipv4Routes.included) included, \(r.ipv4Routes.excluded) excluded; "
                         + "IPv6 \(r.ipv6Routes.included) included, \(r.ipv6Routes.excluded) excluded; \(r.rules) rules")
        }
        if r.killSwitch { lines.append("  kill switch: on (nftables table inet tunnelgate-\(r.name)); nothing leaves but the tunnel, the carriers and loopback") }
        if let c = r.counters {
            lines.append("  packets from host: \(c.packetsFromHost) (\(c.bytesFromHost) bytes), to host: \(c.packetsToHost) (\(c.bytesToHost) bytes)")
            lines.append("  dropped: \(c.droppedNoRuntime) no runtime, \(c.droppedNotIP) not IP, \(c.droppedOverMTU) over MTU")
            if c.repairs > 0 { lines.append("  repaired \(c.repairs) time\(c.repairs == 1 ? "" : "s") after outside changes; last: \(c.lastRepair ?? "")") }
        }
        return lines.joined(separator: "\n")
    }

    static func absolutePath(_ path: String) -> String {
        if path.hasPrefix("/") { return path }
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX))
        guard getcwd(&buffer, buffer.count) != nil else { return path }
        let cwd = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return cwd + "/" + path
    }
}
