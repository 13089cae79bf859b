import Foundation
import TunnelgateSettings

/// NetworkExtension's settings objects → Tunnelgate's model, `TunnelSettings`.
///
/// One pure translation, property by property, with the parsers of text a configuration file's
/// reader uses (`SettingsTranslation`), then the model's validation (`TunnelSettings.validate`'s
/// rules): a provider's settings get exactly the checks and messages of a configuration file, and
/// no JSON is written or read on the way. Problems are named by the objects' own properties
/// (`ipv4Settings.includedRoutes[0].destinationSubnetMask`), and the host's options by theirs
/// (`interfaceName`, `carrierEndpoints[1]`).
public struct TunnelgateHostConfiguration: Sendable, Equatable {
    /// The TUN's name (`tg0`), also the tunnel's name for `tunnelgate status` and `down`.
    public var interfaceName: String
    /// More carrier endpoints to keep off the tunnel, besides `tunnelRemoteAddress`.
    public var carrierEndpoints: [String]
    /// NEVPNProtocol.includeAllNetworks / excludeLocalNetworks (the manager's side on iOS).
    public var includeAllNetworks: Bool
    public var excludeLocalNetworks: Bool
    /// How long startTunnel may take before its completion handler is called: iOS's session manager
    /// (since iOS 16.5) times a start out after 60 s and stops the provider. Past it, the host calls
    /// stopTunnel(.connectionFailed), removes what the provider applied (a kill switch stays, as after
    /// any failed start) and records the timeout for fetchLastDisconnectError.
    public var startTimeout: Double

    public init(interfaceName: String = TunnelSettings.defaultName, carrierEndpoints: [String] = [],
                includeAllNetworks: Bool = false, excludeLocalNetworks: Bool = false, startTimeout: Double = 60) {
        self.interfaceName = interfaceName
        self.carrierEndpoints = carrierEndpoints
        self.includeAllNetworks = includeAllNetworks
        self.excludeLocalNetworks = excludeLocalNetworks
        self.startTimeout = startTimeout
    }
}

extension NETunnelNetworkSettings {
    /// The settings as Tunnelgate's model; a ConfigurationError names each offending property by
    /// its NetworkExtension key path (`ipv4Settings.subnetMasks[0]`).
    public func tunnelgateSettings(_ host: TunnelgateHostConfiguration = .init()) throws(ConfigurationError) -> TunnelSettings {
        var t = SettingsTranslation()
        var mtu: Int?
        var mtuFromOverhead = false
        var ipv4: IPv4Settings?
        var ipv6: IPv6Settings?
        var meshAddressIndex: Int?
        if let packet = self as? NEPacketTunnelNetworkSettings {
            if let m = packet.mtu {
                mtu = m.intValue
            } else if let overhead = packet.tunnelOverheadBytes {
                mtu = TunnelSettings.defaultMTU - overhead.intValue
                mtuFromOverhead = true
            }
            if let v4 = packet.ipv4Settings {
                let path = "ipv4Settings"
                let (addresses, mesh) = t.ipv4Addresses(v4.addresses, at: "\(path).addresses")
                meshAddressIndex = mesh
                ipv4 = IPv4Settings(addresses: addresses,
                                    subnetMasks: t.subnetMasks(v4.subnetMasks, at: "\(path).subnetMasks"),
                                    includedRoutes: Self.routes(v4.includedRoutes, "\(path).includedRoutes", &t),
                                    excludedRoutes: Self.routes(v4.excludedRoutes, "\(path).excludedRoutes", &t))
            }
            if let v6 = packet.ipv6Settings {
                let path = "ipv6Settings"
                ipv6 = IPv6Settings(addresses: t.ipv6Addresses(v6.addresses, at: "\(path).addresses"),
                                    networkPrefixLengths: v6.networkPrefixLengths.map(\.intValue),
                                    includedRoutes: Self.routes(v6.includedRoutes, "\(path).includedRoutes", &t),
                                    excludedRoutes: Self.routes(v6.excludedRoutes, "\(path).excludedRoutes", &t))
            }
        }
        let dns = dnsSettings.map { d in
            DNSSettings(servers: t.dnsServers(d.servers, at: "dnsSettings.servers"),
                        searchDomains: (d.searchDomains ?? []).map(SettingsTranslation.domain),
                        matchDomains: d.matchDomains?.map(SettingsTranslation.domain),
                        matchDomainsNoSearch: d.matchDomainsNoSearch,
                        domainName: d.domainName.map(SettingsTranslation.domain))
        }
        var settings = TunnelSettings(
            name: host.interfaceName, tunnelRemoteAddress: tunnelRemoteAddress, mtu: mtu,
            ipv4Settings: ipv4, ipv6Settings: ipv6, dnsSettings: dns,
            includeAllNetworks: host.includeAllNetworks, excludeLocalNetworks: host.excludeLocalNetworks,
            carrierEndpoints: t.carrierEndpoints(host.carrierEndpoints, at: "carrierEndpoints"),
            runtime: .none, meshAddressIndex: meshAddressIndex)
        settings.addRemoteAsCarrier()
        // proxySettings: checked with the rest (every problem by key path), carried as the files to write.
        var proxyProblems: [ConfigProblem] = []
        if let proxy = proxySettings {
            do throws(TunnelgateProxyFiles.Failure) { settings.proxy = try TunnelgateProxyFiles.make(proxy).model } catch {
                switch error { case .invalid(let lines): proxyProblems = lines.map(Self.problem) }
            }
        }
        let finished: TunnelSettings
        do throws(ConfigurationError) {
            finished = try t.finish(settings) { Self.networkExtensionKeyPath($0, mtuFromOverhead: mtuFromOverhead) }
        } catch {
            throw ConfigurationError(error.problems + proxyProblems)
        }
        guard proxyProblems.isEmpty else { throw ConfigurationError(proxyProblems) }
        return finished
    }

