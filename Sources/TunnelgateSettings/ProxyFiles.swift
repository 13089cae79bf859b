/// What a provider's proxy settings (NEProxySettings) became: the texts the engine writes for the
/// tunnel's namespace, where Linux programs look for a proxy, and what those files cannot say. Linux
/// has no system proxy: nothing here is enforced, a program that reads neither file goes direct.
/// Made by NetworkExtension's `TunnelgateProxyFiles`; never holds a proxy's credentials.
public struct ProxyFiles: Sendable, Equatable {
    /// A proxy auto-configuration script (`FindProxyForURL`), written as `NAME.proxy.pac`.
    public var pac: String?
    /// Where the provider's own PAC script is (`proxyAutoConfigurationURL`): named, never fetched.
    public var pacURL: String?
    /// `NAME=value` lines (`http_proxy`, `https_proxy`, `no_proxy` …), written as `NAME.proxy.env`;
    /// nil when the settings give no values.
    public var environment: String?
    /// What the settings say that the files cannot, one line each (shown by `tunnelgate status`).
    public var notes: [String]

    public init(pac: String? = nil, pacURL: String? = nil, environment: String? = nil, notes: [String] = []) {
        self.pac = pac
        self.pacURL = pacURL
        self.environment = environment
        self.notes = notes
    }
}
