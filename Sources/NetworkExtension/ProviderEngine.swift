import Engine
import Foundation
import LinuxSystem
import PlaneProtocol
import RuntimeABI
import Session
import TunnelgateSettings

/// The system's part for one provider, as iOS's session manager plays it: the privileged engine of a
/// provider host. It never runs the provider: it starts the host's own executable again, with the same
/// arguments, as the provider's packet plane (unprivileged, sandboxed: `PlaneProcess`), and answers its
/// requests. setTunnelNetworkSettings arrives as settings to validate and apply (Engine.up the first
/// time, the difference after), answered with nil or an error and, when a TUN was made, its descriptor;
/// reasserting, startTunnel's completion and cancelTunnelWithError arrive as messages; stopTunnel and app
/// messages go the other way. Meanwhile it watches and repairs what was applied (`Monitor`), serves the
/// control socket, and publishes NEVPNStatus in the state directory, where the manager follows it.
final class ProviderEngine {
    let configuration: TunnelgateHostConfiguration
    let signals: FileDescriptor
    let log: @Sendable (String) -> Void
    private var engine: Engine?
    private var active: ActiveTunnel?
    private var control: ControlServer?
    private var monitor: Monitor?
    private var plane: PlaneProcess?
    private var user: PlaneUser?
    private var providerReasserting = false
    private var started = false
    private var status: NEVPNStatus = .disconnected
    /// Under a kill switch, after the provider's plane failed: the engine stays, holds the switch and says
    /// why, until it is stopped.
    private var halted: String?

    /// The provider plane's whole environment: the marker, and os.log's level when the host was given
    /// one (OS_ACTIVITY_MODE, as on iOS a system-wide setting, not the provider's).
    static var planeEnvironment: [String] {
        var environment = ["\(ProviderPlane.marker)=1"]
        if let mode = ProcessControl.environmentValue("OS_ACTIVITY_MODE"), ["debug", "disable"].contains(mode) {
            environment.append("OS_ACTIVITY_MODE=\(mode)")
        }
        return environment
    }

    init(configuration: TunnelgateHostConfiguration, signals: FileDescriptor, log: @escaping @Sendable (String) -> Void) {
        self.configuration = configuration
        self.signals = signals
        self.log = log
    }

    func run() -> Int32 {
        do throws(SystemCallError) { try ProcessControl.keepOnly(TunnelSession.engineCapabilities) } catch {
            log("cannot drop capabilities: \(error)")
            return 1
        }
        let engine: Engine
        do throws(EngineError) { engine = try Engine() } catch {
            log("\(error)")
            return 1
        }
        engine.log = log
        self.engine = engine
        engine.recordDisconnect(configuration.interfaceName, error: nil)  // a new run: the last one's error no longer applies
        do throws(SessionError) {
            let user: PlaneUser
            do { user = try PlaneUser.allocate() } catch { throw SessionError("\(error)") }
            self.user = user
            let plane = try PlaneProcess.spawn(user: user, log: FileDescriptor(rawValue: 2), arguments: CommandLine.arguments,
                                               environment: Self.planeEnvironment)
            self.plane = plane
            try plane.send(.provider(handoff: TunnelgateHostHandoff.current.map { JSONText($0.json) }))
        } catch {
            log("cannot start the provider's packet plane: \(error)")
            engine.recordDisconnect(configuration.interfaceName, message: "\(error)")
            user?.release()
            return 1
        }
        status = .connecting
        return loop()
    }

    // MARK: - The loop

    private func loop() -> Int32 {
        while true {
            var set = PollSet()
            set.add(signals, .readable)
            let controlIndex = control.map { set.add(FileDescriptor(rawValue: $0.descriptor), .readable) }
            let monitorStart = set.count
            let watched = monitor
            for fd in watched?.descriptors ?? [] { set.add(FileDescriptor(rawValue: fd), .readable) }
            let monitorEnd = set.count
            let planeIndexes = (plane?.descriptors ?? []).map { set.add($0, .readable) }
            let due = watched?.timeoutMilliseconds() ?? -1
            _ = try? set.wait(timeoutMilliseconds: due >= 0 ? min(due, 1000) : 1000)

            if set.events(at: 0).contains(.readable) {
                let signal = TerminationSignals.read(signals)
                if signal != 0 { return stop(reason: .userInitiated) }
            }
            if let controlIndex, set.events(at: controlIndex) != [] {
                let request = control?.serve { [self] bytes in
                    guard let plane, halted == nil else { return .failure(ControlFailure("the provider is not running")) }
                    // The provider may set settings, reassert or cancel while it handles the message.
                    return plane.message(bytes) { [self] event in
                        guard pendingEnd == nil else { return false }
                        pendingEnd = handle([event])
                        return pendingEnd == nil && self.plane != nil
                    }
                }
                if request == .stop {
                    log("stop requested on the control socket: stopping the provider")
                    return stop(reason: .userInitiated)
                }
            }
            if let end = pendingEnd { return end }
            if let plane, !planeIndexes.isEmpty, let end = handle(plane.drain()) { return end }
            if let watched, watched === monitor, let active {
                if (monitorStart..<monitorEnd).contains(where: { set.events(at: $0) != [] }) { watched.notificationsArrived() }
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
                // Failed closed: disconnected, the block-all table kept until the host stops; the provider
                // keeps running, its packetFlow carries nothing.
                if pass.failedClosed { setStatus(.disconnected) }
                if watched.failedClosed == nil {
                    let carrier = watched.runDueCarrierCheck(tunnel: active)
                    if !carrier.isEmpty {
                        settleStatus()
                        for line in carrier { log(line) }
                    }
                }
            }
        }
    }