    /// A `KEY.PATH: reason` line as a problem.
    static func problem(_ line: String) -> ConfigProblem {
        guard let colon = line.range(of: ": ") else { return ConfigProblem(path: "", reason: line) }
        return ConfigProblem(path: String(line[..<colon.lowerBound]), reason: String(line[colon.upperBound...]))
    }

    static func routes(_ routes: [NEIPv4Route]?, _ path: String, _ t: inout SettingsTranslation) -> [Route] {
        (routes ?? []).enumerated().map { i, r in
            t.ipv4Route(destination: r.destinationAddress, subnetMask: r.destinationSubnetMask, gateway: r.gatewayAddress, at: "\(path)[\(i)]")
        }
    }

    static func routes(_ routes: [NEIPv6Route]?, _ path: String, _ t: inout SettingsTranslation) -> [Route] {
        (routes ?? []).enumerated().map { i, r in
            t.ipv6Route(destination: r.destinationAddress, networkPrefixLength: r.destinationNetworkPrefixLength.intValue,
                        gateway: r.gatewayAddress, at: "\(path)[\(i)]")
        }
    }

    /// A model key path in the terms of these objects: NEIPv4Route's `destinationSubnetMask`,
    /// NEIPv6Route's `destinationNetworkPrefixLength`, the host's `interfaceName`, and the MTU that
    /// `tunnelOverheadBytes` gave when `mtu` was nil.
    static func networkExtensionKeyPath(_ path: String, mtuFromOverhead: Bool) -> String {
        switch path {
        case "name": return "interfaceName"
        case "mtu": return mtuFromOverhead ? "mtu (\(TunnelSettings.defaultMTU) − tunnelOverheadBytes)" : "mtu"
        default: break
        }
        if path.hasSuffix(".subnetMask"), path.contains("Routes[") { return path.dropLast("subnetMask".count) + "destinationSubnetMask" }
        if path.hasSuffix(".networkPrefixLength"), path.contains("Routes[") {
            return path.dropLast("networkPrefixLength".count) + "destinationNetworkPrefixLength"
        }
        return path
    }
}
