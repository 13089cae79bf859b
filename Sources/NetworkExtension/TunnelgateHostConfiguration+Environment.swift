import Foundation

extension TunnelgateHostConfiguration {
    /// The configuration a manager's `startVPNTunnel` hands to the provider host it spawns:
    /// TUNNELGATE_INTERFACE_NAME (default tg0), TUNNELGATE_INCLUDE_ALL_NETWORKS and
    /// TUNNELGATE_EXCLUDE_LOCAL_NETWORKS ("1"). A host written for the manager starts with
    /// `TunnelgateProviderHost(configuration: .fromEnvironment())`.
    public static func fromEnvironment(_ environment: [String: String] = ProcessInfo.processInfo.environment) -> TunnelgateHostConfiguration {
        var c = TunnelgateHostConfiguration()
        if let name = environment["TUNNELGATE_INTERFACE_NAME"], !name.isEmpty { c.interfaceName = name }
        c.includeAllNetworks = environment["TUNNELGATE_INCLUDE_ALL_NETWORKS"] == "1"
        c.excludeLocalNetworks = environment["TUNNELGATE_EXCLUDE_LOCAL_NETWORKS"] == "1"
        return c
    }

    /// startVPNTunnel(options:)'s options as the host's `run(_:options:)` takes them (strings as NSString,
    /// numbers as NSNumber), or nil when none were given.
    public static func startOptionsFromEnvironment(_ environment: [String: String] = ProcessInfo.processInfo.environment) -> [String: NSObject]? {
        guard let json = environment["TUNNELGATE_START_OPTIONS"],
              let object = (try? JSONSerialization.jsonObject(with: Data(json.utf8))) as? [String: Any] else { return nil }
        var out: [String: NSObject] = [:]
        for (key, value) in object {
            if let s = value as? String { out[key] = NSString(string: s) } else if let n = value as? NSNumber { out[key] = n }
        }
        return out
    }

    /// NETunnelProviderProtocol.providerConfiguration as the manager saved it (TUNNELGATE_PROVIDER_CONFIGURATION).
    public static func providerConfigurationFromEnvironment(_ environment: [String: String] = ProcessInfo.processInfo.environment) -> [String: Any]? {
        guard let json = environment["TUNNELGATE_PROVIDER_CONFIGURATION"] else { return nil }
        return (try? JSONSerialization.jsonObject(with: Data(json.utf8))) as? [String: Any]
    }
}
