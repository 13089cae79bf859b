import DNSConfig
import Engine
import LinuxSystem
import Nftables
import PlaneProtocol
import RuntimeABI
import TunnelgateSettings

/// What a packet plane is loaded with: the message, the descriptors that go with it (a sealed copy of
/// the runtime's library; the built-in WireGuard's UDP sockets and wg(8)'s listening socket) and the
/// tail of secrets (in secure memory). All of it is kept for restarts and released when the session ends.
public struct PlanePackage {
    public var load: PlaneLoad
    public var descriptors: [FileDescriptor]
    public var secrets: SecureBytes?
    /// How long the runtime may take to become ready.
    public var startTimeout: Double
    /// The TUN carries a virtio_net_hdr for this runtime.
    public var tunOffloads: Bool
    /// Who the routing rules and the kill switch exempt to the carriers: `.planeUser` (the plane's own
    /// sockets; its uid is filled in), a mark the engine's `carrierSockets` get before start, or nil (no
    /// runtime: the slot's mark).
    public var carrierIdentity: CarrierIdentity?
    /// Sockets the engine made for the plane, marked with the carrier identity's mark before start.
    public var carrierSockets: [FileDescriptor]
    /// A socket file the engine made (wg(8)'s), removed when the session ends.
    public var socketPath: String?

    public init(load: PlaneLoad, descriptors: [FileDescriptor], secrets: SecureBytes?, startTimeout: Double, tunOffloads: Bool,
                carrierIdentity: CarrierIdentity?, carrierSockets: [FileDescriptor] = [], socketPath: String? = nil) {
        self.load = load
        self.descriptors = descriptors
        self.secrets = secrets
        self.startTimeout = startTimeout
        self.tunOffloads = tunOffloads
        self.carrierIdentity = carrierIdentity
        self.carrierSockets = carrierSockets
        self.socketPath = socketPath
    }

    /// Closes the engine's copies and removes the socket file (its listener is closed first, so no one
    /// is left connected to a name that is gone).
    public func release() {
        for fd in descriptors { fd.close() }
        if let socketPath { FileSystem.remove(socketPath) }
    }
}

/// When a plane that failed is started again.
public struct RestartPolicy: Sendable, Equatable {
    public enum Mode: String, Sendable { case never, onFailure = "on-failure" }
    public var mode: Mode
    /// Restarts in a row (without a plane that ran `healthySeconds`) before the tunnel fails.
    public var maximumAttempts: Int
    public var initialDelay: Double
    public var maximumDelay: Double
    /// A plane that ran this long resets the count.
    public var healthySeconds: Double

    public static let never = RestartPolicy(mode: .never, maximumAttempts: 0, initialDelay: 0, maximumDelay: 0, healthySeconds: 0)

    public init(mode: Mode, maximumAttempts: Int = 5, initialDelay: Double = 0.5, maximumDelay: Double = 30, healthySeconds: Double = 60) {
        self.mode = mode
        self.maximumAttempts = maximumAttempts
        self.initialDelay = initialDelay
        self.maximumDelay = maximumDelay
        self.healthySeconds = healthySeconds
    }

    /// The delay before attempt `n` (1-based): doubling from `initialDelay`, at most `maximumDelay`.
    public func delay(attempt n: Int) -> Double {
        min(maximumDelay, initialDelay * Double(1 << min(max(n - 1, 0), 20)))
    }
}

/// Where a session's settings come from.
public enum SessionSource {
    /// A configuration, applied by the caller before the runtime starts (`tunnelgate up`): the plane is
    /// loaded with `package`.
    case configuration(TunnelSettings, PlanePackage)
    /// A NetworkExtension provider, run in the plane, which sets the settings (and sets them again, or
    /// removes them) itself with setTunnelNetworkSettings.
    case provider(ProviderSource)
}

/// A provider host's plane: its own executable started again, and how its settings are read.
public struct ProviderSource {
    /// The TUN's name (the host's configuration), for messages before any settings.
    public var interfaceName: String
    /// The plane's command line (the host's own) and its environment beside the test hooks.
    public var arguments: [String]
    public var environment: [String]
    /// What the plane is told first: the manager's handoff, or none.
    public var handoff: JSONText?
    /// The secrets its protocol's references name, read by the engine (kept for the plane's restarts):
    /// the reference, and the secret in secure memory.
    public var secrets: [(reference: [UInt8], secret: SecureBytes)] = []
    /// How long startTunnel may take to complete, from the plane's start (iOS's 60 s): `.startTimedOut`.
    public var startTimeout: Double = 60
    /// includeAllNetworks (the kill switch): a start completed without settings fails instead of
    /// connecting, since there is nothing to keep traffic in the tunnel with.
    public var includeAllNetworks = false
    /// A provider's settings (as they crossed the channel) as the model, or why not.
    public var translate: (JSONText) -> Result<TunnelSettings, ProviderRefusal>

    public init(interfaceName: String, arguments: [String], environment: [String], handoff: JSONText?,
                translate: @escaping (JSONText) -> Result<TunnelSettings, ProviderRefusal>) {
        self.interfaceName = interfaceName
        self.arguments = arguments
        self.environment = environment
        self.handoff = handoff
        self.translate = translate
    }
}

/// Why a provider's settings were refused: the message its completion handler gets, and the
/// NETunnelProviderError code.
public struct ProviderRefusal: Error, Sendable, Equatable {
    public var message: String
    public var code: Int
    public init(_ message: String, code: Int) {
        self.message = message
        self.code = code
    }

