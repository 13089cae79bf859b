import LinuxSystem
import TunnelgateSettings

/// tunnelgate-cni: a CNI plugin, chained after a network's main plugin, that puts each container
/// behind a tunnel of its own in isolate mode (docs/cni.md). ADD names the container's namespace
/// under /run/netns (for the tunnel's life) and runs `tunnelgate up CONFIG --netns NAME --detach`:
/// the TUN and the kill switch in the container's namespace, tunnelgate and its carrier in the
/// runtime's (the host's). DEL runs `tunnelgate down` and removes the name; CHECK reads `tunnelgate
/// status --json`.
public struct CNIPlugin {
    /// What one run prints and exits with.
    public struct Outcome: Sendable {
        public var standardOutput: String
        public var exitStatus: Int32
        /// Lines for standard error (logs; the runtime shows them with a failure).
        public var log: [String]
    }

    public init() {}

    /// One invocation: the environment and standard input in, the result or error out.
    public func run(environment: [String: String], input: [UInt8]) -> Outcome {
        var log: [String] = []
        do {
            let invocation = try CNIInvocation.parse(environment)
            if invocation.command == .version { return Outcome(standardOutput: version(input), exitStatus: 0, log: log) }
            let config = try PluginConfiguration.parse(input)
            let out: String
            switch invocation.command {
            case .add: out = try add(invocation, config, log: &log).serialized(indent: 4)
            case .del: try delete(invocation, config, log: &log); out = ""
            case .check: try check(invocation, config); out = ""
            case .version: out = version(input)
            }
            return Outcome(standardOutput: out, exitStatus: 0, log: log)
        } catch {
            log.append("tunnelgate-cni: \(environment["CNI_COMMAND"] ?? "?") failed: \(error)")
            return Outcome(standardOutput: error.json(cniVersion: PluginConfiguration.versionForErrors(input)), exitStatus: 1, log: log)
        }
    }

    /// VERSION: the versions spoken, answered in the version asked in (or the latest).
    func version(_ input: [UInt8]) -> String {
        let asked = (try? JSONParser.parse(input))?[member: "cniVersion"]?.stringValue ?? CNIVersion.latest.description
        return JSONValue.object([
            ("cniVersion", .string(asked)),
            ("supportedVersions", .array(CNIVersion.supported.map { .string($0.description) })),
        ]).serialized(indent: 4)
    }

    // MARK: ADD

    func add(_ invocation: CNIInvocation, _ config: PluginConfiguration, log: inout [String]) throws(CNIError) -> JSONValue {
        let netns = invocation.netns ?? ""
        guard let selection = try TunnelSelection.select(config, invocation) else {
            // Nothing names a tunnel for this container: it is not ours to change.
            guard let prev = config.prevResult else {
                throw CNIError(.invalidConfiguration, "no tunnel is named and there is no prevResult",
                               details: "give the network a \"tunnel\", or the container one (pod annotation \(PluginConfiguration.annotation), CNI_ARGS \(TunnelSelection.argument))")
            }
            return prev.setting("cniVersion", to: .string(config.cniVersionText))
        }
        let names = AttachmentName(network: config.network, containerID: invocation.containerID, ifname: invocation.ifname)
        if CNIResult.interfaces(of: config.prevResult, in: netns).contains(names.tunnel) {
            throw CNIError(.invalidConfiguration, "the container already has an interface \(names.tunnel)",
                           details: "prevResult lists it: is tunnelgate-cni twice in the chain?")
        }
        let state = try PluginState(config.stateDirectory)
        let lock = try state.lock(names.tunnel)
        // The lock file goes with the record: a failed ADD leaves neither.
        defer { lock.release(removing: !FileSystem.exists(state.recordPath(names.tunnel))) }
        if let existing = try state.record(names.tunnel) {
            guard existing.belongs(network: config.network, containerID: invocation.containerID, ifname: invocation.ifname) else {
                throw CNIError(.tunnelFailed, "the tunnel name \(names.tunnel) is taken by another attachment",
                               details: "container \(existing.containerID) on network \(existing.network) (\(existing.ifname)); the names of the two hash alike")
            }
            throw CNIError(.tunnelFailed, "this container already has a tunnel on network \(config.network) (\(names.tunnel))",
                           details: "ADD again without DEL; DEL removes it")
        }
        guard let inode = NamedNetworkNamespaces.inode(atPath: netns), NamedNetworkNamespaces.isNetworkNamespace(netns) else {
            throw CNIError(.unknownContainer, "CNI_NETNS \(netns) is not a network namespace")
        }
        let tunnelgate = try TunnelgateCommand(config.tunnelgate, scratch: state.scratchPath(names.tunnel))
        let file = try configurationFile(selection.source, config)
        let wgQuick = file.map { $0.hasSuffix(".conf") } ?? false
        var record = AttachmentRecord(network: config.network, containerID: invocation.containerID, ifname: invocation.ifname,
                                      netns: netns, netnsInode: inode, tunnel: names.tunnel, namespaceName: names.namespace,
                                      configuration: state.configurationPath(names.tunnel, wgQuick: wgQuick),
                                      source: "\(selection.source), chosen by \(selection.chosenBy)", phase: .adding)
        // From here on everything made is recorded first, and a failure removes it all again.
        try state.write(record)
        do throws(CNIError) {
            try prepareConfiguration(selection.source, file: file, for: record)
            do { try NamedNetworkNamespaces.bind(names.namespace, to: netns) } catch {
                throw CNIError(.ioFailure, "cannot name the container's namespace \(names.namespace)", details: error.description)
            }
            let up = try tunnelgate.run(["up", record.configuration, "--netns", names.namespace, "--detach"], timeout: config.timeout)
            guard up.succeeded else {
                throw CNIError(.tunnelFailed, "the tunnel did not come up (\(selection.source))", details: up.message)
            }
            let report = try status(tunnelgate, record)
            guard let interface = report.interface, let pid = report.pid else {
                throw CNIError(.tunnelFailed, "the tunnel came up but is not running (\(report.status))",
                               details: report.lastDisconnectError ?? "")
            }
            record.phase = .up
            record.ownerPID = pid
            record.ownerStartTime = ProcessControl.startTime(of: pid)
            try state.write(record)
            log.append("tunnelgate-cni: \(invocation.containerID.prefix(12)): tunnel \(interface) up (\(selection.source)), owner pid \(pid)")
            return CNIResult.adding(tunnel: interface, addresses: report.addresses, dns: resolverSettings(report),
                                    sandbox: netns, to: config.prevResult, version: config.cniVersion, versionText: config.cniVersionText)
        } catch {
            // A failed ADD leaves nothing behind.
            let failure = error
            do { try remove(record, tunnelgate, state) } catch { log.append("tunnelgate-cni: cleaning up after the failed ADD: \(error)") }
            throw failure
        }
    }

