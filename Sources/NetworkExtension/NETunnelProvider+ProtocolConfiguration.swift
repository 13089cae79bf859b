import Foundation

extension NETunnelProvider {
    /// NETunnelProvider.protocolConfiguration: the NETunnelProviderProtocol the manager saved, every
    /// property and providerConfiguration's property-list types kept, as the host delivered it
    /// (`tunnelgateDeliverProtocolConfiguration`). Until the host delivers one, it is built from what a
    /// manager's handoff carries today (TunnelgateHostHandoff: serverAddress, providerConfiguration as
    /// JSON, the interface name, includeAllNetworks, excludeLocalNetworks); without a handoff either, an
    /// empty NETunnelProviderProtocol. The same object on each read until the host delivers another.
    public var protocolConfiguration: NEVPNProtocol {
        if let p = tunnelgateState.protocolConfiguration { return p }
        let p = Self.protocolConfigurationFromHandoff(TunnelgateHostHandoff.current)
        tunnelgateState.setProtocolConfiguration(p)
        return p
    }

    /// The host's hook: at start, and again whenever the manager saves a new configuration (as iOS
    /// updates protocolConfiguration). The lead's host (issue 13) calls it with what the engine hands
    /// over; nothing calls it yet.
    func tunnelgateDeliverProtocolConfiguration(_ p: NETunnelProviderProtocol) {
        tunnelgateState.setProtocolConfiguration(p)
    }

    /// The same, from the bytes of `NETunnelProviderProtocol.tunnelgateEncoded()`.
    func tunnelgateDeliverProtocolConfiguration(encoded bytes: [UInt8]) throws(NEVPNError) {
        tunnelgateState.setProtocolConfiguration(try NETunnelProviderProtocol.tunnelgateDecoded(bytes))
    }

    static func protocolConfigurationFromHandoff(_ handoff: TunnelgateHostHandoff?) -> NETunnelProviderProtocol {
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
