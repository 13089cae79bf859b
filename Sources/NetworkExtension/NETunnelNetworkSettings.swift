import Foundation

/// NETunnelNetworkSettings: what every tunnel's settings have.
open class NETunnelNetworkSettings: NSObject, @unchecked Sendable {
    // @unchecked Sendable: a plain settings object, as Apple's; the host copies it on apply.
    /// The server's IP address or host name. Always kept off the tunnel (a carrier endpoint).
    open var tunnelRemoteAddress: String
    /// Applied through the DNS backend of the namespace (docs/dns.md).
    open var dnsSettings: NEDNSSettings?
    /// Validated and written as a PAC file and proxy environment values (NEProxySettings+Files.swift).
    open var proxySettings: NEProxySettings?

    public init(tunnelRemoteAddress address: String) {
        tunnelRemoteAddress = address
        super.init()
    }
}

/// NEPacketTunnelNetworkSettings.
open class NEPacketTunnelNetworkSettings: NETunnelNetworkSettings, @unchecked Sendable {
    open var ipv4Settings: NEIPv4Settings?
    open var ipv6Settings: NEIPv6Settings?
    /// The TUN's MTU. Takes precedence over `tunnelOverheadBytes`.
    open var mtu: NSNumber?
    /// With `mtu` nil: the TUN's MTU is 1500 minus this (iOS subtracts it from the
    /// physical interface's MTU; Linux uses 1500 as the physical MTU).
    open var tunnelOverheadBytes: NSNumber?

    public override init(tunnelRemoteAddress address: String) {
        super.init(tunnelRemoteAddress: address)
    }
}

/// NEIPv4Settings.
open class NEIPv4Settings: NSObject, @unchecked Sendable {
    // @unchecked Sendable: a plain settings object, as Apple's.
    open var addresses: [String]
    open var subnetMasks: [String]
    /// Accepted and not used: the TUN is point-to-point, routes go `dev TUN`.
    open var router: String?
    open var includedRoutes: [NEIPv4Route]?
    open var excludedRoutes: [NEIPv4Route]?

    public init(addresses: [String], subnetMasks: [String]) {
        self.addresses = addresses
        self.subnetMasks = subnetMasks
        super.init()
    }
}

/// NEIPv6Settings.
open class NEIPv6Settings: NSObject, @unchecked Sendable {
    // @unchecked Sendable: a plain settings object, as Apple's.
    open var addresses: [String]
    open var networkPrefixLengths: [NSNumber]
    open var includedRoutes: [NEIPv6Route]?
    open var excludedRoutes: [NEIPv6Route]?

    public init(addresses: [String], networkPrefixLengths: [NSNumber]) {
        self.addresses = addresses
        self.networkPrefixLengths = networkPrefixLengths
        super.init()
    }
}

/// NEIPv4Route.
open class NEIPv4Route: NSObject, @unchecked Sendable {
    // @unchecked Sendable: immutable but for gatewayAddress, as Apple's.
    open var destinationAddress: String
    open var destinationSubnetMask: String
    /// `via GATEWAY onlink` on the TUN.
    open var gatewayAddress: String?

    public init(destinationAddress address: String, subnetMask: String) {
        destinationAddress = address
        destinationSubnetMask = subnetMask
        super.init()
    }

    /// 0.0.0.0/0.
    open class func `default`() -> NEIPv4Route {
        NEIPv4Route(destinationAddress: "0.0.0.0", subnetMask: "0.0.0.0")
    }

    open override var description: String { "\(destinationAddress)/\(destinationSubnetMask)" }
}

/// NEIPv6Route.
open class NEIPv6Route: NSObject, @unchecked Sendable {
    // @unchecked Sendable: immutable but for gatewayAddress, as Apple's.
    open var destinationAddress: String
    open var destinationNetworkPrefixLength: NSNumber
    open var gatewayAddress: String?

    public init(destinationAddress address: String, networkPrefixLength: NSNumber) {
        destinationAddress = address
        destinationNetworkPrefixLength = networkPrefixLength
        super.init()
    }

    /// ::/0.
    open class func `default`() -> NEIPv6Route {
        NEIPv6Route(destinationAddress: "::", networkPrefixLength: 0)
    }

    open override var description: String { "\(destinationAddress)/\(destinationNetworkPrefixLength)" }
}

/// NEDNSSettings.
open class NEDNSSettings: NSObject, @unchecked Sendable {
    // @unchecked Sendable: a plain settings object, as Apple's.
    open var servers: [String]
    open var searchDomains: [String]?
    open var domainName: String?
    /// Split DNS: only these domains go to `servers` (docs/dns.md); `[""]` means all.
    open var matchDomains: [String]?
    open var matchDomainsNoSearch: Bool = false

    public init(servers: [String]) {
        self.servers = servers
        super.init()
    }
}