    private var pendingEnd: Int32?

    /// The plane's events; an exit status when the host is done.
    private func handle(_ events: [PlaneProcess.Event]) -> Int32? {
        for event in events {
            switch event {
            case .provider(.apply(let id, let settings), let fds):
                for fd in fds { fd.close() }
                let (error, code, tun) = apply(settings)
                try? plane?.send(.applied(id: id, error: error, code: code), descriptors: tun.map { [$0] } ?? [])
            case .provider(.reasserting(let r), let fds):
                for fd in fds { fd.close() }
                providerReasserting = r
                settleStatus()
            case .provider(.started(let error), let fds):
                for fd in fds { fd.close() }
                if let error {
                    // As on iOS: a failed start ends the tunnel without stopTunnel.
                    log("startTunnel failed: \(error.message)")
                    plane?.stop(timeout: 5)
                    _ = removeSettings(keepingKillSwitch: true)
                    engine?.recordDisconnect(configuration.interfaceName, error: DisconnectError(message: error.message, domain: error.domain, code: error.code))
                    return finish(1)
                }
                started = true
                setStatus(connectedStatus())
                log("startTunnel completed: \(status == .reasserting ? "reasserting" : "connected")")
            case .provider(.cancel(let error), let fds):
                for fd in fds { fd.close() }
                log("the provider cancelled the tunnel\(error.map { ": \($0.message)" } ?? "")")
                plane?.stop(timeout: 5)
                // Cancelled with an error, a kill switch stays closed until `tunnelgate down` (fail-closed).
                let clean = removeSettings(keepingKillSwitch: error != nil)
                if let error { engine?.recordDisconnect(configuration.interfaceName, error: DisconnectError(message: error.message, domain: error.domain, code: error.code)) }
                return finish(error == nil && clean ? 0 : 1)
            case .provider(_, let fds):
                for fd in fds { fd.close() }
            case .exited(let waitStatus):
                return planeFailed(plane?.failure ?? "the provider's packet plane \(SandboxedProcess.describe(status: waitStatus))")
            case .garbage(let why):
                log("the provider's packet plane sent garbage: \(why)")
                if (plane?.garbage ?? 0) > PlaneProcess.garbageLimit {
                    plane?.kill()
                    return planeFailed("the provider's packet plane flooded or garbled its channel")
                }
            case .failed(let reason):
                return planeFailed(reason)
            case .loaded, .report, .reply:
                continue
            }
        }
        return nil
    }

    /// The provider's plane is gone without being asked to go: with a kill switch the engine stays and
    /// holds it (disconnected, with why) until stopped; without one everything is removed.
    private func planeFailed(_ reason: String) -> Int32? {
        plane?.kill()
        plane = nil
        log("the provider failed: \(reason)")
        engine?.recordDisconnect(configuration.interfaceName, message: reason)
        if let active, active.plan.hasKillSwitch {
            halted = reason
            active.publish(planePID: nil, planeUser: nil)
            setStatus(.disconnected)
            log("the kill switch stays in place until `tunnelgate down \(configuration.interfaceName)`")
            return nil
        }
        _ = removeSettings()
        return finish(1)
    }

    private func finish(_ code: Int32) -> Int32 {
        user?.release()
        return code
    }

    /// stopTunnel once (the plane's), then teardown.
    private func stop(reason: NEProviderStopReason) -> Int32 {
        setStatus(.disconnecting)
        if let plane {
            try? plane.send(.stopTunnel(reason: reason.rawValue))
            if plane.stop(timeout: 25) == nil { log("the provider did not stop within 25 s; removing the settings anyway") }
        }
        return finish(removeSettings() ? 0 : 1)
    }

