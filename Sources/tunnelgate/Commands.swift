import RuntimeABI
import Session
import Engine
import Runtimes
import LinuxSystem
import TunnelgateSettings
import WireGuard

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

/// Reads CONFIG for validate, plan and up: a wg-quick file when its name ends
/// in `.conf` or its first line that is not blank or a comment is
/// `[Interface]`, JSON otherwise. The file is opened once as a TrustedFile
/// (refused, in one line, when anyone but root or this user could change it
/// or a directory on the way to it) and read into secure memory; a wg-quick
/// file's keys are decoded from those bytes into secure memory and the bytes
/// are wiped. Files holding keys must be owner-only.
func loadSettings(_ path: String) throws -> TunnelSettings {
    let file: FileContents
    do { file = try FileContents.read(path, limit: 1 << 20) } catch {
        switch error {
        case .missing: throw Failure("cannot read \(path): no such file")
        case .refused(let line): throw Failure(line)
        case .tooLong: throw Failure("\(path) is larger than 1 MiB; a configuration is a few lines")
        }
    }
    guard path.hasSuffix(".conf") || file.bytes.withUnsafeBytes({ WgQuickConfig.looksLikeWgQuick($0) }) else {
        do {
            // JSON holds no key (keys are in files of their own, read by OwnerOnlySecretFiles).
            return try TunnelSettings.parse(json: file.bytes.withUnsafeBytes { Array($0) }, secretFiles: OwnerOnlySecretFiles())
        } catch {
            throw InvalidConfiguration(path: path, error: error)
        }
    }
    let settings: TunnelSettings
    do {
        settings = try WgQuickConfig.parse(contents: file.bytes, name: path, secretMemory: SecureMemoryAllocator())
    } catch {
        throw InvalidConfiguration(path: path, error: error)
    }
    // A valid wg-quick file holds the interface's PrivateKey itself.
    if let problem = file.file.ownerOnlyProblem(holding: "a private key") { throw Failure(problem) }
    return settings
}