    /// NETunnelProviderError's codes.
    public static let invalidCode = 1, failedCode = 3
}

/// One tunnel's session in the engine: the kernel state (Engine), its packet plane (the unprivileged
/// process that runs the runtime or the provider), the monitor, the control socket, and the
/// NEVPNStatus they make together. The lifecycle is a private state whose cases carry what is valid in
/// them; each step checks the state it starts from and refuses any other. `tunnelgate up` and a
/// NetworkExtension provider host both drive it.
///
/// ```
/// configuration:  idle ─prepare─▶ loaded ─apply─▶ applied ─start─▶ running ⇄ restarting
/// provider:       idle ─prepare─▶ loaded ─settings─▶ applied ─started─▶ running (settings again: the
///                                   ▲                                      │     difference, or a new TUN)
///                                   └──────────── settings removed ───────┘
/// either:         … ─▶ failedClosed (a kill switch held after a failure) ─▶ stopped; … ─stop─▶ stopped
/// ```
public final class TunnelSession {
    /// What the engine needs and keeps: netlink, nftables, the TUN and SO_MARK (NET_ADMIN), carrier ports
    /// below 1024 (NET_BIND_SERVICE), setns into an isolate namespace and the plane's mount namespace
    /// (SYS_ADMIN), the plane's uid, groups and bounding set (SETUID, SETGID, SETPCAP), signalling the
    /// plane's other uid (KILL), configurations and keys of the invoking user (DAC_OVERRIDE,
    /// DAC_READ_SEARCH), locked memory for keys (IPC_LOCK), and systemd-resolved's namespace
    /// (SYS_PTRACE, /proc/PID/ns/net of another user's process). Everything else goes at `up`.
    public static let engineCapabilities: Set<Capability> = [.netAdmin, .netBindService, .sysAdmin, .setuid, .setgid,
                                                             .setpcap, .kill, .dacOverride, .dacReadSearch, .ipcLock,
                                                             .sysPtrace]

    private enum State {
        case idle
        /// The plane runs (the runtime loaded, or the provider told its handoff); no settings applied.
        case loaded(PlaneProcess)
        /// The engine applied the settings (connecting): the runtime or startTunnel has not finished.
        case applied(PlaneProcess, ActiveTunnel)
        /// The runtime runs (connected or reasserting, the runtime's word and the carrier path).
        case running(PlaneProcess, ActiveTunnel, since: Double)
        /// The plane failed and is started again at `at` (reasserting; the TUN and kill switch stay).
        case restarting(ActiveTunnel, attempt: Int, at: Double, reason: String)
        /// The runtime failed under a kill switch, or repairs could not win: the plane is gone and the
        /// monitor keeps the switch (or a block-all table) in place until the tunnel is taken down.
        case failedClosed(ActiveTunnel, reason: String)
        case stopped
    }

    /// How a run of the loop ended.
    public enum End: Sendable, Equatable {
        case signal(Int32)
        case stopRequested
        case runtimeFailed(String)
        case failedClosed(String)
        /// The provider's startTunnel completed with this error (as on iOS: no stopTunnel follows).
        case startFailed(DisconnectError)
        /// The provider's startTunnel did not complete within `ProviderSource.startTimeout` (these
        /// seconds); unlike a failed start, the provider is asked to stop (iOS enters Stopping).
        case startTimedOut(seconds: Double)
        /// The provider called cancelTunnelWithError (nil: without an error).
        case cancelled(DisconnectError?)
        /// The isolate namespace went away (`namespaceWatch`): why.
        case namespaceGone(String)
        /// logind said the host is about to sleep (`sleepWatch`: a provider with disconnectOnSleep).
        case sleep
    }

    public let engine: Engine
    public let source: SessionSource
    /// The settings applied (a configuration's from the start; a provider's once it set them).
    public private(set) var settings: TunnelSettings?
    public let user: PlaneUser
    public let restart: RestartPolicy
    private let log: (String) -> Void
    private let planeLog: FileDescriptor?
    private var state = State.idle
    private var lastRuntime: RuntimeState?
    private var monitor: Monitor?
    private var control: ControlServer?
    /// Counters from the plane, with the engine's own (repairs) folded in.
    private var counters = PacketCounters()
    private var published: (PacketCounters, String?)?
    /// Plane restarts so far, and how many datagrams planes sent that were not messages.
    public private(set) var restarts = 0
    /// Restarts in a row: the attempt that started the running plane (0: the first plane). A plane that
    /// fails after `restart.healthySeconds` starts the count again.
    private var restartsInRow = 0
    public private(set) var garbage = 0
    /// A provider's startTunnel has completed (later settings start the tunnel running at once).
    private var providerStarted = false
    /// When a provider's startTunnel times out (its plane's start + startTimeout), until it completes.
    private var startDeadline: Double?
    /// A provider that runs with no settings applied (its start completed before it set any, or it
    /// removed them): the name held, connected, served on the control socket; nothing in the kernel.
    private var claim: TunnelClaim?
    /// The kill switch a provider's removed settings left, held by `claim` and kept as it was by the
    /// monitor (put back when others change or delete it) until settings come again or the stop.
    private var heldKillSwitch: NftTable?
    /// What the provider's plane was last told of the carrier path (defaultPath), nil before it was.
    private var pathSent: Bool?
    /// An end the loop returns at its next turn (one reached while an app message waited).
    private var pendingEnd: End?
    /// The service manager (systemd's Type=notify), told of every status change, pinged by the loop's
    /// watchdog and told when a stop begins; READY=1 is the caller's (`tunnelgate up`, once verified).
    public var notifier: ServiceNotifier?
    /// In isolate mode with `--netns`, what tells that the namespace went (its process exited, its file
    /// was removed): the loop ends with `.namespaceGone` then.
    public var namespaceWatch: NamespaceWatch?
    /// For a provider whose protocol has disconnectOnSleep: logind's PrepareForSleep; the loop ends
    /// with `.sleep` when the host is about to sleep. `sleepNote` says so (or why not) in the record.
    public var sleepWatch: SleepWatch?
    public var sleepNote: String?
    /// With a sleep watch: whether the tunnel stops when the host sleeps (disconnectOnSleep), or the
    /// provider is told (`sleep`, `wake`) and the tunnel stays.
    public var disconnectOnSleep = true
    private var asleep = false

