import Engine
import LinuxSystem
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

/// One tunnel's session in the engine: the kernel state (Engine), its packet plane (the unprivileged
/// process that runs the runtime), the monitor, the control socket, and the NEVPNStatus they make
/// together. The lifecycle is a private state whose cases carry what is valid in them; each step
/// checks the state it starts from and refuses any other.
///
/// ```
/// idle ─prepare─▶ loaded ─apply─▶ applied ─start─▶ running ⇄ restarting ─▶ stopped
///                   │ (kernel untouched)     │            │
///                   └──────── stop ──────────┴──── stop ──┴──▶ stopped
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
        /// The plane runs and has loaded the runtime; the kernel is untouched.
        case loaded(PlaneProcess)
        /// The engine applied the settings (connecting).
        case applied(PlaneProcess, ActiveTunnel)
        /// The runtime runs (connected or reasserting, the runtime's word and the carrier path).
        case running(PlaneProcess, ActiveTunnel, since: Double)
        /// The plane failed and is started again at `at` (reasserting; the TUN and kill switch stay).
        case restarting(ActiveTunnel, attempt: Int, at: Double, reason: String)
        /// Repairs could not win: the runtime is stopped and the monitor keeps a block-all table in place
        /// until the tunnel is taken down (disconnected).
        case failedClosed(ActiveTunnel, reason: String)
        case stopped
    }

    /// How a run of the loop ended.
    public enum End: Sendable, Equatable {
        case signal(Int32)
        case stopRequested
        case runtimeFailed(String)
        case failedClosed(String)
    }

    public let engine: Engine
    public let settings: TunnelSettings
    public let package: PlanePackage
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

    public init(engine: Engine, settings: TunnelSettings, package: PlanePackage, user: PlaneUser,
                restart: RestartPolicy = .never, planeLog: FileDescriptor? = nil, log: @escaping (String) -> Void) {
        self.engine = engine
        self.settings = settings
        self.package = package
        self.user = user
        self.restart = restart
        self.planeLog = planeLog
        self.log = log
    }

    /// The identity the packet plane's own sockets have: its user.
    public var carrierIdentity: CarrierIdentity { .user(user.uid) }

    public var tunnel: ActiveTunnel? {
        switch state {
        case .applied(_, let t), .running(_, let t, _), .restarting(let t, _, _, _), .failedClosed(let t, _): t
        default: nil
        }
    }

    /// The session's NEVPNStatus.
    public var status: TunnelStatus {
        switch state {
        case .idle, .stopped, .failedClosed: .disconnected
        case .loaded, .applied: .connecting
        case .restarting: .reasserting
        case .running:
            CarrierPath.tunnelStatus(runtime: lastRuntime?.tunnelStatus ?? .connected, carrierPathGone: monitor?.carrierPathGone ?? false)
        }
    }

    // MARK: - Steps

    /// Starts the packet plane and loads the runtime in it, before the kernel is touched.
    public func prepare() throws(SessionError) {
        guard case .idle = state else { throw SessionError("prepare: the session is not idle") }
        state = .loaded(try spawnAndLoad())
    }

    private func spawnAndLoad() throws(SessionError) -> PlaneProcess {
        let plane = try PlaneProcess.spawn(user: user, log: planeLog)
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

    /// Applies the settings (Engine.up) with the plane's identity as the carrier exemption.
    public func apply(configPath: String?, resolver: some HostResolver) throws(EngineError) {
        guard case .loaded(let plane) = state else {
            throw EngineError.verification(["apply: the session has no loaded packet plane"], rolledBack: false)
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
        guard case .applied(let plane, let tunnel) = state else { throw SessionError("start: the settings are not applied") }
        do throws(SessionError) {
            let ready = try startRuntime(plane, tunnel)
            lastRuntime = ready
            state = .running(plane, tunnel, since: ProcessControl.monotonicSeconds())
            tunnel.publish(planePID: plane.process.pid, planeUser: user.uid)
            tunnel.publish(status: status, runtimeStatus: ready.json)
        } catch {
            plane.kill()
            state = .applied(plane, tunnel)
            throw error
        }
    }

    private func startRuntime(_ plane: PlaneProcess, _ tunnel: ActiveTunnel) throws(SessionError) -> RuntimeState {
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
        let name = tunnel.plan.interfaceName
        do { control = try ControlServer(gateway: engine, name: name) } catch {
            throw SessionError("cannot create the control socket \(engine.state.controlPath(name)): \(error)")
        }
        monitor = try? engine.makeMonitor()
        if monitor == nil { log("warning: cannot watch for outside changes; they will not be repaired") }
    }

    /// The summary line `up` prints.
    public var summary: String {
        guard let tunnel else { return settings.name }
        var runtime = ""
        switch state {
        case .running(let p, _, _), .applied(let p, _), .loaded(let p): runtime = p.runtimeSummary.map { ", \($0)" } ?? ""
        default: break
        }
        return "\(tunnel.plan.interfaceName): \(status.rawValue) (table \(tunnel.plan.slot.table), "
            + "\(tunnel.plan.routes(interfaceIndex: nil).count) routes, \(tunnel.plan.rules.count) rules, "
            + "packet plane uid \(user.uid)\(runtime))"
    }

    // MARK: - The loop

    /// Runs until a termination signal, `stop` on the control socket, the runtime's failure (after the
    /// restart policy gave up), or failing closed.
    public func run(signals: FileDescriptor) -> End {
        var nextPublish = ProcessControl.monotonicSeconds() + 1
        while true {
            let now = ProcessControl.monotonicSeconds()
            var set = PollSet()
            set.add(signals, .readable)
            let controlIndex = control.map { set.add(FileDescriptor(rawValue: $0.descriptor), .readable) }
            let monitorStart = set.count
            for fd in monitor?.descriptors ?? [] { set.add(FileDescriptor(rawValue: fd), .readable) }
            let monitorEnd = set.count
            var planeIndexes: [Int] = []
            if case .running(let plane, _, _) = state { planeIndexes = plane.descriptors.map { set.add($0, .readable) } }
            var timeout = nextPublish - now
            if let monitor, monitor.timeoutMilliseconds() >= 0 { timeout = min(timeout, Double(monitor.timeoutMilliseconds()) / 1000) }
            if case .restarting(_, _, let at, _) = state { timeout = min(timeout, at - now) }
            if case .running(let plane, _, _) = state {
                timeout = min(timeout, plane.lastHeard + PlaneProcess.silenceLimit - now)
            }
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
            if let end = watchPlane(notified: planeIndexes.contains { set.events(at: $0) != [] }) {
                guard case .runtimeFailed(let reason) = end, let tunnel, tunnel.plan.hasKillSwitch else { return end }
                // The engine outlives its plane: under a kill switch it stays, keeps the switch repaired and
                // answers `status` (disconnected, with why) until `down`, SIGTERM or `stop`.
                state = .failedClosed(tunnel, reason: "the runtime failed: \(reason)")
                tunnel.publish(planePID: nil, planeUser: nil)
                tunnel.publish(status: .disconnected)
                engine.recordDisconnect(tunnel.plan.interfaceName, message: "the runtime failed: \(reason)")
                log("the runtime failed: \(reason); the kill switch stays in place until `tunnelgate down \(tunnel.plan.interfaceName)`")
            }
            if let monitor, let tunnel {
                if (monitorStart..<monitorEnd).contains(where: { set.events(at: $0) != [] }) { monitor.notificationsArrived() }
                let pass = monitor.runDueCheck(tunnel: tunnel)
                if !pass.repaired.isEmpty { log("repaired after an outside change: \(pass.repaired.joined(separator: "; "))") }
                for line in pass.problems { log(line) }
                if !pass.isEmpty { publish(force: true) }
                if pass.failedClosed, !isFailedClosed {
                    // The runtime stops; this loop only keeps the block-all table (the monitor) until SIGTERM,
                    // `down` or `stop`.
                    if case .running(let plane, _, _) = state { plane.stop(timeout: 2) }
                    let reason = monitor.failedClosed ?? "repairs cannot win"
                    state = .failedClosed(tunnel, reason: reason)
                    tunnel.publish(planePID: nil, planeUser: nil)
                    tunnel.publish(status: .disconnected)
                    engine.recordDisconnect(tunnel.plan.interfaceName, message: "failed closed: \(reason)")
                    log("failed closed: \(reason); nothing leaves until `tunnelgate down \(tunnel.plan.interfaceName)`")
                }
                let carrier = isFailedClosed ? [] : monitor.runDueCarrierCheck(tunnel: tunnel)
                if !carrier.isEmpty {
                    for line in carrier { log(line) }
                    if status != tunnel.record.status { tunnel.publish(status: status) }
                }
            }
            if ProcessControl.monotonicSeconds() >= nextPublish {
                nextPublish = ProcessControl.monotonicSeconds() + 1
                publish(force: false)
            }
        }
    }

    /// True once the session failed closed.
    public var isFailedClosed: Bool {
        if case .failedClosed = state { return true }
        return false
    }

    /// The plane's events; restarts; an end when the runtime cannot go on.
    private func watchPlane(notified: Bool) -> End? {
        switch state {
        case .running(let plane, let tunnel, let since):
            var trouble: String?
            for event in plane.drain() {
                switch event {
                case .report(let r):
                    let s = r.runtimeState
                    let changed = s.phase != lastRuntime?.phase || s.interface != lastRuntime?.interface
                    lastRuntime = s
                    fold(r.counters)
                    if changed {
                        log("runtime: \(s.phase.rawValue)\(s.error.map { ": \($0)" } ?? "")")
                        tunnel.publish(status: status, runtimeStatus: s.json)
                    }
                case .failed(let reason): trouble = reason
                case .exited(let status):
                    trouble = trouble ?? plane.failure ?? "the packet plane \(SandboxedProcess.describe(status: status))"
                case .garbage(let why):
                    garbage += 1
                    log("the packet plane sent garbage: \(why)")
                    if plane.garbage > PlaneProcess.garbageLimit { trouble = "the packet plane flooded or garbled its channel (\(plane.garbage) bad datagrams)" }
                case .provider(_, let fds):
                    for fd in fds { fd.close() }
                    garbage += 1
                case .loaded, .reply:
                    continue
                }
            }
            if trouble == nil, plane.garbage > PlaneProcess.garbageLimit {
                trouble = "the packet plane flooded or garbled its channel (\(plane.garbage) bad datagrams)"
            }
            if trouble == nil, ProcessControl.monotonicSeconds() - plane.lastHeard > PlaneProcess.silenceLimit {
                trouble = "the packet plane said nothing for \(Int(PlaneProcess.silenceLimit)) s (hung)"
            }
            guard let reason = trouble else { return nil }
            plane.kill()
            tunnel.publish(planePID: nil, planeUser: user.uid)
            log("the runtime failed: \(reason)")
            let healthy = ProcessControl.monotonicSeconds() - since >= restart.healthySeconds
            return scheduleRestart(tunnel, attempt: healthy ? 1 : restartsInRow + 1, reason: reason)
        case .restarting(let tunnel, let attempt, let at, let reason):
            guard ProcessControl.monotonicSeconds() >= at else { return nil }
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
                tunnel.publish(planePID: plane.process.pid, planeUser: user.uid)
                restarts += 1
                restartsInRow = attempt
                log("packet plane restarted (attempt \(attempt)) after: \(reason)")
                tunnel.publish(status: status, runtimeStatus: lastRuntime?.json)
                return nil
            } catch {
                log("restart \(attempt) failed: \(error)")
                return scheduleRestart(tunnel, attempt: attempt + 1, reason: "\(reason); restart: \(error)")
            }
        default:
            return nil
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

    private func appMessage(_ bytes: [UInt8]) -> Result<[UInt8], ControlFailure> {
        guard case .running(let plane, let tunnel, _) = state else { return .failure(ControlFailure("the runtime is not running")) }
        _ = tunnel
        // What else came in meanwhile (reports, an exit) waits for the loop's next drain.
        return plane.message(bytes)
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

    /// Stops the plane (the runtime's stop, once) and removes everything; with `keepKillSwitch` a
    /// kill switch stays, as after a crash, until `down`. Returns what to add to an error message.
    @discardableResult
    public func stop(keepKillSwitch: Bool = false) throws(EngineError) -> String {
        let tunnel = self.tunnel
        switch state {
        case .loaded(let plane), .applied(let plane, _), .running(let plane, _, _): plane.stop()
        default: break
        }
        state = .stopped
        control = nil
        monitor = nil
        releasePackage()
        guard let tunnel else { return "" }
        if keepKillSwitch && tunnel.plan.hasKillSwitch { return tunnel.stopFailed() }
        tunnel.publish(status: .disconnecting)
        try tunnel.stop()
        return ""
    }

    private var released = false

    /// The plane's user and the package's descriptors and socket file, once.
    private func releasePackage() {
        user.release()
        guard !released else { return }
        released = true
        package.release()
    }

    /// The plane, once stopped, for tests of the sandbox: its pid while it runs.
    public var planePID: Int32? {
        switch state {
        case .loaded(let p), .applied(let p, _), .running(let p, _, _): p.process.pid
        default: nil
        }
    }
}
