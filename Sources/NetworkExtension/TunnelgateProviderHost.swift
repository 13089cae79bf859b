import RuntimeABI
import Session
import Foundation
import Engine
import Glibc
import LinuxSystem
import Synchronization
import TunnelgateSettings

/// Plays the system's part for one NEPacketTunnelProvider in this process's
/// network namespace: calls startTunnel, applies setTunnelNetworkSettings
/// through the same engine as `tunnelgate up` (Engine.up: plan, journal,
/// apply, verify; teardown on stop), binds packetFlow to the TUN, and on
/// SIGTERM/SIGINT/SIGHUP calls stopTunnel(with: .userInitiated) exactly once,
/// then removes everything.
///
/// While settings are applied it watches them as `tunnelgate up`'s owner
/// does (`Monitor`): what others change of the tunnel's kernel state is
/// repaired, and the tunnel is reasserting while no carrier endpoint has a
/// path, whatever the provider's own `reasserting` says.
///
/// Create it before anything starts threads: init blocks the termination
/// signals for the whole process and reads them from a signalfd. It also
/// makes the process non-dumpable (PR_SET_DUMPABLE 0, RLIMIT_CORE 0): a
/// provider holds its configuration and credentials.
public final class TunnelgateProviderHost: NEProviderSystem, @unchecked Sendable {
    // @unchecked Sendable: the engine state (gateway, active, status) is touched only on `engineQueue`;
    // the flags the main loop reads are atomics.
    public let configuration: TunnelgateHostConfiguration
    private let signals: FileDescriptor
    /// Serialises every engine operation and status change.
    private let engineQueue = DispatchQueue(label: "tunnelgate.provider.engine")
    /// Where the provider's methods and completion handlers are called.
    private let providerQueue = DispatchQueue(label: "tunnelgate.provider")
    private var gateway: Engine?
    private var active: ActiveTunnel?
    /// The control socket (NAME.sock) while settings are applied: status, stop,
    /// and app messages for handleAppMessage (NETunnelProviderSession.sendProviderMessage).
    private var control: ControlServer?
    /// Watches the applied settings (`active`) for outside changes and the carrier path: made with
    /// each new ActiveTunnel, kept across an in-place re-apply, dropped when the settings are removed.
    private var monitor: Monitor?
    /// What the provider last set its `reasserting` to.
    private var providerReasserting = false
    private var started = false
    private(set) var status: NEVPNStatus = .disconnected
    private weak var provider: NEPacketTunnelProvider?
    private let log: @Sendable (String) -> Void

    private let startResult = Mutex<(done: Bool, error: DisconnectError?)>((false, nil))
    private let cancelRequest = Mutex<(requested: Bool, error: DisconnectError?)>((false, nil))

    public init(configuration: TunnelgateHostConfiguration = .init(),
                log: @escaping @Sendable (String) -> Void = { FileHandle.standardError.write(Data("tunnelgate-provider: \($0)\n".utf8)) }) throws(SystemCallError) {
        self.configuration = configuration
        self.log = log
        // The provider's configuration and whatever keys it holds: no core dump, no reader without CAP_SYS_PTRACE.
        try ProcessControl.protectSecrets()
        // What a manager handed over on descriptor 3 is read (and the descriptor closed) now, also by a
        // host that configures itself otherwise: nothing it starts inherits it.
        _ = TunnelgateHostHandoff.current
        signals = try TerminationSignals.block()
    }

