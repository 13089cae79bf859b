import Foundation

/// NEProxyServer: an HTTP proxy (for http and, through CONNECT, https).
open class NEProxyServer: NSObject, NSCopying, @unchecked Sendable {
    // @unchecked Sendable: a settings object, set by its owner before it is applied (as Apple's).
    public let address: String
    public let port: Int
    open var authenticationRequired = false
    /// Kept in the object only: Tunnelgate never writes proxy credentials anywhere (the environment
    /// values would show them to every process and in /proc/PID/environ).
    open var username: String?
    open var password: String?

    public init(address: String, port: Int) {
        self.address = address
        self.port = port
        super.init()
    }

    open func copy(with zone: NSZone? = nil) -> Any {
        let c = NEProxyServer(address: address, port: port)
        c.authenticationRequired = authenticationRequired
        c.username = username
        c.password = password
        return c
    }
}

/// NEProxySettings: the tunnel's HTTP proxy configuration. Linux has no system proxy to enforce it;
/// Tunnelgate writes it where Linux programs look (`TunnelgateProxyFiles`: a PAC file and
/// http_proxy/https_proxy/no_proxy values for the tunnel's namespace) and says what those cannot say.
open class NEProxySettings: NSObject, NSCopying, @unchecked Sendable {
    // @unchecked Sendable: a settings object, as Apple's.
    /// Use a proxy auto-configuration script: `proxyAutoConfigurationURL`, or else
    /// `proxyAutoConfigurationJavaScript`.
    open var autoProxyConfigurationEnabled = false
    open var proxyAutoConfigurationURL: URL?
    open var proxyAutoConfigurationJavaScript: String?
    open var httpEnabled = false
    open var httpServer: NEProxyServer?
    open var httpsEnabled = false
    open var httpsServer: NEProxyServer?
    /// Hosts without a dot go direct.
    open var excludeSimpleHostnames = false
    /// Hosts that go direct: `host.example.com`, `*.example.com` (any name under it), an IP address,
    /// an IPv4 prefix `10.0.0.0/8`.
    open var exceptionList: [String]?
    /// When set, only hosts in these domains use the proxy.
    open var matchDomains: [String]?

    public override init() { super.init() }

    open func copy(with zone: NSZone? = nil) -> Any {
        let c = NEProxySettings()
        c.autoProxyConfigurationEnabled = autoProxyConfigurationEnabled
        c.proxyAutoConfigurationURL = proxyAutoConfigurationURL
        c.proxyAutoConfigurationJavaScript = proxyAutoConfigurationJavaScript
        c.httpEnabled = httpEnabled
        c.httpServer = httpServer?.copy() as? NEProxyServer
        c.httpsEnabled = httpsEnabled
        c.httpsServer = httpsServer?.copy() as? NEProxyServer
        c.excludeSimpleHostnames = excludeSimpleHostnames
        c.exceptionList = exceptionList
        c.matchDomains = matchDomains
        return c
    }
}
