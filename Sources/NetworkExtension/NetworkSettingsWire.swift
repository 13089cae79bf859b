import Foundation

/// NEPacketTunnelNetworkSettings as they cross from a provider's packet plane to the host's engine:
/// plain values, no behaviour. The engine rebuilds the settings objects from them and translates and
/// validates those itself (NETunnelNetworkSettings+Tunnelgate), so the plane's word is never trusted
/// beyond what the objects say.
struct NetworkSettingsWire: Codable, Equatable {
    struct Route: Codable, Equatable {
        var destination: String
        /// An IPv4 mask or an IPv6 prefix length, as the route object has it.
        var mask: String?
        var prefixLength: Int?
        var gateway: String?
    }
    struct IPv4: Codable, Equatable {
        var addresses: [String]
        var subnetMasks: [String]
        var router: String?
        var included: [Route]?
        var excluded: [Route]?
    }
    struct IPv6: Codable, Equatable {
        var addresses: [String]
        var prefixLengths: [Int]
        var included: [Route]?
        var excluded: [Route]?
    }
    struct DNS: Codable, Equatable {
        var servers: [String]
        var searchDomains: [String]?
        var domainName: String?
        var matchDomains: [String]?
        var matchDomainsNoSearch: Bool
    }

    /// NEProxySettings without any credential: the engine never writes one, so none crosses.
    struct Proxy: Codable, Equatable {
        struct Server: Codable, Equatable {
            var address: String
            var port: Int
            var authenticationRequired: Bool
        }
        var autoProxyConfigurationEnabled: Bool
        var pacURL: String?
        var pacScript: String?
        var httpEnabled: Bool
        var http: Server?
        var httpsEnabled: Bool
        var https: Server?
        var excludeSimpleHostnames: Bool
        var exceptionList: [String]?
        var matchDomains: [String]?
    }

    var tunnelRemoteAddress: String
    var proxy: Proxy?
    var packetTunnel: Bool
    var ipv4: IPv4?
    var ipv6: IPv6?
    var dns: DNS?
    var mtu: Int?
    var tunnelOverheadBytes: Int?

    init(_ s: NETunnelNetworkSettings) {
        tunnelRemoteAddress = s.tunnelRemoteAddress
        dns = s.dnsSettings.map {
            DNS(servers: $0.servers, searchDomains: $0.searchDomains, domainName: $0.domainName,
                matchDomains: $0.matchDomains, matchDomainsNoSearch: $0.matchDomainsNoSearch)
        }
        proxy = s.proxySettings.map { p in
            func server(_ s: NEProxyServer?) -> Proxy.Server? {
                s.map { Proxy.Server(address: $0.address, port: $0.port, authenticationRequired: $0.authenticationRequired) }
            }
            return Proxy(autoProxyConfigurationEnabled: p.autoProxyConfigurationEnabled, pacURL: p.proxyAutoConfigurationURL?.absoluteString,
                         pacScript: p.proxyAutoConfigurationJavaScript, httpEnabled: p.httpEnabled, http: server(p.httpServer),
                         httpsEnabled: p.httpsEnabled, https: server(p.httpsServer), excludeSimpleHostnames: p.excludeSimpleHostnames,
                         exceptionList: p.exceptionList, matchDomains: p.matchDomains)
        }
        guard let p = s as? NEPacketTunnelNetworkSettings else {
            packetTunnel = false
            return
        }
        packetTunnel = true
        mtu = p.mtu?.intValue
        tunnelOverheadBytes = p.tunnelOverheadBytes?.intValue
        func route4(_ r: NEIPv4Route) -> Route { Route(destination: r.destinationAddress, mask: r.destinationSubnetMask, gateway: r.gatewayAddress) }
        func route6(_ r: NEIPv6Route) -> Route {
            Route(destination: r.destinationAddress, prefixLength: r.destinationNetworkPrefixLength.intValue, gateway: r.gatewayAddress)
        }
        ipv4 = p.ipv4Settings.map {
            IPv4(addresses: $0.addresses, subnetMasks: $0.subnetMasks, router: $0.router,
                 included: $0.includedRoutes?.map(route4), excluded: $0.excludedRoutes?.map(route4))
        }
        ipv6 = p.ipv6Settings.map {
            IPv6(addresses: $0.addresses, prefixLengths: $0.networkPrefixLengths.map(\.intValue),
                 included: $0.includedRoutes?.map(route6), excluded: $0.excludedRoutes?.map(route6))
        }
    }

    /// The settings objects again (the engine's side).
    var settings: NETunnelNetworkSettings {
        let out: NETunnelNetworkSettings
        if packetTunnel {
            let p = NEPacketTunnelNetworkSettings(tunnelRemoteAddress: tunnelRemoteAddress)
            p.mtu = mtu.map { NSNumber(value: $0) }
            p.tunnelOverheadBytes = tunnelOverheadBytes.map { NSNumber(value: $0) }
            func route4(_ r: Route) -> NEIPv4Route {
                let o = NEIPv4Route(destinationAddress: r.destination, subnetMask: r.mask ?? "")
                o.gatewayAddress = r.gateway
                return o
            }
            func route6(_ r: Route) -> NEIPv6Route {
                let o = NEIPv6Route(destinationAddress: r.destination, networkPrefixLength: NSNumber(value: r.prefixLength ?? -1))
                o.gatewayAddress = r.gateway
                return o
            }
            if let v4 = ipv4 {
                let o = NEIPv4Settings(addresses: v4.addresses, subnetMasks: v4.subnetMasks)
                o.router = v4.router
                o.includedRoutes = v4.included?.map(route4)
                o.excludedRoutes = v4.excluded?.map(route4)
                p.ipv4Settings = o
            }
            if let v6 = ipv6 {
                let o = NEIPv6Settings(addresses: v6.addresses, networkPrefixLengths: v6.prefixLengths.map { NSNumber(value: $0) })
                o.includedRoutes = v6.included?.map(route6)
                o.excludedRoutes = v6.excluded?.map(route6)
                p.ipv6Settings = o
            }
            out = p
        } else {
            out = NETunnelNetworkSettings(tunnelRemoteAddress: tunnelRemoteAddress)
        }
        out.proxySettings = proxy.map { w in
            func server(_ s: Proxy.Server?) -> NEProxyServer? {
                s.map {
                    let o = NEProxyServer(address: $0.address, port: $0.port)
                    o.authenticationRequired = $0.authenticationRequired
                    return o
                }
            }
            let p = NEProxySettings()
            p.autoProxyConfigurationEnabled = w.autoProxyConfigurationEnabled
            // A URL the plane sent that Foundation cannot read stays a problem, not a silent nil.
            p.proxyAutoConfigurationURL = w.pacURL.map { URL(string: $0) ?? URL(fileURLWithPath: "/unreadable URL") }
            p.proxyAutoConfigurationJavaScript = w.pacScript
            p.httpEnabled = w.httpEnabled
            p.httpServer = server(w.http)
            p.httpsEnabled = w.httpsEnabled
            p.httpsServer = server(w.https)
            p.excludeSimpleHostnames = w.excludeSimpleHostnames
            p.exceptionList = w.exceptionList
            p.matchDomains = w.matchDomains
            return p
        }
        out.dnsSettings = dns.map {
            let d = NEDNSSettings(servers: $0.servers)
            d.searchDomains = $0.searchDomains
            d.domainName = $0.domainName
            d.matchDomains = $0.matchDomains
            d.matchDomainsNoSearch = $0.matchDomainsNoSearch
            return d
        }
        return out
    }
}