    /// Runs the provider until a termination signal or cancelTunnelWithError;
    /// returns the process exit status (0 after a clean stop).
    public func run(_ provider: NEPacketTunnelProvider, options: [String: NSObject]? = nil) -> Int32 {
        self.provider = provider
        provider.system = self
        recordDisconnect(nil)  // a new run: the error of the last one no longer applies
        setStatus(.connecting)
        nonisolated(unsafe) let options = options
        providerQueue.async {
            provider.startTunnel(options: options) { [self] error in
                startResult.withLock { $0 = (true, error.map(Self.disconnectError)) }
            }
        }
        var reportedStart = false
        while true {
            // `watched` is held for the whole turn: its sockets stay open (their numbers ours) while
            // polling, even when settings applied meanwhile replace or drop the host's monitor.
            let (controlFD, watched, due) = engineQueue.sync { (control?.descriptor ?? -1, monitor, monitor?.timeoutMilliseconds() ?? -1) }
            var fds = [pollfd(fd: signals.rawValue, events: Int16(POLLIN), revents: 0),
                       pollfd(fd: controlFD, events: Int16(POLLIN), revents: 0)]
            fds += (watched?.descriptors ?? []).map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
            // 100 ms: the start and cancel flags are set by other threads without waking the poll.
            let rc = Glibc.poll(&fds, nfds_t(fds.count), due >= 0 ? min(due, 100) : 100)
            if rc > 0, fds[1].revents != 0, serveControl(provider) == .stop {
                log("stop requested on the control socket: stopping the provider")
                return stop(provider, reason: .userInitiated)
            }
            if rc > 0, fds[0].revents != 0 {
                // struct signalfd_siginfo: 128 bytes, ssi_signo (UInt32) first.
                var info = [UInt8](repeating: 0, count: 128)
                _ = info.withUnsafeMutableBytes { try? signals.read(into: $0) }
                let signo = info.withUnsafeBytes { $0.loadUnaligned(as: UInt32.self) }
                log("signal \(signo): stopping the provider")
                return stop(provider, reason: .userInitiated)
            }
            if let watched {
                let notified = rc > 0 && fds[2...].contains { $0.revents != 0 }
                engineQueue.sync { watchLocked(watched, notified: notified) }
            }
            let cancel = cancelRequest.withLock { $0 }
            if cancel.requested {
                log("the provider cancelled the tunnel\(cancel.error.map { ": \($0.message)" } ?? "")")
                // Cancelled with an error, a kill switch stays closed until `tunnelgate down` (fail-closed).
                let clean = removeSettings(keepingKillSwitch: cancel.error != nil)
                if let error = cancel.error { recordDisconnect(error) }
                return cancel.error == nil && clean ? 0 : 1
            }
            let start = startResult.withLock { $0 }
            if start.done && !reportedStart {
                reportedStart = true
                if let error = start.error {
                    // As on iOS: a failed start ends the tunnel without stopTunnel.
                    log("startTunnel failed: \(error.message)")
                    _ = removeSettings(keepingKillSwitch: true)
                    recordDisconnect(error)
                    return 1
                }
                let now = engineQueue.sync { () -> NEVPNStatus in
                    started = true
                    setStatusLocked(connectedStatusLocked())
                    return status
                }
                log("startTunnel completed: \(now == .reasserting ? "reasserting" : "connected")")
            }
        }
    }

    /// Answers the control socket's requests; app messages go to
    /// handleAppMessage on the provider's queue (a reply within 10 s).
    private func serveControl(_ provider: NEPacketTunnelProvider) -> ControlServer.Request? {
        guard let control = engineQueue.sync(execute: { self.control }) else { return nil }
        return control.serve { bytes in
            let reply = Mutex<(done: Bool, data: Data?)>((false, nil))
            let done = DispatchSemaphore(value: 0)
            let message = Data(bytes)
            self.providerQueue.async {
                provider.handleAppMessage(message) { data in
                    reply.withLock { $0 = (true, data) }
                    done.signal()
                }
            }
            guard done.wait(timeout: .now() + 10) == .success else { return .failure(ControlFailure("handleAppMessage did not answer within 10 s")) }
            return .success(Array(reply.withLock { $0.data } ?? Data()))
        }
    }

    /// stopTunnel once, then teardown.
    private func stop(_ provider: NEPacketTunnelProvider, reason: NEProviderStopReason) -> Int32 {
        engineQueue.sync { setStatusLocked(.disconnecting) }
        let done = DispatchSemaphore(value: 0)
        providerQueue.async { provider.stopTunnel(with: reason) { done.signal() } }
        if done.wait(timeout: .now() + 20) == .timedOut { log("stopTunnel did not complete within 20 s; removing the settings anyway") }
        return removeSettings() ? 0 : 1
    }

    /// Removes the applied settings and closes the flow; true when nothing was left behind. With
    /// `keepingKillSwitch` (the provider failed) a kill switch stays in place until `tunnelgate down NAME`.
    private func removeSettings(keepingKillSwitch: Bool = false) -> Bool {
        engineQueue.sync {
            provider?.packetFlow.close()
            var ok = true
            do throws(EngineError) { try applyLocked(nil, keepingKillSwitch: keepingKillSwitch) } catch {
                log("removing the settings failed: \(error)")
                ok = false
            }
            if keepingKillSwitch, let gateway, gateway.hasKillSwitchInPlace(configuration.interfaceName) {
                log("the kill switch stays in place until `tunnelgate down \(configuration.interfaceName)`")
            }
            setStatusLocked(.disconnected)
            return ok
        }
    }