    // MARK: - Settings

    /// A provider's settings (nil removes them): nil and maybe a new TUN, or an error and its code.
    private func apply(_ json: JSONText?) -> (String?, Int?, FileDescriptor?) {
        guard halted == nil else { return ("the tunnel failed; stop it (`tunnelgate down \(configuration.interfaceName)`) first", NETunnelProviderError.networkSettingsFailed.rawValue, nil) }
        if let monitor, let reason = monitor.failedClosed, json != nil {
            return ("the tunnel failed closed (\(reason)); stop it (`tunnelgate down \(configuration.interfaceName)`) first",
                    NETunnelProviderError.networkSettingsFailed.rawValue, nil)
        }
        guard let engine else { return ("no engine", NETunnelProviderError.networkSettingsFailed.rawValue, nil) }
        var tunnelSettings: TunnelSettings?
        if let json {
            guard let wire = try? JSONDecoder().decode(NetworkSettingsWire.self, from: Data(json.text.utf8)) else {
                return ("invalid tunnel network settings: not readable", NETunnelProviderError.networkSettingsInvalid.rawValue, nil)
            }
            do throws(ConfigurationError) { tunnelSettings = try wire.settings.tunnelgateSettings(configuration) } catch {
                return ("invalid tunnel network settings:\n\(error)", NETunnelProviderError.networkSettingsInvalid.rawValue, nil)
            }
        }
        do throws(EngineError) {
            // Settings again while running: only the difference, as on iOS; the TUN and packetFlow stay.
            if let current = active, let tunnelSettings, try engine.reapply(current, tunnelSettings, resolver: SystemResolver()) {
                settleStatus()
                return (nil, nil, nil)
            }
            if let current = active {
                control = nil
                monitor = nil
                active = nil
                // Replaced by other settings, a kill switch stays until the new one replaces it in one
                // transaction; removed (settings nil) it goes.
                try current.stop(keepFirewall: current.plan.hasKillSwitch && tunnelSettings != nil)
            }
            guard let tunnelSettings, let user else {
                settleStatus()
                return (nil, nil, nil)
            }
            let tunnel = try engine.up(tunnelSettings, resolver: SystemResolver(), configPath: nil, awaitingRuntime: !started,
                                       carrierIdentity: .user(user.uid))
            active = tunnel
            tunnel.publish(planePID: plane?.process.pid, planeUser: user.uid)
            tunnel.publish(status: status == .disconnected ? .connecting : Self.tunnelStatus(status))
            do throws(EngineError) { monitor = try engine.makeMonitor() } catch {
                log("warning: cannot watch for outside changes (\(error)); they will not be repaired")
            }
            if control == nil { control = try? ControlServer(gateway: engine, name: tunnel.plan.interfaceName) }
            settleStatus()
            return (nil, nil, tunnel.tun.descriptor)
        } catch {
            return (error.description, NETunnelProviderError.networkSettingsFailed.rawValue, nil)
        }
    }

    /// Removes the applied settings; true when nothing was left behind. With `keepingKillSwitch` (the
    /// provider failed) a kill switch stays in place until `tunnelgate down NAME`.
    private func removeSettings(keepingKillSwitch: Bool = false) -> Bool {
        var ok = true
        if let current = active {
            control = nil
            monitor = nil
            active = nil
            do throws(EngineError) { try current.stop(keepFirewall: keepingKillSwitch && current.plan.hasKillSwitch) } catch {
                log("removing the settings failed: \(error)")
                ok = false
            }
        }
        if keepingKillSwitch, let engine, engine.hasKillSwitchInPlace(configuration.interfaceName) {
            log("the kill switch stays in place until `tunnelgate down \(configuration.interfaceName)`")
        }
        status = .disconnected
        return ok
    }

    // MARK: - Status

    /// Reasserting while the provider says so OR no carrier endpoint has a path, else connected.
    private func connectedStatus() -> NEVPNStatus {
        if monitor?.failedClosed != nil || halted != nil { return .disconnected }
        let combined = CarrierPath.tunnelStatus(runtime: providerReasserting ? .reasserting : .connected,
                                                carrierPathGone: monitor?.carrierPathGone ?? false)
        return combined == .reasserting ? .reasserting : .connected
    }

    private func settleStatus() {
        guard started, status == .connected || status == .reasserting || status == .connecting else { return }
        setStatus(connectedStatus())
    }

    private func setStatus(_ s: NEVPNStatus) {
        guard s != status else { return }
        status = s
        active?.publish(status: Self.tunnelStatus(s))
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
}
