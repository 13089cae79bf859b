import TunnelgateSettings

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
    /// The addresses of resolved's stub listeners (127.0.0.53; 127.0.0.54, its proxy-only one):
    /// a resolv.conf that names only these is resolved's too.
    public static let resolvedStubAddresses: Set<IPAddress> = [.v4(IPv4Address(0x7f00_0035)), .v4(IPv4Address(0x7f00_0036))]
    /// The D-Bus system bus where resolved is asked: with no root, the
    /// system's (DBUS_SYSTEM_BUS_ADDRESS, else /run/dbus/system_bus_socket);
    /// with a root, the socket at ROOT/run/dbus/system_bus_socket.
    public var systemBusAddress: String {
        root.isEmpty ? SystemBus.systemAddress : "unix:path=" + SystemBus.escaped(root + SystemBus.defaultSocket)
    }
    /// /proc/PID/ns/net: the network namespace of process PID (under the root, for tests).
    public func networkNamespace(ofProcess pid: UInt32) -> String { root + "/proc/\(pid)/ns/net" }
}