    // MARK: NEProviderSystem

    func setTunnelNetworkSettings(_ settings: NETunnelNetworkSettings?, for provider: NEPacketTunnelProvider,
                                  completionHandler: @escaping @Sendable ((any Error)?) -> Void) {
        let tunnelSettings: TunnelSettings?
        if let settings {
            do throws(ConfigurationError) { tunnelSettings = try settings.tunnelgateSettings(configuration) } catch {
                let e = Self.error(.networkSettingsInvalid, "invalid tunnel network settings:\n\(error)")
                providerQueue.async { completionHandler(e) }
                return
            }
        } else {
            tunnelSettings = nil
        }
        engineQueue.async { [self] in
            var failure: NSError?
            do throws(EngineError) { try applyLocked(tunnelSettings) } catch {
                failure = Self.error(.networkSettingsFailed, error.description)
            }
            if failure == nil, let active { provider.packetFlow.bind(active.tun.descriptor) }
            if failure == nil, control == nil, let gateway, let active {
                control = try? ControlServer(gateway: gateway, name: active.plan.interfaceName)
            }
            // New settings may mean another monitor (a path until its first check) or none (removed).
            settleStatusLocked()
            let result = failure
            providerQueue.async { completionHandler(result) }
        }
    }

    /// Synchronous: when the provider's `reasserting = …` returns, the status it implies is published
    /// (engineQueue never waits for the provider, so this cannot deadlock).
    func reassertingChanged(_ reasserting: Bool, for provider: NEPacketTunnelProvider) {
        engineQueue.sync { [self] in
            providerReasserting = reasserting
            settleStatusLocked()
        }
    }

    /// An error a provider gave, as fetchLastDisconnectError returns it: its domain, code and description.
    static func disconnectError(_ error: any Error) -> DisconnectError {
        let e = error as NSError
        return DisconnectError(message: e.localizedDescription, domain: e.domain, code: e.code)
    }

    /// Keeps why this run ended (nil: clears it) in NAME.lasterror, for `tunnelgate status` and the
    /// manager's fetchLastDisconnectError.
    private func recordDisconnect(_ error: DisconnectError?) {
        engineQueue.sync {
            if gateway == nil, let g = try? Engine() {
                g.log = log
                gateway = g
            }
            gateway?.recordDisconnect(configuration.interfaceName, error: error)
        }
    }

    func cancelTunnel(with error: (any Error)?, for provider: NEPacketTunnelProvider) {
        cancelRequest.withLock { $0 = (true, error.map(Self.disconnectError)) }
    }

    // MARK: Engine (on engineQueue)

    /// nil removes; settings replace whatever is applied (stop, then up: the
    /// provider keeps running, the TUN is recreated).
    private func applyLocked(_ settings: TunnelSettings?, keepingKillSwitch: Bool = false) throws(EngineError) {
        // Failed closed: the block-all table stays until the tunnel is stopped; no settings replace it.
        if settings != nil, let reason = monitor?.failedClosed {
            throw .verification(["the tunnel failed closed (\(reason)); stop it (`tunnelgate down \(configuration.interfaceName)`) first"],
                                rolledBack: false)
        }
        // Settings again while running: only the difference, as on iOS; the TUN and packetFlow stay.
        if let current = active, let settings, let gateway, try gateway.reapply(current, settings, resolver: SystemResolver()) {
            return
        }
        if let current = active {
            provider?.packetFlow.unbind()
            control = nil
            // Never repair what the provider removes: the monitor goes with the tunnel it watched.
            monitor = nil
            active = nil
            // Replaced by other settings, a kill switch stays until the new one replaces it in one
            // transaction; removed (settings nil) it goes, unless the provider failed.
            try current.stop(keepFirewall: current.plan.hasKillSwitch && (settings != nil || keepingKillSwitch))
        }
        guard let settings else { return }
        if gateway == nil {
            let g = try Engine()
            g.log = log
            gateway = g
        }
        // The provider opens its own sockets to its server, in this process: they cannot be told apart
        // from anyone else's, so its carriers are exempt by address (the weaker rule, said in status).
        let tunnel = try gateway!.up(settings, resolver: SystemResolver(), configPath: nil, awaitingRuntime: !started,
                                     carrierIdentity: .unidentified(reason: "a NetworkExtension provider opens its own "
                                         + "sockets inside its host process, where they cannot be told apart from other processes' sockets"))
        active = tunnel
        tunnel.publish(status: status == .disconnected ? .connecting : Self.tunnelStatus(status))
        do throws(EngineError) { monitor = try gateway!.makeMonitor() } catch {
            log("warning: cannot watch for outside changes (\(error)); they will not be repaired")
        }
    }