extension RuntimeSettings {
    /// The runtime holds a key or secret: WireGuard's keys, MeshGuard's identity seed, a callback
    /// runtime's secret.
    var holdsSecret: Bool {
        switch self {
        case .none: false
        case .callback(let c): c.secret != .none
        case .mesh, .wireguard: true
        }
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

    /// The namespace of `--netns NS` (any form: NamespaceReference), with a clear error naming NS
    /// when there is none or it is no network namespace. Nothing is changed.
    static func opened(_ reference: NamespaceReference?) throws -> OpenedNamespace? {
        guard let reference else { return nil }
        do { return try reference.open() } catch { throw Failure(error.description) }
    }

    static func namespace(_ reference: NamespaceReference?) throws -> NetworkNamespace? {
        try opened(reference)?.namespace
    }

    /// For status, down and message: the namespace, or (when it is gone) an error that says where a
    /// tunnel that ended with it left its reason.
    static func existingNamespace(_ reference: NamespaceReference?) throws -> NetworkNamespace? {
        do { return try namespace(reference) } catch let error as Failure {
            throw Failure(error.description + "\n(a tunnel that ended because its namespace went away says why in "
                          + "`tunnelgate status NAME` without --netns)")
        }
    }

    static func plan(_ path: String, netns: NamespaceReference?) throws -> Int32 {
        var settings = try loadSettings(path)
        // A mesh node's identity (and mesh address) from its seed file; never created by plan.
        var identityLine: String?
        if case .mesh(let m) = settings.runtime {
            let identity: MeshIdentity?
            do { identity = try MeshIdentity.read(m) } catch { throw Failure(error.description) }
            if let identity {
                identityLine = "# mesh identity \(identity.hex), mesh IPv4 \(identity.meshIPv4) "
                    + "(derived from runtime.identitySeedFile; peers name this node by the identity)"
                do { settings = try settings.resolvingMeshAddress(identity.meshIPv4) } catch {
                    throw InvalidConfiguration(path: path, error: error)
                }
            } else if let key = settings.meshAddressPath {
                throw Failure("\(path): \(key): 'auto' is this node's mesh address, derived from its identity, and "
                              + "\(m.identitySeedFile) does not exist yet"
                              + (m.generateIdentity ? " (runtime.generateIdentity creates it at `tunnelgate up`)" : ""))
            } else {
                identityLine = "# mesh identity: \(m.identitySeedFile) does not exist yet"
                    + (m.generateIdentity ? "; `tunnelgate up` creates it (runtime.generateIdentity)" : "")
            }
        }
        let gateway = try Engine(readOnly: true, namespace: try namespace(netns))
        let plan: TunnelPlan
        do {
            plan = try gateway.plan(settings, resolver: SystemResolver())
        } catch EngineError.configuration(let e) {
            throw InvalidConfiguration(path: path, error: e)
        }
        for line in plan.describe() { print(line) }
        if let identityLine { print(identityLine) }
        return ExitCode.success
    }

    static func up(_ path: String, netns: NamespaceReference?, detach: Bool, readyFD: Int32?, restart: String? = nil) throws -> Int32 {
        // Validate in the caller's process so that errors reach the terminal
        // directly and nothing is started for a bad configuration.
        // NOTIFY_SOCKET and WATCHDOG_* are this process's alone: removed from the environment before
        // anything is started (the packet plane, a detached `up`), and used only by a foreground `up`.
        let notifier = ServiceNotifier.fromEnvironment(log: { printError("tunnelgate: \($0)") })
        var settings = try loadSettings(path)
        if let restart {
            guard let r = RestartSettings.parse(restart) else {
                throw UsageError(message: "--restart: \(RestartSettings.problem(restart) ?? restart)", command: .up)
            }
            settings.restart = r
        }
        // A process holding a key or secret dumps no core and lets no one without CAP_SYS_PTRACE read it.
        if settings.runtime.holdsSecret {
            do { try ProcessControl.protectSecrets() } catch { throw Failure(error.description) }
        }
        if let notice = SecureBytes.takeLockFailureNotice() { printError("tunnelgate: warning: \(notice)") }
        let isolated = try opened(netns)
        if detach { return try spawnDetached(path, netns: netns, restart: restart, settings: settings) }

        let ready = readyFD.map { FileDescriptor(rawValue: $0) }
        func fail(_ message: String) -> Failure {
            if let ready { try? ready.writeAll(Array(("error " + message).utf8)); ready.close() }
            return Failure(message)
        }
        // The settings go on without this frame's copy: their keys are released once handed to the plane.
        return try upWithPlane(consume settings, path: path, isolated: isolated, ready: ready,
                               notifier: detach || ready != nil ? nil : notifier, fail: fail)
    }

    /// `up` with the runtime in a packet plane: the unprivileged, sandboxed process that hosts it
    /// (docs/architecture.md, Processes). This process is the engine: it applies the settings, watches
    /// and repairs them, serves the control socket and publishes the status; the plane moves packets.
    static func upWithPlane(_ original: consuming TunnelSettings, path: String, isolated: OpenedNamespace?, ready: FileDescriptor?,
                            notifier: ServiceNotifier?, fail: (String) -> Failure) throws -> Int32 {
        var settings = consume original
        // The engine keeps only the capabilities it needs (TunnelSession.engineCapabilities).
        do { try ProcessControl.keepOnly(TunnelSession.engineCapabilities) } catch { throw fail(error.description) }
        // What the plane needs, read here (files trusted, secrets in secure memory), nothing loaded.
        let package: PlanePackage
        let identity: MeshIdentity?
        // The namespace the tunnel is in: the isolate namespace, or this one.
        let namespace = isolated?.namespace.inode ?? (try? ProcessControl.networkNamespaceIdentity()) ?? 0
        do { (package, identity) = try PlaneHandoff.prepare(settings, namespace: namespace) } catch { throw fail(error.description) }
        // The WireGuard keys are in the package's tail now (for the plane, and its restarts): the
        // settings' own copy goes, so that the engine holds one.
        if case .wireguard(let w) = settings.runtime { settings.runtime = .wireguard(w.withoutKeys()) }
        let signals: FileDescriptor, engine: Engine, user: PlaneUser
        do {
            if let identity {
                // "auto" in ipv4Settings.addresses: the node's own mesh IPv4, derived from its identity.
                do { settings = try settings.resolvingMeshAddress(identity.meshIPv4) } catch {
                    throw fail(InvalidConfiguration(path: path, error: error).description)
                }
            }
            signals = try TerminationSignals.block()
            engine = try Engine(namespace: isolated?.namespace)
            do { user = try PlaneUser.allocate() } catch { throw fail(error.description) }
        } catch {
            package.release()
            throw error
        }
        if ready == nil { engine.log = { printError("tunnelgate: \($0)") } }
        let session = TunnelSession(engine: engine, settings: settings, package: package, user: user,
                                    restart: restartPolicy(settings.restart), planeLog: FileDescriptor(rawValue: 2),
                                    log: { printError("tunnelgate: \($0)") })
        session.notifier = notifier
        if let isolated {
            // The tunnel ends when its namespace goes (its process exits, its file is removed).
            do { session.namespaceWatch = try isolated.watch() } catch {
                _ = try? session.stop()
                throw fail("--netns \(isolated.reference): cannot watch the namespace: \(error)")
            }
        }
        notifier?.status("\(settings.name): connecting (loading the runtime, applying the settings)")
        // The runtime is loaded in the plane (library, symbols, secret) before the kernel is touched.
        do { try session.prepare() } catch {
            _ = try? session.stop()
            throw fail(error.description)
        }
        do {
            try session.apply(configPath: absolutePath(path), resolver: SystemResolver())
        } catch {
            _ = try? session.stop()
            // A kill switch in place (a dead owner's, or this run's) stays closed after a failed up.
            let closed = engine.hasKillSwitchInPlace(settings.name)
                ? "\nthe kill switch of \(settings.name) stays in place until `tunnelgate down \(settings.name)`" : ""
            if case .configuration(let e) = error { throw fail(InvalidConfiguration(path: path, error: e).description + closed) }
            throw fail(error.description + closed)
        }
        let name = settings.name
        engine.recordDisconnect(name, message: nil)
        func ended(_ message: String) -> Failure {
            engine.recordDisconnect(name, message: message)
            return fail(message)
        }
        do {
            try session.start()
            try session.serve()
        } catch {
            let note = (try? session.stop(keepKillSwitch: true)) ?? "\n(removing the tunnel failed too: run `tunnelgate down \(name)`)"
            throw ended("\(error)" + note)
        }
        // Applied and verified (Engine.up), the runtime ready, the control socket served.
        notifier?.ready(status: session.statusLine)
        if let ready {
            try? ready.writeAll(Array(("ready " + session.summary).utf8))
            ready.close()
            printError("tunnelgate: \(session.summary)")
        } else {
            printError("tunnelgate: \(session.summary); stop with Ctrl-C or `tunnelgate down \(name)`")
        }
        var failure: String?
        var namespaceGone: String?
        switch session.run(signals: signals) {
        case .signal(let signal): printError("tunnelgate: \(name): stopping (signal \(signal))")
        case .stopRequested: printError("tunnelgate: \(name): stopping (stop requested)")
        case .sleep: printError("tunnelgate: \(name): stopping (the host is going to sleep)")  // providers only
        case .failedClosed(let reason):
            failure = "failed closed: \(reason)"
        case .runtimeFailed(let reason):
            // Without a kill switch (with one the session holds it until down, and does not end here).
            failure = reason
            printError("tunnelgate: \(name): the runtime failed: \(reason); stopping")
        case .startFailed(let error), .cancelled(let error?):
            failure = error.message  // a provider's ends: not reached for a configuration's runtime
        case .startTimedOut(let seconds):
            failure = "startTunnel did not complete within \(seconds) s"
        case .cancelled(nil):
            break
        case .namespaceGone(let why):
            namespaceGone = "its namespace \(isolated?.summary ?? "") went away: \(why)"
            printError("tunnelgate: \(name): \(namespaceGone!); stopping")
        }
        // A namespace that went while processes are still in it (a container sharing it, `ip netns del`
        // with processes inside) keeps the kill switch: it goes with the namespace, never before it.
        let stillUsed = namespaceGone != nil && isolated.map { !ProcessControl.processes(inNetworkNamespace: $0.namespace.inode).isEmpty } == true
        do {
            let note = try session.stop(keepKillSwitch: stillUsed)
            for line in note.split(separator: "\n") { printError("tunnelgate: \(name): \(line)") }
        } catch {
            engine.recordDisconnect(name, message: (failure.map { "the runtime failed: \($0); then " } ?? "") + error.description)
            throw Failure(error.description)
        }
        if let namespaceGone {
            // Recorded where the namespace's state is (while it lasts) and in the caller's namespace,
            // where `tunnelgate status NAME` finds it after the namespace is gone.
            engine.recordDisconnect(name, message: namespaceGone)
            (try? Engine())?.recordDisconnect(name, message: namespaceGone)
            printError("tunnelgate: \(name): disconnected, everything removed" + (stillUsed ? " but the kill switch in the namespace, which goes with it" : ""))
            throw Failure("\(name): \(namespaceGone)")
        }
        printError("tunnelgate: \(name): disconnected, everything removed")
        if let failure {
            engine.recordDisconnect(name, message: "the runtime failed: \(failure)")
            throw Failure("the runtime failed: \(failure)")
        }
        return ExitCode.success
    }

    /// The packet plane's restart policy: `--restart`, else the configuration's `restart`, else never.
    static func restartPolicy(_ settings: RestartSettings?) -> RestartPolicy {
        guard let settings, settings.policy == .onFailure else { return .never }
        return RestartPolicy(mode: .onFailure, maximumAttempts: settings.attempts, initialDelay: 0.5, maximumDelay: 10)
    }

    /// Starts `tunnelgate up CONFIG --ready-fd 3` in its own session and waits
    /// until it reports the tunnel applied and verified, or its error.
    static func spawnDetached(_ path: String, netns: NamespaceReference?, restart: String?, settings: TunnelSettings) throws -> Int32 {
        let started = try startEngine(path, netns: netns, restart: restart, settings: settings)
        print("\(started.summary); running in the background as pid \(started.pid)")
        return ExitCode.success
    }

    /// The engine of `up --detach` and `exec`: `tunnelgate up CONFIG --ready-fd 3` in a session of its
    /// own, its output appended to the tunnel's log; returns once it has written `ready SUMMARY` (the
    /// settings applied and verified), or throws its `error …` line.
    static func startEngine(_ path: String, netns: NamespaceReference?, restart: String?,
                            settings: TunnelSettings) throws -> (pid: Int32, summary: String) {
        // Both ends blocking: the child writes its one line, this process waits for it.
        let (readEnd, writeEnd) = try FileDescriptor.pipe()
        defer { readEnd.close() }
        do {
            try readEnd.setNonBlocking(false)
            try writeEnd.setNonBlocking(false)
        } catch {
            writeEnd.close()
            throw error
        }
        let state = try Engine(namespace: try namespace(netns)).state
        let executable = "/proc/self/exe"
        let argv = ["tunnelgate", "up", absolutePath(path), "--ready-fd", "3"] + (netns.map { ["--netns", $0.description] } ?? [])
            + (restart.map { ["--restart", $0] } ?? [])
        let pid: Int32
        do {
            // This process's environment; standard output and error appended to the log; the write end is 3.
            pid = try ProcessControl.spawnDetached(executable, argv, environment: ProcessControl.environment(),
                                                   logPath: state.logPath(settings.name), passing: writeEnd)
        } catch {
            writeEnd.close()
            throw Failure("starting the tunnel process failed: \(error.errno)")
        }
        writeEnd.close()

        var reply: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = chunk.withUnsafeMutableBytes { b in Result { () throws(SystemCallError) in try readEnd.read(into: b) } }
            guard case .success(let count?) = n, count > 0 else { break }
            reply += chunk[0..<count]
        }
        let text = String(decoding: reply, as: UTF8.self)
        if text.hasPrefix("ready ") { return (pid, String(text.dropFirst(6))) }
        // The raw wait status, as waitpid(2) gives it.
        let status: Int32 = switch (try? ProcessControl.wait(for: pid)) ?? nil {
        case .exited(let code): code << 8
        case .signalled(let signal): signal
        case nil: 0
        }
        if text.hasPrefix("error ") { throw Failure(String(text.dropFirst(6))) }
        throw Failure("the tunnel process exited before the tunnel was up (wait status \(status)); see \(state.logPath(settings.name))")
    }