    /// A session for a configuration (`tunnelgate up`).
    public convenience init(engine: Engine, settings: TunnelSettings, package: PlanePackage, user: PlaneUser,
                            restart: RestartPolicy = .never, planeLog: FileDescriptor? = nil, log: @escaping (String) -> Void) {
        self.init(engine: engine, source: .configuration(settings, package), user: user, restart: restart, planeLog: planeLog, log: log)
    }

    public init(engine: Engine, source: SessionSource, user: PlaneUser, restart: RestartPolicy = .never,
                planeLog: FileDescriptor? = nil, log: @escaping (String) -> Void) {
        self.engine = engine
        self.source = source
        if case .configuration(let s, _) = source { settings = s }
        self.user = user
        // A provider's state lives in its process: a failed provider is not started again (on iOS only
        // on-demand rules would start it anew).
        if case .provider = source { self.restart = .never } else { self.restart = restart }
        self.planeLog = planeLog
        self.log = log
    }

    private var package: PlanePackage? {
        if case .configuration(_, let p) = source { return p }
        return nil
    }

    private var provider: ProviderSource? {
        if case .provider(let p) = source { return p }
        return nil
    }

    /// The identity the packet plane's own sockets have: its user.
    public var carrierIdentity: CarrierIdentity { .user(user.uid) }

    public var tunnel: ActiveTunnel? {
        switch state {
        case .applied(_, let t), .running(_, let t, _), .restarting(let t, _, _, _), .failedClosed(let t, _): t
        default: nil
        }
    }

    private var plane: PlaneProcess? {
        switch state {
        case .loaded(let p), .applied(let p, _), .running(let p, _, _): p
        default: nil
        }
    }

    /// The session's NEVPNStatus.
    public var status: TunnelStatus {
        switch state {
        case .idle, .stopped, .failedClosed: .disconnected
        case .loaded: providerStarted && claim?.isHeld == true ? .connected : .connecting
        case .applied: .connecting
        case .restarting: .reasserting
        case .running:
            CarrierPath.tunnelStatus(runtime: lastRuntime?.tunnelStatus ?? .connected, carrierPathGone: monitor?.carrierPathGone ?? false)
        }
    }

    // MARK: - Steps

    /// Starts the packet plane before the kernel is touched: loads the runtime in it, or tells the
    /// provider's plane its handoff (then `run`, which applies what the provider sets).
    public func prepare() throws(SessionError) {
        guard case .idle = state else { throw SessionError("prepare: the session is not idle") }
        state = .loaded(try spawnAndLoad())
        if let provider { startDeadline = ProcessControl.monotonicSeconds() + provider.startTimeout }
    }

    /// The provider's first message: its handoff, and its secrets as the tail (one buffer in secure
    /// memory, wiped when sent).
    private func sendProvider(_ provider: ProviderSource, to plane: PlaneProcess) throws(SessionError) {
        let parts = provider.secrets.map { ProviderSecret(reference: $0.reference, count: $0.secret.count) }
        let total = parts.reduce(0) { $0 + $1.count }
        guard total > 0 else {
            try plane.send(.provider(handoff: provider.handoff, secrets: []))
            return
        }
        let tail: SecureBytes
        do throws(SystemCallError) { tail = try SecureBytes(count: total) } catch {
            throw SessionError("no secure memory for the provider's secrets: \(error)")
        }
        defer { tail.wipe() }
        tail.withUnsafeMutableBytes { out in
            var offset = 0
            for entry in provider.secrets {
                entry.secret.withUnsafeBytes { bytes in
                    UnsafeMutableRawBufferPointer(rebasing: out[offset..<(offset + bytes.count)]).copyMemory(from: bytes)
                }
                offset += entry.secret.count
            }
        }
        var failure: SessionError?
        tail.withUnsafeBytes { raw in
            do throws(SessionError) { try plane.send(.provider(handoff: provider.handoff, secrets: parts), tail: raw) } catch { failure = error }
        }
        if let failure { throw failure }
    }

