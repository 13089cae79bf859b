import Engine
import LinuxSystem
import Netlink
import Session
import TunnelgateSettings

/// `tunnelgate exec CONFIG [--user NAME|UID] -- CMD [ARGS…]`: one command behind the tunnel, in a
/// namespace made for it and removed with everything else when the command ends (docs/operations.md,
/// One command behind the tunnel).
extension CommandLine {
    static let execHelpText = """

    ARGUMENTS:
      CONFIG          A configuration: a path, or a NAME (see below).
      CMD [ARGS...]   The command, after `--`, found on PATH as the user it runs as.

    OPTIONS:
      --user USER     Run CMD as USER (a name or a uid). Default: the user sudo was
                      run by (SUDO_UID, SUDO_GID), else the caller.

    Makes a network namespace of its own (tgexec-NAME-PID under /run/netns), brings
    the tunnel up in it in isolate mode (as `up CONFIG --netns NS`: the namespace
    reaches nothing but the tunnel), and runs CMD there as `ip netns exec` would,
    with the namespace's own resolv.conf (/etc/netns/NS/resolv.conf, the tunnel's
    DNS servers) over /etc/resolv.conf. SIGINT, SIGTERM and SIGHUP are passed on to
    CMD. When CMD exits, whatever it left running in the namespace is killed, the
    tunnel is taken down, and the namespace and its files are removed. Exits with
    CMD's status (128+N when signal N ended it), 1 when the tunnel could not be
    brought up, 127 when CMD could not be run.

    """

    /// Splits `exec`'s arguments at the first `--`: tunnelgate's own before, the command after.
    static func splitExec(_ arguments: [String]) throws -> (own: [String], command: [String]) {
        guard let dash = arguments.firstIndex(of: "--") else {
            throw UsageError(message: "no `--` before the command", command: .exec)
        }
        let command = Array(arguments[(dash + 1)...])
        guard !command.isEmpty else { throw UsageError(message: "no command after `--`", command: .exec) }
        return (Array(arguments[..<dash]), command)
    }

    /// The user the command runs as: `--user NAME|UID`, else SUDO_UID/SUDO_GID, else this process's.
    static func execAccount(_ user: String?) throws -> ProcessControl.UserAccount {
        if let user {
            if !user.isEmpty, user.allSatisfy({ $0.isASCII && $0.isNumber }) {
                guard let uid = UInt32(user) else { throw UsageError(message: "--user \(user): not a uid", command: .exec) }
                // A uid the password database does not know runs with its own number as its group.
                return ProcessControl.user(id: uid) ?? ProcessControl.UserAccount(name: nil, uid: uid, gid: uid)
            }
            guard let account = ProcessControl.user(named: user) else {
                throw UsageError(message: "--user \(user): no such user", command: .exec)
            }
            return account
        }
        if let text = ProcessControl.environmentValue("SUDO_UID"), let uid = UInt32(text) {
            let gid = ProcessControl.environmentValue("SUDO_GID").flatMap(UInt32.init)
            var account = ProcessControl.user(id: uid) ?? ProcessControl.UserAccount(name: nil, uid: uid, gid: gid ?? uid)
            if let gid { account.gid = gid }
            return account
        }
        let uid = ProcessControl.effectiveUserID
        return ProcessControl.user(id: uid) ?? ProcessControl.UserAccount(name: nil, uid: uid, gid: uid)
    }