    /// The configuration file a source names (nil for inline settings), checked to exist.
    func configurationFile(_ source: TunnelSource, _ config: PluginConfiguration) throws(CNIError) -> String? {
        switch source {
        case .configured(let name):
            let json = "\(config.tunnelDirectory)/\(name).json", conf = "\(config.tunnelDirectory)/\(name).conf"
            switch (FileSystem.exists(json), FileSystem.exists(conf)) {
            case (true, false): return json
            case (false, true): return conf
            case (true, true):
                throw CNIError(.invalidConfiguration, "the configured tunnel \(name) is ambiguous",
                               details: "both \(json) and \(conf) exist")
            case (false, false):
                throw CNIError(.invalidConfiguration, "no tunnel is configured as \(name)",
                               details: "neither \(json) nor \(conf) exists")
            }
        case .path(let path):
            guard FileSystem.exists(path) else { throw CNIError(.invalidConfiguration, "tunnel.path \(path) does not exist") }
            return path
        case .settings:
            return nil
        case .podName:
            preconditionFailure("TunnelSelection resolves podName to a configured name")
        }
    }

    /// Writes the configuration `tunnelgate up` is given, named after the attachment's tunnel: a
    /// wg-quick file's name is its file name, so it gets a link of that name (its key is not copied);
    /// JSON gets a copy with `name` set (JSON holds no key: keys are in files of their own).
    func prepareConfiguration(_ source: TunnelSource, file: String?, for record: AttachmentRecord) throws(CNIError) {
        if let file, file.hasSuffix(".conf") {
            do { try FileSystem.createSymbolicLink(at: record.configuration, target: Array(file.utf8)) } catch {
                throw CNIError(.ioFailure, "cannot link \(record.configuration) to \(file)", details: error.description)
            }
            return
        }
        let settings: JSONValue
        if case .settings(let inline) = source {
            settings = inline
        } else {
            let path = file ?? ""
            let opened: TrustedFile
            do { opened = try TrustedFile.open(path) } catch {
                throw CNIError(.invalidConfiguration, "the tunnel configuration cannot be used", details: error.description)
            }
            defer { opened.close() }
            let bytes: [UInt8]?
            do { bytes = try opened.readAll(limit: 1 << 20) } catch {
                throw CNIError(.ioFailure, "cannot read \(path)", details: error.description)
            }
            guard let bytes else { throw CNIError(.invalidConfiguration, "\(path) is larger than 1 MiB") }
            do { settings = try JSONParser.parse(bytes) } catch {
                throw CNIError(.invalidConfiguration, "\(path) is not JSON (a wg-quick file's name ends in .conf)", details: error.description)
            }
            guard case .object = settings else { throw CNIError(.invalidConfiguration, "\(path) is \(settings.typeName), not a JSON object") }
        }
        let named = settings.setting("name", to: .string(record.tunnel))
        do { try FileSystem.writeAtomically(record.configuration, Array(named.serialized(indent: 2).utf8), mode: 0o600) } catch {
            throw CNIError(.ioFailure, "cannot write \(record.configuration)", details: error.description)
        }
    }