    static func down(_ name: String, netns: NamespaceReference?, keepKillSwitch: Bool) throws -> Int32 {
        if let reason = InterfaceName.problem(name) { throw UsageError(message: reason, command: .down) }
        let gateway = try Engine(namespace: try existingNamespace(netns))
        // A user's disconnect; not the units' ExecStopPost= (--keep-kill-switch), which cleans up after a stop.
        if netns == nil, !keepKillSwitch { userDisconnected(name) }
        try gateway.down(name, keepKillSwitch: keepKillSwitch)
        if keepKillSwitch, gateway.hasKillSwitchInPlace(name) {
            print("\(name): down, everything removed but its kill switch, which stays until `tunnelgate down \(name)` or the next `up`")
        } else {
            print("\(name): down, everything removed")
        }
        return ExitCode.success
    }

    static func status(_ name: String?, netns: NamespaceReference?, json: Bool) throws -> Int32 {
        if let name, let reason = InterfaceName.problem(name) { throw UsageError(message: reason, command: .status) }
        let gateway = try Engine(readOnly: true, namespace: try existingNamespace(netns))
        let reports = try gateway.reports(name: name)
        if json {
            let json: JSONValue
            if name != nil, let one = reports.first { json = try JSONCoding.encodeValue(one) }
            else { json = try JSONCoding.encodeValue(["tunnels": reports]) }
            print(json.prettyPrintedSorted())
            return ExitCode.success
        }
        if reports.isEmpty { print("no tunnels in this network namespace") }
        for r in reports { print(describe(r)) }
        return ExitCode.success
    }

