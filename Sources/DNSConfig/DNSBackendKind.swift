/// How DNS is configured where Tunnelgate runs, and so how a tunnel's
/// NEDNSSettings are applied there.
public enum DNSBackendKind: Hashable, Sendable, CustomStringConvertible {
    /// systemd-resolved manages /etc/resolv.conf: per-link servers and
    /// domains on the tunnel interface.
    case systemdResolved
    /// A named network namespace: /etc/netns/NAME/resolv.conf, which
    /// `ip netns exec NAME` bind-mounts over /etc/resolv.conf.
    case namespaceResolvConf(namespace: String)
    /// /etc/resolv.conf itself.
    case resolvConf

    /// What `tunnelgate status` prints.
    public var description: String {
        switch self {
        case .systemdResolved: "systemd-resolved"
        case .namespaceResolvConf(let namespace): "netns resolv.conf (/etc/netns/\(namespace)/resolv.conf)"
        case .resolvConf: "resolv.conf (/etc/resolv.conf)"
        }
    }

    /// The file a resolv.conf backend writes; nil for systemd-resolved.
    public func resolvConfPath(_ paths: DNSPaths) -> String? {
        switch self {
        case .systemdResolved: nil
        case .namespaceResolvConf(let namespace): paths.namespaceResolvConf(namespace)
        case .resolvConf: paths.resolvConf
        }
    }
}