    /// `tunnelgate status NAME --netns NS --json`.
    func status(_ tunnelgate: TunnelgateCommand, _ record: AttachmentRecord) throws(CNIError) -> TunnelStatusReport {
        let out = try tunnelgate.run(["status", record.tunnel, "--netns", record.namespaceName, "--json"], timeout: 20)
        guard out.succeeded else { throw CNIError(.tunnelUnhealthy, "tunnelgate status failed", details: out.message) }
        return try TunnelStatusReport(json: out.standardOutput)
    }

    /// The DNS tunnelgate applied in the namespace: what the container's resolver must use. In
    /// isolate mode tunnelgate writes /etc/netns/NAME/resolv.conf for the first of the namespace's
    /// names (the runtime's netns-UUID sorts before the plugin's tgcni-…), and status names the file.
    func resolverSettings(_ report: TunnelStatusReport) -> ResolverSettings? {
        guard let path = report.resolvConfPath, let bytes = try? FileSystem.read(path) else { return nil }
        return ResolverSettings(resolvConf: String(decoding: bytes, as: UTF8.self))
    }

    // MARK: DEL

    func delete(_ invocation: CNIInvocation, _ config: PluginConfiguration, log: inout [String]) throws(CNIError) {
        let names = AttachmentName(network: config.network, containerID: invocation.containerID, ifname: invocation.ifname)
        // Never made: no state directory, or no record in it. DEL must succeed all the same.
        guard FileSystem.exists(PluginState.recordPathIn(config.stateDirectory, names.tunnel)) else { return }
        let state = try PluginState(config.stateDirectory)
        let lock = try state.lock(names.tunnel)
        guard let record = try state.record(names.tunnel),
              record.belongs(network: config.network, containerID: invocation.containerID, ifname: invocation.ifname) else {
            lock.release()
            return
        }
        let tunnelgate = try TunnelgateCommand(config.tunnelgate, scratch: state.scratchPath(names.tunnel))
        do { try remove(record, tunnelgate, state) } catch {
            lock.release()
            throw error
        }
        log.append("tunnelgate-cni: \(invocation.containerID.prefix(12)): tunnel \(record.tunnel) removed")
        lock.release(removing: true)
    }

    /// Removes everything `record` lists, in the reverse order of ADD: the tunnel (`tunnelgate down`
    /// while the namespace has its name; else, when the name went but the owner still runs, the
    /// owner is stopped as `down` would stop it), tunnelgate's empty bookkeeping for the namespace,
    /// the name, the configuration, the record. Throws, keeping the record and the name for the next
    /// DEL, when the tunnel is still there afterwards.
    func remove(_ record: AttachmentRecord, _ tunnelgate: TunnelgateCommand, _ state: PluginState) throws(CNIError) {
        let bound = NamedNetworkNamespaces.path(record.namespaceName)
        let named = NamedNetworkNamespaces.inode(atPath: bound) == record.netnsInode
        if named {
            let down = try tunnelgate.run(["down", record.tunnel, "--netns", record.namespaceName], timeout: 30)
            let after = try status(tunnelgate, record)
            guard after.isGone else {
                throw CNIError(.teardownFailed, "the tunnel \(record.tunnel) is still there after tunnelgate down",
                               details: down.succeeded ? "status \(after.status)" : down.message)
            }
            removeTunnelgateBookkeeping(record)
        } else if let pid = record.ownerPID, let start = record.ownerStartTime, ProcessControl.startTime(of: pid) == start {
            // The namespace lost its name (removed by someone else): its owner still holds it.
            try? ProcessControl.signal(pid, SignalNumber.terminate)
            let deadline = ProcessControl.monotonicSeconds() + 15
            while !ProcessControl.hasExited(pid), ProcessControl.monotonicSeconds() < deadline { ProcessControl.sleep(seconds: 0.02) }
            if !ProcessControl.hasExited(pid) {
                try? ProcessControl.signal(pid, SignalNumber.kill)
                let killed = ProcessControl.monotonicSeconds() + 2
                while !ProcessControl.hasExited(pid), ProcessControl.monotonicSeconds() < killed { ProcessControl.sleep(seconds: 0.02) }
            }
            guard ProcessControl.hasExited(pid) else {
                throw CNIError(.teardownFailed, "the tunnel's owner (pid \(pid)) did not stop")
            }
            removeTunnelgateBookkeeping(record)
        }
        if FileSystem.exists(bound) {
            // Only the name this record made: a name of the same spelling for another namespace stays.
            if NamedNetworkNamespaces.inode(atPath: bound) == record.netnsInode || !NamedNetworkNamespaces.isNetworkNamespace(bound) {
                do { try NamedNetworkNamespaces.remove(record.namespaceName) } catch {
                    throw CNIError(.teardownFailed, "cannot remove the namespace name \(record.namespaceName)", details: error.description)
                }
            }
        }
        FileSystem.remove(record.configuration)
        state.removeRecord(record.tunnel)
    }