    static func message(_ name: String, _ data: String, netns: NamespaceReference?) throws -> Int32 {
        if let reason = InterfaceName.problem(name) { throw UsageError(message: reason, command: .message) }
        let gateway = try Engine(readOnly: true, namespace: try namespace(netns))
        let path = gateway.state.controlPath(name)
        guard FileSystem.exists(path) else { throw Failure("tunnel \(name) is not running in this network namespace") }
        let answer = try ControlServer.request(path, "message " + Base64.encode(Array(data.utf8)))
        guard let value = try? JSONParser.parse(Array(answer.utf8)), case .object = value else {
            throw Failure("unreadable answer from tunnel \(name)")
        }
        if case .string(let reply)? = value.member("reply"), let bytes = Base64.decode(reply) {
            print(String(decoding: bytes, as: UTF8.self))
            return ExitCode.success
        }
        if case .string(let error)? = value.member("error") { throw Failure(error) }
        throw Failure("unreadable answer from tunnel \(name)")
    }

    /// Prints each NEVPNStatus transition of `name` as a JSON line, until it is disconnected.
    ///
    /// Woken by inotify on the state directory (the owner writes NAME.state by rename on every transition;
    /// when it stops, its record says disconnected until it has removed and released NAME.lock, and only
    /// then is NAME.state removed), so a state is seen however short it is: `disconnecting` lasts as long
    /// as the teardown, 15 to 30 ms here, which a 20 ms poll alone sees only when the teardown outlasts
    /// it. It still polls every 20 ms for what makes no event (an owner killed: the kernel releases its
    /// lock).
    static func watchStatus(_ name: String, netns: NamespaceReference?) throws -> Int32 {
        if let reason = InterfaceName.problem(name) { throw UsageError(message: reason, command: .status) }
        let gateway = try Engine(readOnly: true, namespace: try namespace(netns))
        let statePath = gateway.state.statePath(name)
        // Without inotify (or the directory, before any tunnel ran in this namespace) polling alone.
        let events = try? DirectoryChanges(watching: gateway.state.path)
        defer { events?.close() }
        var last: TunnelStatus?
        while true {
            // The events only say "look again": drained before looking, so none is lost in between.
            events?.drain()
            var status = try gateway.status(of: name)
            // A held lock without a state file reads as connecting (an owner starting, before its first
            // record); after the tunnel was up it is the end of disconnecting. The owner's own stop never
            // shows it (its record says disconnected until NAME.lock is released: teardown's keepRecord),
            // but `tunnelgate down` removing a dead owner's residue holds the lock after removing the record.
            if status == .connecting, let last, last != .connecting, !FileSystem.exists(statePath) { status = .disconnecting }
            if status != last {
                let seconds = Double(ProcessControl.monotonicSeconds())
                // Written straight to the descriptor: a pipe reader sees each line as it happens.
                let line = #"{"name":"\#(name)","status":"\#(status.rawValue)","monotonic":\#(seconds)}"# + "\n"
                try? FileDescriptor.standardOutput.writeAll(Array(line.utf8))
                last = status
            }
            if status == .disconnected { return ExitCode.success }
            if let events {
                _ = try? Poll.readable(events.descriptor, timeoutMilliseconds: 20)
            } else {
                ProcessControl.sleep(seconds: 0.02)
            }
        }
    }