    static func exec(_ path: String, user: String?, command: [String]) throws -> Int32 {
        let account = try execAccount(user)
        // The configuration is read and checked before anything is made.
        let settings = try loadSettings(path)
        let signals: FileDescriptor
        do { signals = try TerminationSignals.block() } catch { throw Failure("blocking the termination signals failed: \(error)") }
        let name = "tgexec-\(settings.name)-\(ProcessControl.id)"
        do { try NamedNetworkNamespaces.create(name) } catch { throw Failure("cannot make the namespace \(name): \(error)") }
        let namespace: NetworkNamespace
        do {
            namespace = try NetworkNamespace(named: name)
            // The socket is bound to the namespace it is made in.
            let socket = try namespace.perform { () throws(SystemCallError) in try NetlinkSocket() }
            try socket.setLink("lo", up: true)
        } catch {
            try? NamedNetworkNamespaces.remove(name)
            throw Failure("cannot prepare the namespace \(name): \(error)")
        }
        var engine: Int32?
        defer { removeExecNamespace(name, namespace: namespace, engine: engine) }

        // The tunnel, in the namespace: `up CONFIG --netns NAME` in its own session, ready once verified.
        do {
            let started = try startEngine(path, netns: .named(name), restart: nil, settings: settings)
            engine = started.pid
            printError("tunnelgate: \(started.summary)")
        }
        let engineExit: ProcessExit
        do { engineExit = try ProcessExit(pid: engine!) } catch { throw Failure("cannot follow the tunnel's process: \(error)") }
        defer { engineExit.close() }

        // The command, in the namespace, as the user.
        let argv = ["/proc/self/exe", "exec-enter", name, String(account.uid), String(account.gid), account.name ?? "", "--"] + command
        let child: Int32
        do { child = try ProcessControl.spawnProcess(argv, inheritStandardInput: true) } catch {
            throw Failure("cannot start \(command[0]): \(error)")
        }
        let childExit: ProcessExit
        do { childExit = try ProcessExit(pid: child) } catch {
            try? ProcessControl.signal(child, SignalNumber.kill)
            _ = try? ProcessControl.wait(for: child)
            throw Failure("cannot follow \(command[0]): \(error)")
        }
        defer { childExit.close() }

        var tunnelEnded = false
        while !childExit.hasExited {
            var set = PollSet()
            set.add(signals, .readable)
            set.add(childExit.descriptor, .readable)
            let engineIndex = tunnelEnded ? nil : set.add(engineExit.descriptor, .readable)
            _ = try? set.wait(timeoutMilliseconds: -1)
            if set.events(at: 0).contains(.readable) {
                let signal = TerminationSignals.read(signals)
                if signal != 0 { try? ProcessControl.signal(child, signal) }
            }
            if let engineIndex, set.events(at: engineIndex) != [] {
                // The tunnel ended under the command (it failed): the command goes too, nothing runs
                // in the namespace without its tunnel.
                tunnelEnded = true
                printError("tunnelgate: \(settings.name): the tunnel ended while \(command[0]) ran; stopping it")
                try? ProcessControl.signal(child, SignalNumber.terminate)
            }
        }
        let termination = (try? ProcessControl.wait(for: child)) ?? nil
        if tunnelEnded {
            // Read before the namespace and its state go.
            let reason = (try? Engine(readOnly: true, namespace: namespace))?.lastDisconnectError(settings.name)
            throw Failure("\(settings.name): the tunnel ended before \(command[0]) did" + (reason.map { ": \($0)" } ?? ""))
        }
        switch termination {
        case .exited(let code)?: return code
        case .signalled(let signal)?: return 128 + signal
        case nil: return ExitCode.failure
        }
    }

    /// Everything `exec` made, in order: what the command left in the namespace (killed), the tunnel
    /// (its engine stopped, and waited for), the namespace's state directory and the namespace's name.
    static func removeExecNamespace(_ name: String, namespace: NetworkNamespace, engine: Int32?) {
        let inode = namespace.inode
        for pid in ProcessControl.processes(inNetworkNamespace: inode) { try? ProcessControl.signal(pid, SignalNumber.kill) }
        if let engine {
            // Its pidfd before the signal: the engine is this process's child, so its pid stays its own until reaped.
            let exit = try? ProcessExit(pid: engine)
            try? ProcessControl.signal(engine, SignalNumber.terminate)
            let stopped = exit.map { (try? Poll.readable($0.descriptor, timeoutMilliseconds: 30_000)) ?? false } ?? false
            exit?.close()
            if !stopped {
                try? ProcessControl.signal(engine, SignalNumber.kill)
                printError("tunnelgate: the tunnel did not stop within 30 s; removing what its journal lists")
            }
            _ = try? ProcessControl.wait(for: engine)
        }
        // What a killed engine left (its journal), and the directory itself.
        _ = try? namespace.perform { () throws(EngineError) in
            let gateway = try Engine()
            for tunnel in gateway.state.tunnelNames() { try? gateway.down(tunnel, keepKillSwitch: false) }
            gateway.state.removeAll()
        }
        do { try NamedNetworkNamespaces.remove(name) } catch {
            printError("tunnelgate: removing the namespace \(name) failed: \(error)")
        }
    }

    /// `tunnelgate exec-enter NS UID GID NAME -- CMD…` (not in the help; started by `exec` only):
    /// enters NS as `ip netns exec NS` does (its mounts, /etc/netns/NS over /etc), becomes the user,
    /// and replaces itself with CMD.
    static func execEnter(_ arguments: [String]) -> Int32 {
        guard arguments.count >= 6, arguments[4] == "--", let uid = UInt32(arguments[1]), let gid = UInt32(arguments[2]) else {
            printError("tunnelgate: exec-enter is started by `tunnelgate exec` only")
            return ExitCode.usage
        }
        let name = arguments[0], command = Array(arguments[5...])
        let account = ProcessControl.UserAccount(name: arguments[3].isEmpty ? nil : arguments[3], uid: uid, gid: gid)
        do {
            try NetworkNamespace(named: name).enter()
            try NamedNetworkNamespaces.enterMountsForExec(name)
            try ProcessControl.become(account)
        } catch {
            printError("tunnelgate: exec: entering \(name) as uid \(uid) failed: \(error)")
            return 127
        }
        ProcessControl.flushStandardOutput()
        do { try ProcessControl.replaceProcess(with: command) } catch {
            printError("tunnelgate: exec: \(command[0]): \(error.errno)")
            return 127
        }
    }
}