    /// tunnelgate keeps, per namespace it has worked in, /run/tunnelgate/net-INODE with the
    /// namespace's cookie and an allocation lock; `down` leaves them. The container's namespace ends
    /// with the container, so the directory is removed here when nothing else is in it (the tunnel's
    /// last error goes with it). Without the plugin's name the inode may already be another
    /// namespace's: a directory holding anything else is left alone, and bookkeeping alone is what
    /// tunnelgate makes again (its cookie tells namespaces apart). After an owner that was killed,
    /// `down` also leaves its control socket (NAME.sock there) and the built-in WireGuard's API
    /// socket (/var/run/wireguard/NAME.sock): this is called once the tunnel is gone (no owner holds
    /// NAME.lock), so nobody serves them, and NAME is this attachment's alone.
    func removeTunnelgateBookkeeping(_ record: AttachmentRecord) {
        FileSystem.remove("/var/run/wireguard/\(record.tunnel).sock")
        let directory = "/run/tunnelgate/net-\(record.netnsInode)"
        let leftovers: Set<String> = ["namespace", ".allocation.lock", "\(record.tunnel).lasterror", "\(record.tunnel).sock"]
        let entries = FileSystem.list(directory)
        guard !entries.isEmpty, entries.allSatisfy({ leftovers.contains($0) }) else { return }
        for entry in entries { FileSystem.remove("\(directory)/\(entry)") }
        FileSystem.removeDirectory(directory)
    }

    // MARK: CHECK

    func check(_ invocation: CNIInvocation, _ config: PluginConfiguration) throws(CNIError) {
        guard config.cniVersion.hasCheck else {
            throw CNIError(.incompatibleVersion, "CHECK is not part of CNI \(config.cniVersionText)", details: "it came with 0.4.0")
        }
        let netns = invocation.netns ?? ""
        let names = AttachmentName(network: config.network, containerID: invocation.containerID, ifname: invocation.ifname)
        let selection = try TunnelSelection.select(config, invocation)
        // A container that names no tunnel and has none is fine, and leaves no state directory behind.
        if selection == nil, !FileSystem.exists(PluginState.recordPathIn(config.stateDirectory, names.tunnel)) { return }
        let state = try PluginState(config.stateDirectory)
        guard let record = try state.record(names.tunnel),
              record.belongs(network: config.network, containerID: invocation.containerID, ifname: invocation.ifname) else {
            if selection == nil { return }
            throw CNIError(.tunnelUnhealthy, "the container has no tunnel", details: "no record of ADD in \(state.path)")
        }
        guard NamedNetworkNamespaces.inode(atPath: netns) == record.netnsInode else {
            throw CNIError(.tunnelUnhealthy, "CNI_NETNS \(netns) is not the namespace the tunnel was put in",
                           details: "ADD was for \(record.netns)")
        }
        guard NamedNetworkNamespaces.inode(atPath: NamedNetworkNamespaces.path(record.namespaceName)) == record.netnsInode else {
            throw CNIError(.tunnelUnhealthy, "the namespace's name \(record.namespaceName) is gone")
        }
        guard CNIResult.interfaces(of: config.prevResult, in: netns).contains(record.tunnel) else {
            throw CNIError(.tunnelUnhealthy, "prevResult does not list the tunnel's interface \(record.tunnel) in \(netns)")
        }
        let tunnelgate = try TunnelgateCommand(config.tunnelgate, scratch: state.scratchPath(names.tunnel))
        let lock = try state.lock(names.tunnel)
        defer { lock.release() }
        let report = try status(tunnelgate, record)
        if let pid = record.ownerPID, report.pid != pid {
            throw CNIError(.tunnelUnhealthy, "the tunnel's owner is not the one ADD started",
                           details: "pid \(pid) then, \(report.pid.map(String.init) ?? "none") now")
        }
        if let (reason, transient) = report.problem() {
            throw CNIError(transient ? .tryAgainLater : .tunnelUnhealthy, reason)
        }
    }
}

extension PluginState {
    /// NAME.record's path in `directory`, without creating or checking the directory.
    static func recordPathIn(_ directory: String, _ tunnel: String) -> String { "\(directory)/\(tunnel).record" }
}
