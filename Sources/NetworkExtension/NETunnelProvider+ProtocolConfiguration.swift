import Foundation

extension NETunnelProvider {
    /// NETunnelProvider.protocolConfiguration: the NETunnelProviderProtocol the manager saved, every
    /// property and providerConfiguration's property-list types kept: what the manager's
    /// startVPNTunnel handed over (TunnelgateHostHandoff's `protocol`, `tunnelgateEncoded()`), or what
    /// the host delivered since (`tunnelgateDeliverProtocolConfiguration`). A handoff from an older
    /// manager without it gives what it carries (serverAddress, providerConfiguration as JSON, the
    /// interface name, includeAllNetworks, excludeLocalNetworks); without a handoff, an empty
    /// NETunnelProviderProtocol. The same object on each read until the host delivers another.
    public var protocolConfiguration: NEVPNProtocol {
        if let p = tunnelgateState.protocolConfiguration { return p }
        let p = Self.protocolConfigurationFromHandoff(TunnelgateHostHandoff.current)
        tunnelgateState.setProtocolConfiguration(p)
        return p
    }

    /// The host's hook: whenever the manager saves a new configuration while the tunnel runs (as iOS
    /// updates protocolConfiguration); ProviderPlane calls the encoded form below with what
    /// NEVPNConnection.update sent.
    func tunnelgateDeliverProtocolConfiguration(_ p: NETunnelProviderProtocol) {
        tunnelgateState.setProtocolConfiguration(p)
    }

    /// The same, from the bytes of `NETunnelProviderProtocol.tunnelgateEncoded()`.
    func tunnelgateDeliverProtocolConfiguration(encoded bytes: [UInt8]) throws(NEVPNError) {
        tunnelgateState.setProtocolConfiguration(try NETunnelProviderProtocol.tunnelgateDecoded(bytes))
    }

    static func protocolConfigurationFromHandoff(_ handoff: TunnelgateHostHandoff?) -> NETunnelProviderProtocol {
        if let json = handoff?.protocolConfigurationJSON,
           let p = try? NETunnelProviderProtocol.tunnelgateDecoded(Array(json.utf8)) {
            return p
        }
        let p = NETunnelProviderProtocol()
        guard let handoff else { return p }
        p.serverAddress = handoff.serverAddress
        p.providerConfiguration = handoff.providerConfiguration
        p.tunnelgateInterfaceName = handoff.configuration.interfaceName
        p.includeAllNetworks = handoff.configuration.includeAllNetworks
        p.excludeLocalNetworks = handoff.configuration.excludeLocalNetworks
        return p
    }
}