    private func spawnAndLoad() throws(SessionError) -> PlaneProcess {
        if let provider {
            pathSent = nil  // a new plane is told the carrier path again
            // A provider's plane is the provider host's own executable (/proc/self/exe), run as a plane.
            let own: FileDescriptor
            do { own = try FileDescriptor.openExecutable() } catch {
                throw SessionError("cannot open the provider host's own executable: \(error)")
            }
            defer { own.close() }
            let plane = try PlaneProcess.spawn(user: user, log: planeLog, arguments: provider.arguments,
                                               executable: own, environment: provider.environment)
            do throws(SessionError) { try sendProvider(provider, to: plane) } catch {
                plane.kill()
                throw error
            }
            return plane
        }
        guard let package else { throw SessionError("no package") }
        let plane = try PlaneProcess.spawn(user: user, log: planeLog)
        if !plane.mountNamespace {
            log("the packet plane runs without its mount namespace (\(PlaneProcess.mountNamespaceVariable)=off): it sees the "
                + "file system as the engine does, limited by its uid's permissions, and the engine's files are not hidden")
        }
        do throws(SessionError) {
            if let secrets = package.secrets {
                var failure: SessionError?
                secrets.withUnsafeBytes { raw in
                    do throws(SessionError) { try plane.load(package.load, descriptors: package.descriptors, tail: raw) } catch { failure = error }
                }
                if let failure { throw failure }
            } else {
                try plane.load(package.load, descriptors: package.descriptors, tail: nil)
            }
        } catch {
            plane.kill()
            throw error
        }
        return plane
    }

    /// Applies the configuration (Engine.up) with the plane's identity as the carrier exemption.
    public func apply(configPath: String?, resolver: some HostResolver) throws(EngineError) {
        guard case .loaded(let plane) = state, let settings, let package else {
            throw EngineError.verification(["apply: the session has no loaded packet plane for a configuration"], rolledBack: false)
        }
        let identity: CarrierIdentity? = if case .planeUser? = package.carrierIdentity { carrierIdentity } else { package.carrierIdentity }
        do {
            let tunnel = try engine.up(settings, resolver: resolver, configPath: configPath, awaitingRuntime: true,
                                       tunOffloads: package.tunOffloads, carrierIdentity: identity)
            state = .applied(plane, tunnel)
        } catch {
            plane.kill()
            state = .stopped
            throw error
        }
    }

    /// Hands the TUN to the plane and waits for the runtime to be ready (or reconnecting with an
    /// interface: the tunnel starts reasserting).
    public func start() throws(SessionError) {
        guard case .applied(let plane, let tunnel) = state, package != nil else { throw SessionError("start: the settings are not applied") }
        do throws(SessionError) {
            let ready = try startRuntime(plane, tunnel)
            lastRuntime = ready
            state = .running(plane, tunnel, since: ProcessControl.monotonicSeconds())
            tunnel.publish(planePID: plane.process.pid, planeUser: user.uid, mountNamespace: plane.mountNamespace)
            tunnel.publish(status: status, runtimeStatus: ready.json)
        } catch {
            plane.kill()
            state = .applied(plane, tunnel)
            throw error
        }
    }