    static func describe(_ r: TunnelReport) -> String {
        var lines = ["\(r.name): \(r.status.rawValue)\(r.pid.map { " (pid \($0))" } ?? "")"]
        if let e = r.lastDisconnectError { lines.append("  last run ended with: \(e)") }
        if r.residue { lines.append("  residue of a run that did not stop cleanly; `tunnelgate down \(r.name)` removes it") }
        if r.noSettings == true { lines.append("  no network settings: the provider has set none, so nothing is applied and the tunnel routes nothing") }
        if let i = r.interface {
            lines.append("  interface: \(i) (index \(r.interfaceIndex ?? 0)), mtu \(r.mtu ?? 0)" + (r.namespace.map { ", in namespace \($0) (isolate mode)" } ?? ""))
        }
        if !r.addresses.isEmpty { lines.append("  addresses: \(r.addresses.joined(separator: ", "))") }
        if let dns = r.dns { lines.append("  dns: \(dns)") }
        if let carriers = r.carrierExemption { lines.append("  carrier exemption: \(carriers)") }
        if let sleep = r.disconnectOnSleep { lines.append("  disconnect on sleep: \(sleep)") }
        if let proxy = r.proxy {
            // Written for programs that look; Linux has no system proxy, so nothing is enforced.
            var files = [proxy.pacFile.map { "PAC \($0)" }, proxy.environmentFile.map { "environment \($0)" }].compactMap { $0 }
            if let url = proxy.pacURL { files.append("PAC URL \(url) (not fetched)") }
            lines.append("  proxy (not enforced): \(files.isEmpty ? "no files" : files.joined(separator: ", "))")
            for note in proxy.notes { lines.append("    note: \(note)") }
        }
        if let pid = r.planePID {
            let sandbox = r.planeMountNamespace == false ? "unprivileged, sandboxed without its mount namespace" : "unprivileged, sandboxed"
            lines.append("  packet plane: pid \(pid), uid \(r.planeUser.map(String.init) ?? "?") (\(sandbox))")
        }
        if let t = r.table {
            func counts(_ c: TunnelReport.RouteCounts) -> String {
                "\(c.included) included, \(c.excluded) excluded" + (c.subnets > 0 ? ", \(c.subnets) to the TUN's subnet\(c.subnets == 1 ? "" : "s")" : "")
            }
            lines.append("  routes (table \(t)): IPv4 \(counts(r.ipv4Routes)); IPv6 \(counts(r.ipv6Routes)); \(r.rules) rules")
        }
        lines += r.firewallLines
        if case .object(let members)? = r.runtime {
            func text(_ key: String) -> String? {
                if case .string(let v)? = members.first(where: { $0.key == key })?.value { return v }
                return nil
            }
            var line = "  runtime: \(text("state") ?? "state unknown")"
            if let i = text("interface") { line += " (interface \(i))" }
            if let e = text("error") { line += ": \(e)" }
            lines.append(line + "; its whole status: `tunnelgate status \(r.name) --json`, .runtime")
        }
        if let c = r.counters {
            lines.append("  packets from host: \(c.packetsFromHost) (\(c.bytesFromHost) bytes), to host: \(c.packetsToHost) (\(c.bytesToHost) bytes)")
            lines.append("  dropped: \(c.droppedNoRuntime) no runtime, \(c.droppedNotIP) not IP, \(c.droppedOverMTU) over MTU, "
                         + "\(c.droppedMalformed) malformed from the runtime, \(c.droppedRefused) refused by it, "
                         + "\(c.droppedWriteFailed) not taken by the TUN")
            if c.queueFull > 0 || c.retries > 0 {
                lines.append("  backpressure: \(c.queueFull) QUEUE_FULL answers, \(c.retries) packets sent again (none dropped for it)")
            }
            if c.repairs > 0 { lines.append("  repaired \(c.repairs) time\(c.repairs == 1 ? "" : "s") after outside changes; last: \(c.lastRepair ?? "")") }
        }
        return lines.joined(separator: "\n")
    }

    static func absolutePath(_ path: String) -> String {
        if path.hasPrefix("/") { return path }
        guard let cwd = FileSystem.currentDirectory() else { return path }
        return cwd + "/" + path
    }
}