    /// One turn of the monitor, as `tunnelgate up`'s loop runs it: drains its notifications, runs a due
    /// repair (counted in the state file for `tunnelgate status`, and logged) and a due carrier check (the
    /// status follows the verdict; each line logged). What a turn publishes is in the state file before
    /// its line is in the log. On engineQueue, so it never runs while setTunnelNetworkSettings changes
    /// the same kernel state or the plan it compares with, and the engine's netlink socket has one user
    /// at a time. A monitor replaced or dropped since the poll began is left alone: its tunnel is gone.
    private func watchLocked(_ watched: Monitor, notified: Bool) {
        guard watched === monitor, let active else { return }
        if notified { watched.notificationsArrived() }
        let pass = watched.runDueCheck(tunnel: active)
        if !pass.isEmpty {
            var counters = active.record.counters ?? PacketCounters()
            counters.repairs = UInt64(watched.repairs)
            counters.lastRepair = watched.lastRepair
            counters.failedClosed = watched.failedClosed
            active.publish(counters: counters)
            if !pass.repaired.isEmpty { log("repaired after an outside change: \(pass.repaired.joined(separator: "; "))") }
            for line in pass.problems { log(line) }
        }
        // Failed closed: disconnected, the block-all table kept in place until the host stops (SIGTERM,
        // `tunnelgate down`, `stop`); the provider keeps running, its packetFlow carries nothing.
        if pass.failedClosed { setStatusLocked(.disconnected) }
        guard watched.failedClosed == nil else { return }
        // Lines come with every change of an endpoint's path, so with every change of the verdict.
        let carrier = watched.runDueCarrierCheck(tunnel: active)
        if !carrier.isEmpty {
            settleStatusLocked()
            for line in carrier { log(line) }
        }
    }

    /// The status of a started tunnel: reasserting while the provider says so OR no carrier endpoint
    /// has a path (`CarrierPath.tunnelStatus`, the provider's view standing for a runtime's), else
    /// connected. The provider's own `reasserting` property is left as the provider set it.
    private func connectedStatusLocked() -> NEVPNStatus {
        if monitor?.failedClosed != nil { return .disconnected }
        let combined = CarrierPath.tunnelStatus(runtime: providerReasserting ? .reasserting : .connected,
                                                carrierPathGone: monitor?.carrierPathGone ?? false)
        return combined == .reasserting ? .reasserting : .connected
    }

    /// Moves a started, connected or reasserting tunnel to `connectedStatusLocked()`.
    private func settleStatusLocked() {
        guard started, status == .connected || status == .reasserting else { return }
        setStatusLocked(connectedStatusLocked())
    }

    private func setStatus(_ s: NEVPNStatus) { engineQueue.sync { setStatusLocked(s) } }

    private func setStatusLocked(_ s: NEVPNStatus) {
        guard s != status else { return }
        status = s
        active?.publish(status: Self.tunnelStatus(s))
        let object = provider
        DispatchQueue.global().async { NotificationCenter.default.post(name: .NEVPNStatusDidChange, object: object) }
    }

    static func tunnelStatus(_ s: NEVPNStatus) -> TunnelStatus {
        switch s {
        case .invalid, .disconnected: .disconnected
        case .connecting: .connecting
        case .connected: .connected
        case .reasserting: .reasserting
        case .disconnecting: .disconnecting
        }
    }

    static func error(_ code: NETunnelProviderError, _ message: String) -> NSError {
        NSError(domain: NETunnelProviderErrorDomain, code: code.rawValue, userInfo: [NSLocalizedDescriptionKey: message])
    }
}