    private func startRuntime(_ plane: PlaneProcess, _ tunnel: ActiveTunnel) throws(SessionError) -> RuntimeState {
        guard let package else { throw SessionError("no package") }
        // The engine's carrier sockets carry the identity's mark before the runtime sends a datagram
        // (the plane may not set one: SO_MARK needs CAP_NET_ADMIN).
        if let mark = tunnel.plan.runtimeContext.carrierMark {
            for socket in package.carrierSockets {
                do throws(SystemCallError) { try socket.setMark(mark) } catch {
                    throw SessionError("marking the carrier socket with fwmark 0x\(String(mark, radix: 16)): \(error)")
                }
            }
        } else if !package.carrierSockets.isEmpty {
            throw SessionError("the carrier sockets have no mark to carry (the plan's carrier identity is \(tunnel.plan.carrierIdentity.summary))")
        }
        let start = PlaneStart(context: tunnel.plan.runtimeContext, tunOffloads: package.tunOffloads, descriptors: [.tun])
        try plane.start(start, descriptors: [tunnel.tun.descriptor])
        if package.load.runtime == .none {
            // Nothing to wait for: the plane reads and counts.
            return RuntimeState(phase: .ready, interface: tunnel.plan.interfaceName, json: #"{"state":"ready"}"#)
        }
        return try plane.waitUntilReady(timeout: package.startTimeout)
    }

    /// The control socket (status, stop, message) and the monitor. Without the socket `up` fails.
    public func serve() throws(SessionError) {
        guard let tunnel else { throw SessionError("serve: no tunnel") }
        try serveControl(tunnel.plan.interfaceName)
        monitor = try? engine.makeMonitor()
        if monitor == nil { log("warning: cannot watch for outside changes; they will not be repaired") }
    }

    /// The control socket of `name` (kept when there is one: a claim's, when its settings arrive).
    private func serveControl(_ name: String) throws(SessionError) {
        guard control == nil else { return }
        do { control = try ControlServer(gateway: engine, name: name) } catch {
            throw SessionError("cannot create the control socket \(engine.state.controlPath(name)): \(error)")
        }
    }

    /// A provider with no settings holds its name (`claim`): connected (connecting while its start
    /// has not completed), with nothing applied but a kill switch it kept.
    private func claimWithoutSettings(_ name: String, plane: PlaneProcess) {
        if let claim, claim.isHeld {
            claim.publish(status: status)
            return
        }
        do throws(EngineError) {
            let held = try engine.claim(name, status: providerStarted ? .connected : .connecting)
            held.publish(planePID: plane.process.pid, planeUser: user.uid, mountNamespace: plane.mountNamespace)
            claim = held
            do throws(SessionError) { try serveControl(name) } catch { log("\(error)") }
        } catch {
            log("cannot hold \(name) while the provider has no settings: \(error)")
        }
    }

    /// The summary line `up` prints.
    public var summary: String {
        guard let tunnel else { return settings?.name ?? provider?.interfaceName ?? "" }
        var runtime = ""
        switch state {
        case .running(let p, _, _), .applied(let p, _), .loaded(let p): runtime = p.runtimeSummary.map { ", \($0)" } ?? ""
        default: break
        }
        return "\(tunnel.plan.interfaceName): \(status.rawValue) (table \(tunnel.plan.slot.table), "
            + "\(tunnel.plan.routes(interfaceIndex: nil).count) routes, \(tunnel.plan.rules.count) rules, "
            + "packet plane uid \(user.uid)\(runtime))"
    }

    /// The service manager's STATUS= line: the summary, and why when the tunnel is reasserting after a
    /// plane failure or failed closed.
    public var statusLine: String {
        switch state {
        case .restarting(_, let attempt, _, let reason): "\(summary); restarting the packet plane (attempt \(attempt)) after: \(reason)"
        case .failedClosed(_, let reason): "\(summary); \(reason); the kill switch stays until `tunnelgate down`"
        default: summary
        }
    }

    /// The notifier's share of a turn of the loop: STATUS= when the status changed, WATCHDOG=1 when due.
    private func notifyTurn(now: Double) {
        guard let notifier else { return }
        notifier.status(statusLine)
        notifier.watchdogIfDue(now: now)
    }

    // MARK: - The loop

    /// Runs until a termination signal, `stop` on the control socket, the runtime's failure (after the
    /// restart policy gave up, and without a kill switch to hold), failing closed, or a provider's end
    /// (its failed start, its cancel).
    public func run(signals: FileDescriptor) -> End {
        var nextPublish = ProcessControl.monotonicSeconds() + 1
        // Gone before the loop began (an inotify event is not repeated; a pidfd stays readable).
        if let why = namespaceWatch?.gone() { publish(force: true); return .namespaceGone(why) }
        while true {
            if let end = pendingEnd { pendingEnd = nil; return end }
            let now = ProcessControl.monotonicSeconds()
            notifyTurn(now: now)
            var set = PollSet()
            set.add(signals, .readable)
            let controlIndex = control.map { set.add(FileDescriptor(rawValue: $0.descriptor), .readable) }
            let monitorStart = set.count
            for fd in monitor?.descriptors ?? [] { set.add(FileDescriptor(rawValue: fd), .readable) }
            let monitorEnd = set.count
            for fd in plane?.descriptors ?? [] { set.add(fd, .readable) }
            let namespaceIndex = namespaceWatch.map { set.add($0.descriptor, .readable) }
            let sleepIndex = sleepWatch.map { set.add($0.descriptor, .readable) }
            var timeout = nextPublish - now
            if let monitor, monitor.timeoutMilliseconds() >= 0 { timeout = min(timeout, Double(monitor.timeoutMilliseconds()) / 1000) }
            if case .restarting(_, _, let at, _) = state { timeout = min(timeout, at - now) }
            if let plane { timeout = min(timeout, plane.lastHeard + PlaneProcess.silenceLimit - now) }
            if let due = notifier?.secondsUntilWatchdog(now: now) { timeout = min(timeout, due) }
            if let startDeadline { timeout = min(timeout, startDeadline - now) }
            _ = try? set.wait(timeoutMilliseconds: Int32(max(0, min(timeout, 1)) * 1000))

            if set.events(at: 0).contains(.readable) {
                let signal = TerminationSignals.read(signals)
                if signal != 0 { publish(force: true); return .signal(signal) }
            }
            if let controlIndex, set.events(at: controlIndex) != [] {
                if control?.serve(message: { [self] bytes in appMessage(bytes) }) == .stop {
                    publish(force: true)
                    return .stopRequested
                }
            }
            if let end = pendingEnd { pendingEnd = nil; return end }
            if let namespaceIndex, set.events(at: namespaceIndex) != [], let why = namespaceWatch?.gone() {
                publish(force: true)
                return .namespaceGone(why)
            }
            if let sleepIndex, set.events(at: sleepIndex) != [], let watch = sleepWatch {
                do throws(SystemBusError) {
                    for sleeping in try watch.next() {
                        if !sleeping { log("the host woke (logind's PrepareForSleep(false))") }
                        if sleeping && disconnectOnSleep {
                            log("the host is about to sleep (logind's PrepareForSleep): stopping the tunnel (disconnectOnSleep)")
                            publish(force: true)
                            return .sleep
                        }
                        // The provider is told once per sleep and once per wake after it.
                        guard !disconnectOnSleep, sleeping != asleep, let plane else { continue }
                        asleep = sleeping
                        if sleeping { log("the host is about to sleep (logind's PrepareForSleep): telling the provider") }
                        try? plane.send(.sleep(sleeping))
                    }
                } catch {
                    log("disconnectOnSleep: no longer followed: \(error)")
                    sleepWatch = nil
                    sleepNote = "not followed: the system bus went away (\(error))"
                    tunnel?.publish(disconnectOnSleep: sleepNote)
                }
            }
            if let end = watchPlane() {
                guard case .runtimeFailed(let reason) = end, let tunnel, tunnel.plan.hasKillSwitch else { return end }
                // The engine outlives its plane: under a kill switch it stays, keeps the switch repaired and
                // answers `status` (disconnected, with why) until `down`, SIGTERM or `stop`.
                failClosed(tunnel, reason: "the runtime failed: \(reason)")
                log("the runtime failed: \(reason); the kill switch stays in place until `tunnelgate down \(tunnel.plan.interfaceName)`")
            }
            // After the plane's messages: a completion that arrived with the deadline is a completion.
            if let startDeadline, ProcessControl.monotonicSeconds() >= startDeadline, let provider {
                publish(force: true)
                return .startTimedOut(seconds: provider.startTimeout)
            }
            if let monitor, tunnel == nil, let heldKillSwitch {
                if (monitorStart..<monitorEnd).contains(where: { set.events(at: $0) != [] }) { monitor.notificationsArrived() }
                let pass = monitor.runDueKillSwitchCheck(heldKillSwitch)
                if !pass.repaired.isEmpty { log("repaired the kill switch after an outside change: \(pass.repaired.joined(separator: "; "))") }
                for line in pass.problems { log(line) }
            }
            if let monitor, let tunnel {
                if (monitorStart..<monitorEnd).contains(where: { set.events(at: $0) != [] }) { monitor.notificationsArrived() }
                let pass = monitor.runDueCheck(tunnel: tunnel)
                if !pass.repaired.isEmpty { log("repaired after an outside change: \(pass.repaired.joined(separator: "; "))") }
                for line in pass.problems { log(line) }
                if !pass.isEmpty { publish(force: true) }
                if pass.failedClosed, !isFailedClosed {
                    // The plane stops; this loop only keeps the block-all table (the monitor) until SIGTERM,
                    // `down` or `stop`.
                    plane?.stop(timeout: 2)
                    let reason = monitor.failedClosed ?? "repairs cannot win"
                    failClosed(tunnel, reason: "failed closed: \(reason)")
                    log("failed closed: \(reason); nothing leaves until `tunnelgate down \(tunnel.plan.interfaceName)`")
                }
                let carrier = isFailedClosed ? [] : monitor.runDueCarrierCheck(tunnel: tunnel)
                if !carrier.isEmpty {
                    for line in carrier { log(line) }
                    if status != tunnel.record.status { tunnel.publish(status: status) }
                }
                // A provider's defaultPath follows the carrier path (NWPath .satisfied / .unsatisfied).
                if provider != nil, !isFailedClosed, let plane, pathSent != !monitor.carrierPathGone {
                    let satisfied = !monitor.carrierPathGone
                    if (try? plane.send(.path(satisfied: satisfied))) != nil { pathSent = satisfied }
                }
            }
            if ProcessControl.monotonicSeconds() >= nextPublish {
                nextPublish = ProcessControl.monotonicSeconds() + 1
                publish(force: false)
            }
        }
    }

    /// The plane is gone and the tunnel's kernel state stays, disconnected, with `reason` recorded.
    private func failClosed(_ tunnel: ActiveTunnel, reason: String) {
        plane?.kill()
        state = .failedClosed(tunnel, reason: reason)
        tunnel.publish(planePID: nil, planeUser: nil)
        tunnel.publish(status: .disconnected)
        engine.recordDisconnect(tunnel.plan.interfaceName, message: reason)
    }

    /// True once the session failed closed.
    public var isFailedClosed: Bool {
        if case .failedClosed = state { return true }
        return false
    }

    /// The plane's events; restarts; an end when the runtime cannot go on.
    private func watchPlane() -> End? {
        if case .restarting(let tunnel, let attempt, let at, let reason) = state {
            guard ProcessControl.monotonicSeconds() >= at else { return nil }
            return restartPlane(tunnel, attempt: attempt, reason: reason)
        }
        guard let plane else { return nil }
        var trouble: String?
        for event in plane.drain() {
            switch handle(event, of: plane) {
            case .none: continue
            case .trouble(let reason): trouble = trouble ?? reason
            case .end(let end): return end
            }
        }
        if trouble == nil, plane.garbage > PlaneProcess.garbageLimit {
            trouble = "the packet plane flooded or garbled its channel (\(plane.garbage) bad datagrams)"
        }
        if trouble == nil, ProcessControl.monotonicSeconds() - plane.lastHeard > PlaneProcess.silenceLimit {
            trouble = "the packet plane said nothing for \(Int(PlaneProcess.silenceLimit)) s (hung)"
        }
        guard let reason = trouble else { return nil }
        return planeFailed(plane, reason: reason)
    }

    private enum Outcome { case none, trouble(String), end(End) }

    /// One event of the plane's: what it means for the session.
    private func handle(_ event: PlaneProcess.Event, of plane: PlaneProcess) -> Outcome {
        switch event {
        case .report(let r):
            let s = r.runtimeState
            let changed = s.phase != lastRuntime?.phase || s.interface != lastRuntime?.interface
            lastRuntime = s
            fold(r.counters)
            if changed, let tunnel {
                if provider == nil { log("runtime: \(s.phase.rawValue)\(s.error.map { ": \($0)" } ?? "")") }
                tunnel.publish(status: status, runtimeStatus: s.json)
            }
            return .none
        case .failed(let reason):
            return .trouble(reason)
        case .exited(let waitStatus):
            return .trouble(plane.failure ?? "the packet plane \(SandboxedProcess.describe(status: waitStatus))")
        case .garbage(let why):
            garbage += 1
            log("the packet plane sent garbage: \(why)")
            if plane.garbage > PlaneProcess.garbageLimit { return .trouble("the packet plane flooded or garbled its channel (\(plane.garbage) bad datagrams)") }
            return .none
        case .provider(let message, let fds):
            guard provider != nil else {
                for fd in fds { fd.close() }
                garbage += 1
                return .none
            }
            return providerMessage(message, fds, plane)
        case .loaded, .reply:
            return .none
        }
    }

    /// The plane failed: restarted under the policy, or the runtime has failed.
    private func planeFailed(_ plane: PlaneProcess, reason: String) -> End? {
        plane.kill()
        log("the \(provider == nil ? "runtime" : "provider") failed: \(reason)")
        guard let tunnel else {
            state = .stopped
            return .runtimeFailed(reason)
        }
        tunnel.publish(planePID: nil, planeUser: user.uid)
        var since = ProcessControl.monotonicSeconds()
        if case .running(_, _, let s) = state { since = s }
        let healthy = ProcessControl.monotonicSeconds() - since >= restart.healthySeconds
        return scheduleRestart(tunnel, attempt: healthy ? 1 : restartsInRow + 1, reason: reason)
    }

    private func restartPlane(_ tunnel: ActiveTunnel, attempt: Int, reason: String) -> End? {
        do throws(SessionError) {
            let plane = try spawnAndLoad()
            do throws(SessionError) {
                let ready = try startRuntime(plane, tunnel)
                lastRuntime = ready
            } catch {
                plane.kill()
                throw error
            }
            state = .running(plane, tunnel, since: ProcessControl.monotonicSeconds())
            tunnel.publish(planePID: plane.process.pid, planeUser: user.uid, mountNamespace: plane.mountNamespace)
            restarts += 1
            restartsInRow = attempt
            log("packet plane restarted (attempt \(attempt)) after: \(reason)")
            tunnel.publish(status: status, runtimeStatus: lastRuntime?.json)
            return nil
        } catch {
            log("restart \(attempt) failed: \(error)")
            return scheduleRestart(tunnel, attempt: attempt + 1, reason: "\(reason); restart: \(error)")
        }
    }

    private func scheduleRestart(_ tunnel: ActiveTunnel, attempt: Int, reason: String) -> End? {
        guard restart.mode == .onFailure, attempt <= restart.maximumAttempts else {
            state = .restarting(tunnel, attempt: attempt, at: .infinity, reason: reason)
            return .runtimeFailed(reason)
        }
        let delay = restart.delay(attempt: attempt)
        state = .restarting(tunnel, attempt: attempt, at: ProcessControl.monotonicSeconds() + delay, reason: reason)
        tunnel.publish(status: .reasserting)
        log("restarting the packet plane in \(delay) s (attempt \(attempt) of \(restart.maximumAttempts))")
        return nil
    }

    /// An app message (`tunnelgate message`, sendProviderMessage) and its answer. What the plane sends
    /// meanwhile is handled as it arrives: a provider may set settings or cancel while it answers.
    private func appMessage(_ bytes: [UInt8]) -> Result<[UInt8], ControlFailure> {
        guard let plane, !isFailedClosed else { return .failure(ControlFailure("the \(provider == nil ? "runtime" : "provider") is not running")) }
        var trouble: String?
        let answer = plane.message(bytes) { [self] event in
            switch handle(event, of: plane) {
            case .none: return true
            case .trouble(let reason): trouble = trouble ?? reason; return false
            case .end(let end): pendingEnd = end; return false
            }
        }
        if let trouble, pendingEnd == nil {
            pendingEnd = planeFailed(plane, reason: trouble)
            if pendingEnd == .runtimeFailed(trouble), let tunnel, tunnel.plan.hasKillSwitch {
                pendingEnd = nil
                failClosed(tunnel, reason: "the runtime failed: \(trouble)")
            }
        }
        return answer
    }

    // MARK: - A provider's requests

    private func providerMessage(_ message: PlaneMessage, _ fds: [FileDescriptor], _ plane: PlaneProcess) -> Outcome {
        for fd in fds { fd.close() }
        switch message {
        case .apply(let id, let json):
            let (error, code, tun) = applyProviderSettings(json, plane)
            do throws(SessionError) {
                try plane.send(.applied(id: id, error: error, code: code), descriptors: tun.map { [$0] } ?? [])
            } catch {
                return .trouble("\(error)")
            }
            return .none
        case .started(let error?):
            log("startTunnel failed: \(error.message)")
            return .end(.startFailed(DisconnectError(message: error.message, domain: error.domain, code: error.code)))
        case .started(nil):
            providerStarted = true
            startDeadline = nil
            if case .applied(let p, let t) = state { state = .running(p, t, since: ProcessControl.monotonicSeconds()) }
            if tunnel == nil, let provider {
                let name = provider.interfaceName
                if provider.includeAllNetworks, claim == nil {
                    // Connected would promise what nothing enforces: no settings, so no kill switch.
                    let message = "startTunnel completed without network settings, and includeAllNetworks needs them: "
                        + "nothing would keep traffic inside the tunnel"
                    log(message)
                    return .end(.startFailed(DisconnectError(message: message, domain: "TunnelgateErrorDomain", code: 1)))
                }
                // As iOS takes the completion: ready to handle network data, whatever was set before it.
                claimWithoutSettings(name, plane: plane)
                log("startTunnel completed without network settings: \(status.rawValue), nothing applied (the tunnel routes nothing)")
                return .none
            }
            tunnel?.publish(status: status)
            log("startTunnel completed: \(status == .reasserting ? "reasserting" : status.rawValue)")
            return .none
        case .cancel(let error):
            log("the provider cancelled the tunnel\(error.map { ": \($0.message)" } ?? "")")
            return .end(.cancelled(error.map { DisconnectError(message: $0.message, domain: $0.domain, code: $0.code) }))
        default:
            garbage += 1
            return .none
        }
    }

    /// A provider's settings (nil removes them): nil and, when a TUN was made, its descriptor; or an
    /// error and its code. Applied as on iOS: the first time Engine.up, later only the difference
    /// (the TUN and packetFlow stay) or, when that cannot be, the new settings replace the old (a kill
    /// switch is replaced in one transaction, never lifted between).
    private func applyProviderSettings(_ json: JSONText?, _ plane: PlaneProcess) -> (String?, Int?, FileDescriptor?) {
        guard let provider else { return ("not a provider", ProviderRefusal.failedCode, nil) }
        let name = provider.interfaceName
        if isFailedClosed || monitor?.failedClosed != nil, json != nil {
            return ("the tunnel failed closed; stop it (`tunnelgate down \(name)`) first", ProviderRefusal.failedCode, nil)
        }
        var wanted: TunnelSettings?
        if let json {
            switch provider.translate(json) {
            case .success(let s): wanted = s
            case .failure(let refusal): return (refusal.message, refusal.code, nil)
            }
        }
        do throws(EngineError) {
            if let current = tunnel, let wanted, try engine.reapply(current, wanted, resolver: SystemResolver()) {
                settings = wanted
                if status != current.record.status { current.publish(status: status) }
                return (nil, nil, nil)
            }
            var keptKillSwitch = false
            if let current = tunnel {
                // The control socket stays (the same name's, served by this session throughout: it may be
                // answering the very app message that brought these settings).
                monitor = nil
                state = .loaded(plane)
                // A kill switch stays, also when the settings go: the claim below holds it (fail-closed).
                keptKillSwitch = current.plan.hasKillSwitch
                try current.stop(keepFirewall: keptKillSwitch)
                if keptKillSwitch { heldKillSwitch = current.plan.firewall }
            }
            guard let wanted else {
                settings = nil
                // Without settings a running provider stays connected, holding its name (and a kill switch).
                if providerStarted || keptKillSwitch { claimWithoutSettings(name, plane: plane) }
                if heldKillSwitch != nil {
                    // The kill switch is watched and repaired while the claim holds it, as a tunnel's is.
                    monitor = try? engine.makeMonitor()
                    if monitor == nil { log("warning: cannot watch the kill switch for outside changes; they will not be repaired") }
                    monitor?.checkNow()
                }
                return (nil, nil, nil)
            }
            // A provider's own connections bypass its tunnel to every destination, as on iOS.
            let tunnel = try engine.up(wanted, resolver: SystemResolver(), configPath: nil, awaitingRuntime: !providerStarted,
                                       carrierIdentity: .userAnywhere(user.uid), claim: claim)
            // Engine.up replaced the held kill switch in one transaction (never lifted between); had it
            // failed, the claim would still hold it, and the monitor would still keep it.
            heldKillSwitch = nil
            monitor = nil
            claim = nil
            settings = wanted
            state = providerStarted ? .running(plane, tunnel, since: ProcessControl.monotonicSeconds()) : .applied(plane, tunnel)
            tunnel.publish(planePID: plane.process.pid, planeUser: user.uid, mountNamespace: plane.mountNamespace)
            tunnel.publish(status: status)
            if let sleepNote { tunnel.publish(disconnectOnSleep: sleepNote) }
            do throws(SessionError) { try serve() } catch { log("\(error)") }
            return (nil, nil, tunnel.tun.descriptor)
        } catch {
            return (error.description, ProviderRefusal.failedCode, nil)
        }
    }

    private func fold(_ planeCounters: PacketCounters) {
        var c = planeCounters
        c.repairs = UInt64(monitor?.repairs ?? 0)
        c.lastRepair = monitor?.lastRepair
        c.failedClosed = monitor?.failedClosed
        counters = c
    }

    private func publish(force: Bool) {
        guard let tunnel else { return }
        fold(counters)
        let json = lastRuntime?.json
        if !force, let published, published.0 == counters, published.1 == json { return }
        published = (counters, json)
        tunnel.publish(counters: counters, runtimeStatus: json)
    }

    // MARK: - Stopping

    /// Stops the plane (the runtime's stop, or the provider's stopTunnel with `reason`, once) and removes
    /// everything; with `keepKillSwitch` a kill switch stays, as after a crash, until `down`. Returns
    /// what to add to an error message.
    @discardableResult
    public func stop(keepKillSwitch: Bool = false, providerReason: Int = 1) throws(EngineError) -> String {
        let tunnel = self.tunnel
        tunnel?.publish(status: .disconnecting)
        claim?.publish(status: .disconnecting)
        notifier?.stopping(status: "\(tunnel?.plan.interfaceName ?? settings?.name ?? provider?.interfaceName ?? ""): disconnecting")
        if let plane {
            if provider != nil, plane.exitStatus == nil {
                try? plane.send(.stopTunnel(reason: providerReason))
                if plane.stop(timeout: 25) == nil { log("the provider did not stop within 25 s; removing the settings anyway") }
            } else {
                plane.stop()
            }
        }
        state = .stopped
        control = nil
        monitor = nil
        heldKillSwitch = nil
        claim?.release(keepingKillSwitch: keepKillSwitch)
        claim = nil
        releasePackage()
        guard let tunnel else { return "" }
        if keepKillSwitch && tunnel.plan.hasKillSwitch { return tunnel.stopFailed() }
        try tunnel.stop()
        return ""
    }

    private var released = false

    /// The plane's user and the package's descriptors and socket file, once.
    private func releasePackage() {
        user.release()
        guard !released else { return }
        released = true
        package?.release()
    }

    /// The plane's pid while it runs.
    public var planePID: Int32? { plane?.process.pid }
}
