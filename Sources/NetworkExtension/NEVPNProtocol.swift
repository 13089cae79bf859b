import Foundation
import TunnelgateSettings

/// NEVPNProtocol: the manager's description of a VPN. Only what a packet
/// tunnel uses on Linux is offered.
open class NEVPNProtocol: NSObject, @unchecked Sendable {
    // @unchecked Sendable: a configuration object, mutated by its owner before it is saved (as on iOS).
    /// The server, handed to the provider host (TunnelgateHostHandoff.serverAddress; informational, as on iOS).
    open var serverAddress: String?
    open var username: String?
    /// As on iOS: the host's kill switch; handed to the host (TunnelgateHostConfiguration.includeAllNetworks).
    open var includeAllNetworks = false
    /// Handed to the host (TunnelgateHostConfiguration.excludeLocalNetworks).
    open var excludeLocalNetworks = false
    /// References to secrets in Tunnelgate's secret store (`TunnelgateSecretStore.reference(named:)`;
    /// iOS: keychain persistent references). Saved; the secret itself never is.
    open var passwordReference: Data?
    open var identityReference: Data?
    /// Saved and handed to the provider host, which then follows logind's PrepareForSleep and stops the
    /// tunnel with `stopTunnel(with: .sleep)` when the host is about to sleep (ProviderEngine, SleepWatch).
    open var disconnectOnSleep = false

    public override init() { super.init() }
}

/// NETunnelProviderProtocol: which provider runs, with what configuration.
open class NETunnelProviderProtocol: NEVPNProtocol, @unchecked Sendable {
    // @unchecked Sendable: as NEVPNProtocol.
    /// Linux: the path of the provider host executable that `startVPNTunnel` runs
    /// (iOS: the bundle identifier of the app extension).
    open var providerBundleIdentifier: String?
    /// Handed to the provider host as JSON on its descriptor 3 (TunnelgateHostHandoff, never the
    /// environment; `TunnelgateHostConfiguration.providerConfigurationFromManager()`); saved in the
    /// preferences file, so its values must be JSON-representable (strings, numbers, booleans,
    /// arrays, dictionaries).
    open var providerConfiguration: [String: Any]?

    /// Linux only: the tunnel's interface name, which is also its name in the state directory
    /// (`tunnelgate status NAME`). The connection finds the running tunnel by it; the host gets it in
    /// its handoff (`TunnelgateHostConfiguration.fromManager()`). Default `tg0`.
    open var tunnelgateInterfaceName: String = TunnelSettings.defaultName
    /// Linux only: extra arguments for the provider host executable (after argv[0]).
    open var tunnelgateArguments: [String] = []

    public override init() { super.init() }
}
