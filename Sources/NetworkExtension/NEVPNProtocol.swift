import Foundation
import TunnelgateSettings

/// NEVPNProtocol: the manager's description of a VPN. Only what a packet
/// tunnel uses on Linux is offered.
open class NEVPNProtocol: @unchecked Sendable {
    // @unchecked Sendable: a configuration object, mutated by its owner before it is saved (as on iOS).
    /// The server, passed to the provider host as TUNNELGATE_SERVER_ADDRESS (informational, as on iOS).
    open var serverAddress: String?
    open var username: String?
    /// As on iOS: the host's kill switch; passed to the host as TUNNELGATE_INCLUDE_ALL_NETWORKS=1.
    open var includeAllNetworks = false
    /// Passed to the host as TUNNELGATE_EXCLUDE_LOCAL_NETWORKS=1.
    open var excludeLocalNetworks = false

    public init() {}
}

/// NETunnelProviderProtocol: which provider runs, with what configuration.
open class NETunnelProviderProtocol: NEVPNProtocol, @unchecked Sendable {
    // @unchecked Sendable: as NEVPNProtocol.
    /// Linux: the path of the provider host executable that `startVPNTunnel` runs
    /// (iOS: the bundle identifier of the app extension).
    open var providerBundleIdentifier: String?
    /// Handed to the provider host as JSON in TUNNELGATE_PROVIDER_CONFIGURATION; saved in the
    /// preferences file, so its values must be JSON-representable (strings, numbers, booleans,
    /// arrays, dictionaries).
    open var providerConfiguration: [String: Any]?

    /// Linux only: the tunnel's interface name, which is also its name in the state directory
    /// (`tunnelgate status NAME`). The connection finds the running tunnel by it; the host gets it as
    /// TUNNELGATE_INTERFACE_NAME (`TunnelgateHostConfiguration.fromEnvironment()`). Default `tg0`.
    open var tunnelgateInterfaceName: String = TunnelSettings.defaultName
    /// Linux only: extra arguments for the provider host executable (after argv[0]).
    open var tunnelgateArguments: [String] = []

    public override init() { super.init() }
}
