import DNSConfig
import Engine
import Foundation
import LinuxSystem
import TunnelgateSecrets
import PlaneProtocol
import RuntimeABI
import Session
import TunnelgateSettings

/// The system's part for one provider, as iOS's session manager plays it: the privileged engine of a
/// provider host. It never runs the provider: the host's `TunnelSession` starts the host's own
/// executable again, with the same arguments, as the provider's packet plane (unprivileged, sandboxed),
/// and applies what the provider asks for: setTunnelNetworkSettings arrives as settings to validate and
/// apply (Engine.up the first time, the difference after), answered with nil or an error and, when a
/// TUN was made, its descriptor; startTunnel's completion and cancelTunnelWithError arrive as messages;
/// stopTunnel and app messages go the other way. Meanwhile the session watches and repairs what was
/// applied, serves the control socket, and publishes NEVPNStatus in the state directory, where the
/// manager follows it. This type only starts the session and turns its end into the host's exit.
final class ProviderEngine {
    let configuration: TunnelgateHostConfiguration
    let signals: FileDescriptor
    let log: @Sendable (String) -> Void

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

    /// Seconds as a person writes them: 60, 2.5.
    static func seconds(_ value: Double) -> String {
        value == value.rounded() && abs(value) < 1e15 ? "\(Int(value))" : "\(value)"
    }

    func run() -> Int32 {
        // Nothing is touched for a host configuration that cannot be followed.
        guard configuration.startTimeout > 0, configuration.startTimeout.isFinite else {
            log("invalid host configuration: startTimeout must be a number of seconds above 0, not \(configuration.startTimeout)")
            return 1
        }
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
        let name = configuration.interfaceName
        engine.recordDisconnect(name, error: nil)  // a new run: the last one's error no longer applies
        let user: PlaneUser
        do { user = try PlaneUser.allocate() } catch {
            log("cannot start the provider's packet plane: \(error)")
            engine.recordDisconnect(name, message: "\(error)")
            return 1
        }
        let configuration = self.configuration
        let handoff = TunnelgateHostHandoff.current
        var source = ProviderSource(
            interfaceName: name, arguments: CommandLine.arguments, environment: Self.planeEnvironment,
            handoff: handoff.map { JSONText($0.json) },
            translate: { json in
                guard let wire = try? JSONDecoder().decode(NetworkSettingsWire.self, from: Data(json.text.utf8)) else {
                    return .failure(ProviderRefusal("invalid tunnel network settings: not readable",
                                                    code: NETunnelProviderError.networkSettingsInvalid.rawValue))
                }
                do throws(ConfigurationError) { return .success(try wire.settings.tunnelgateSettings(configuration)) } catch {
                    return .failure(ProviderRefusal("invalid tunnel network settings:\n\(error)",
                                                    code: NETunnelProviderError.networkSettingsInvalid.rawValue))
                }
            })
        // The secrets its protocol refers to, read here (root) for the plane, which cannot read the store.
        let proto = handoff?.protocolConfigurationJSON.flatMap { try? NETunnelProviderProtocol.tunnelgateDecoded(Array($0.utf8)) }
        source.startTimeout = configuration.startTimeout
        source.includeAllNetworks = configuration.includeAllNetworks
        source.secrets = TunnelgateSecretStore.secrets(
            of: proto, store: SecretStore(directory: ProcessControl.environmentValue("TUNNELGATE_SECRETS") ?? SecretStore.defaultDirectory))
        let session = TunnelSession(engine: engine, source: .provider(source), user: user,
                                    planeLog: FileDescriptor(rawValue: 2), log: { [log] in log($0) })
        // disconnectOnSleep: as on iOS, the tunnel stops when the host is about to sleep (logind's
        // PrepareForSleep(true)); where no logind runs, nothing is followed and status says so.
        // Without it, the provider's sleep() and wake() are called as the host sleeps and wakes.
        let disconnect = proto?.disconnectOnSleep == true
        session.disconnectOnSleep = disconnect
        // With disconnectOnSleep, a delay inhibitor too: logind waits (at most its InhibitDelayMaxSec=)
        // until the stop below is done and the descriptor closed.
        var inhibitor: FileDescriptor?
        defer { inhibitor?.close() }
        do throws(SleepWatch.Unavailable) {
            let watch = try SleepWatch()
            session.sleepWatch = watch
            if disconnect {
                do throws(SystemBusError) {
                    inhibitor = try watch.delayInhibitor(who: "Tunnelgate", why: "stopping tunnel \(name) before sleep (disconnectOnSleep)")
                    session.sleepNote = "following logind's PrepareForSleep on \(watch.address), with a delay inhibitor"
                } catch {
                    session.sleepNote = "following logind's PrepareForSleep on \(watch.address), without a delay inhibitor (\(error))"
                }
            }
        } catch {
            if disconnect { session.sleepNote = "not followed: \(error)" }
        }
        if disconnect { log("disconnectOnSleep: \(session.sleepNote ?? "")") }
        do throws(SessionError) { try session.prepare() } catch {
            log("cannot start the provider's packet plane: \(error)")
            engine.recordDisconnect(name, message: "\(error)")
            _ = try? session.stop()
            return 1
        }
        let end = session.run(signals: signals)
        // How the provider ended: what is removed, what is recorded for fetchLastDisconnectError.
        var keepKillSwitch = false
        var code: Int32 = 0
        var reason = NEProviderStopReason.userInitiated
        switch end {
        case .sleep:
            reason = .sleep
        case .signal, .stopRequested:
            if end == .stopRequested { log("stop requested on the control socket: stopping the provider") }
        case .startFailed(let error):
            // As on iOS: a failed start ends the tunnel without stopTunnel.
            engine.recordDisconnect(name, error: error)
            keepKillSwitch = true
            code = 1
        case .startTimedOut(let seconds):
            // As iOS's session manager after its 60 s: Stopping, so the provider gets stopTunnel.
            let message = "startTunnel did not complete within \(Self.seconds(seconds)) s"
            log("\(message): stopping the provider")
            engine.recordDisconnect(name, error: DisconnectError(message: message, domain: NEVPNErrorDomain,
                                                                 code: NEVPNError.Code.connectionFailed.rawValue))
            reason = .connectionFailed
            keepKillSwitch = true
            code = 1
        case .cancelled(let error):
            // Cancelled with an error, a kill switch stays closed until `tunnelgate down` (fail-closed).
            if let error { engine.recordDisconnect(name, error: error) }
            keepKillSwitch = error != nil
            code = error == nil ? 0 : 1
        case .runtimeFailed(let reason), .failedClosed(let reason), .namespaceGone(let reason):
            // (A provider host has no isolate namespace to watch: namespaceGone is not reached.)
            engine.recordDisconnect(name, message: reason)
            code = 1
        }
        do throws(EngineError) {
            let note = try session.stop(keepKillSwitch: keepKillSwitch, providerReason: reason.rawValue)
            if !note.isEmpty { log(note.trimmingCharacters(in: .whitespacesAndNewlines)) }
        } catch {
            log("removing the settings failed: \(error)")
            return 1
        }
        if let held = inhibitor {
            // The tunnel is down: the host may sleep now.
            held.close()
            inhibitor = nil
            if end == .sleep { log("the tunnel is down: released the delay inhibitor, the host may sleep") }
        }
        return code
    }
}
