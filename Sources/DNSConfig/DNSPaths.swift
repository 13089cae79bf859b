/// Where the DNS layer finds and writes the system's files. `root` is
/// prepended to every system path, so tests run against a temporary
/// directory and never touch the real /etc or /run.
public struct DNSPaths: Hashable, Sendable {
    /// Prepended to /etc and /run paths; "" for the real file system.
    public var root: String
    /// The file whose inode names the calling thread's network namespace.
    public var networkNamespace: String

    public init(root: String = "", networkNamespace: String = "/proc/thread-self/ns/net") {
        self.root = root
        self.networkNamespace = networkNamespace
    }

    /// The running system's paths.
    public static let system = DNSPaths()

    /// /etc/resolv.conf.
    public var resolvConf: String { root + "/etc/resolv.conf" }
    /// /etc/netns: `ip netns exec NAME` bind-mounts each file of /etc/netns/NAME/ over /etc.
    public var namespaceConfiguration: String { root + "/etc/netns" }
    /// /etc/netns/NAME.
    public func namespaceConfiguration(_ namespace: String) -> String { namespaceConfiguration + "/" + namespace }
    /// /etc/netns/NAME/resolv.conf.
    public func namespaceResolvConf(_ namespace: String) -> String { namespaceConfiguration(namespace) + "/resolv.conf" }
    /// /run/netns: the named network namespaces (`ip netns add`), one bind-mounted nsfs file each.
    public var namedNamespaces: String { root + "/run/netns" }
    /// systemd-resolved's runtime directory; a resolv.conf that links into it is resolved's.
    public static let resolvedRuntimeDirectory = "/run/systemd/resolve"
    /// resolved's varlink socket: it exists and accepts connections while resolved runs.
    public var resolvedSocket: String { root + Self.resolvedRuntimeDirectory + "/io.systemd.Resolve" }
}
