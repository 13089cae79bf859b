import Foundation
import TunnelgateSettings

/// NetworkExtension's settings objects → Tunnelgate's `TunnelSettings`.
///
/// The objects are written as the JSON configuration they stand for (same key
/// names, docs/configuration.md) and read back with `TunnelSettings.parse`, so
/// the provider's settings get exactly the validation, and the messages with
/// key paths, of a configuration file.
public struct TunnelgateHostConfiguration: Sendable, Equatable {
    /// The TUN's name (`tg0`), also the tunnel's name for `tunnelgate status` and `down`.
    public var interfaceName: String
    /// More carrier endpoints to keep off the tunnel, besides `tunnelRemoteAddress`.
    public var carrierEndpoints: [String]
    /// NEVPNProtocol.includeAllNetworks / excludeLocalNetworks (the manager's side on iOS).
    public var includeAllNetworks: Bool
    public var excludeLocalNetworks: Bool

    public init(interfaceName: String = TunnelSettings.defaultName, carrierEndpoints: [String] = [],
                includeAllNetworks: Bool = false, excludeLocalNetworks: Bool = false) {
        self.interfaceName = interfaceName
        self.carrierEndpoints = carrierEndpoints
        self.includeAllNetworks = includeAllNetworks
        self.excludeLocalNetworks = excludeLocalNetworks
    }
}

extension NETunnelNetworkSettings {
    /// The settings as Tunnelgate's model; a ConfigurationError names each
    /// offending property by its NetworkExtension key path (`ipv4Settings.subnetMasks[0]`).
    public func tunnelgateSettings(_ host: TunnelgateHostConfiguration = .init()) throws(ConfigurationError) -> TunnelSettings {
        try TunnelSettings.parse(json: Array(tunnelgateJSON(host).encoded().utf8))
    }

    func tunnelgateJSON(_ host: TunnelgateHostConfiguration) -> JSONOut {
        var top: [(String, JSONOut)] = [("name", .string(host.interfaceName)),
                                        ("tunnelRemoteAddress", .string(tunnelRemoteAddress))]
        if let packet = self as? NEPacketTunnelNetworkSettings {
            if let mtu = packet.mtu {
                top.append(("mtu", .number(mtu.intValue)))
            } else if let overhead = packet.tunnelOverheadBytes {
                top.append(("mtu", .number(TunnelSettings.defaultMTU - overhead.intValue)))
            }
            if let v4 = packet.ipv4Settings {
                var o: [(String, JSONOut)] = [("addresses", .array(v4.addresses.map(JSONOut.string))),
                                              ("subnetMasks", .array(v4.subnetMasks.map(JSONOut.string)))]
                if let r = v4.includedRoutes { o.append(("includedRoutes", .array(r.map(\.json)))) }
                if let r = v4.excludedRoutes { o.append(("excludedRoutes", .array(r.map(\.json)))) }
                top.append(("ipv4Settings", .object(o)))
            }
            if let v6 = packet.ipv6Settings {
                var o: [(String, JSONOut)] = [("addresses", .array(v6.addresses.map(JSONOut.string))),
                                              ("networkPrefixLengths", .array(v6.networkPrefixLengths.map { .number($0.intValue) }))]
                if let r = v6.includedRoutes { o.append(("includedRoutes", .array(r.map(\.json)))) }
                if let r = v6.excludedRoutes { o.append(("excludedRoutes", .array(r.map(\.json)))) }
                top.append(("ipv6Settings", .object(o)))
            }
        }
        if let dns = dnsSettings {
            var o: [(String, JSONOut)] = [("servers", .array(dns.servers.map(JSONOut.string)))]
            if let s = dns.searchDomains { o.append(("searchDomains", .array(s.map(JSONOut.string)))) }
            if let m = dns.matchDomains { o.append(("matchDomains", .array(m.map(JSONOut.string)))) }
            if dns.matchDomainsNoSearch { o.append(("matchDomainsNoSearch", .bool(true))) }
            if let d = dns.domainName { o.append(("domainName", .string(d))) }
            top.append(("dnsSettings", .object(o)))
        }
        if host.includeAllNetworks { top.append(("includeAllNetworks", .bool(true))) }
        if host.excludeLocalNetworks { top.append(("excludeLocalNetworks", .bool(true))) }
        if !host.carrierEndpoints.isEmpty { top.append(("carrierEndpoints", .array(host.carrierEndpoints.map(JSONOut.string)))) }
        return .object(top)
    }
}

extension NEIPv4Route {
    var json: JSONOut {
        var o: [(String, JSONOut)] = [("destinationAddress", .string(destinationAddress)),
                                      ("subnetMask", .string(destinationSubnetMask))]
        if let g = gatewayAddress { o.append(("gatewayAddress", .string(g))) }
        return .object(o)
    }
}

extension NEIPv6Route {
    var json: JSONOut {
        var o: [(String, JSONOut)] = [("destinationAddress", .string(destinationAddress)),
                                      ("networkPrefixLength", .number(destinationNetworkPrefixLength.intValue))]
        if let g = gatewayAddress { o.append(("gatewayAddress", .string(g))) }
        return .object(o)
    }
}

/// The little JSON the conversion writes (ordered keys, so problems come in property order).
indirect enum JSONOut {
    case string(String)
    case number(Int)
    case bool(Bool)
    case array([JSONOut])
    case object([(String, JSONOut)])

    func encoded() -> String {
        switch self {
        case .string(let s): return Self.quote(s)
        case .number(let n): return String(n)
        case .bool(let b): return b ? "true" : "false"
        case .array(let a): return "[" + a.map { $0.encoded() }.joined(separator: ",") + "]"
        case .object(let o): return "{" + o.map { Self.quote($0.0) + ":" + $0.1.encoded() }.joined(separator: ",") + "}"
        }
    }

    static func quote(_ s: String) -> String { JSONValue.quoted(s) }
}
