import RuntimeABI
import Session
import Foundation
import Engine
import LinuxSystem
import PlaneProtocol
import Synchronization
import TunnelgateSettings

/// Plays the system's part for one NEPacketTunnelProvider in this process's
/// network namespace, in two processes as on iOS: this one is the privileged
/// engine (`ProviderEngine`: applies setTunnelNetworkSettings through the same
/// engine as `tunnelgate up` — Engine.up: plan, journal, apply, verify — watches
/// and repairs, serves the control socket, and on SIGTERM/SIGINT/SIGHUP has
/// stopTunnel(with: .userInitiated) called exactly once, then removes
/// everything); it starts its own executable again, with the same arguments,
/// as the provider's packet plane (`ProviderPlane`: an unprivileged user, no
/// capabilities, no_new_privs, seccomp, a read-only file system), where the
/// provider runs and its packetFlow reads and writes the TUN.
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
public final class TunnelgateProviderHost: @unchecked Sendable {
    // @unchecked Sendable: set up once in init, then used by the thread that calls run.
    public let configuration: TunnelgateHostConfiguration
    private let log: @Sendable (String) -> Void
    private enum Role {
        /// This process is the host's engine: it applies, watches and serves; the provider runs in
        /// the plane it starts.
        case engine(signals: FileDescriptor)
        /// This process is the provider's packet plane (sandboxed, unprivileged).
        case plane(ProviderPlane)
    }
    private let role: Role

    public init(configuration: TunnelgateHostConfiguration = .init(),
                log: @escaping @Sendable (String) -> Void = { FileHandle.standardError.write(Data("tunnelgate-provider: \($0)\n".utf8)) }) throws(SystemCallError) {
        self.configuration = configuration
        self.log = log
        if ProviderPlane.isPlane {
            // The engine's first message (the manager's handoff) is read before anything else can.
            _ = TunnelgateHostHandoff.current
            try PlaneLockDown.apply()
            role = .plane(ProviderPlane(interfaceName: configuration.interfaceName, log: { log("[plane] \($0)") }))
        } else {
            // The provider's configuration and whatever keys it holds: no core dump, no reader without CAP_SYS_PTRACE.
            try ProcessControl.protectSecrets()
            // What a manager handed over on descriptor 3 is read (and the descriptor closed) now: the
            // plane is forwarded it, nothing else inherits it.
            _ = TunnelgateHostHandoff.current
            role = .engine(signals: try TerminationSignals.block())
        }
    }

    /// Runs the provider until a termination signal, a `stop` on the control socket, or its
    /// cancelTunnelWithError; returns the process exit status (0 after a clean stop). In the host's
    /// engine `provider` is not started: the engine starts this executable again as the provider's
    /// packet plane, where `run` starts it.
    public func run(_ provider: NEPacketTunnelProvider, options: [String: NSObject]? = nil) -> Int32 {
        switch role {
        case .plane(let plane): return plane.run(provider, options: options)
        case .engine(let signals): return ProviderEngine(configuration: configuration, signals: signals, log: log).run()
        }
    }

    /// An error of the host's, as a provider's completion handler gets it.
    static func error(_ code: NETunnelProviderError, _ message: String) -> NSError {
        NSError(domain: NETunnelProviderErrorDomain, code: code.rawValue, userInfo: [NSLocalizedDescriptionKey: message])
    }
}
