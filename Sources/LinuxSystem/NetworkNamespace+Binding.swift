import CTunnelgateShims
import Glibc

extension NamedNetworkNamespaces {
    /// Names the network namespace at `source` (any path to one: /run/netns/X, /proc/PID/ns/net,
    /// /var/run/docker/netns/ID) NAME, by bind-mounting it onto /run/netns/NAME, so that every tool
    /// that takes a namespace name reaches it and it lives at least as long as the name. Equivalent
    /// to: `touch /run/netns/NAME && mount --bind SOURCE /run/netns/NAME` (`ip netns attach` does it
    /// for a pid). The file bound is the one checked: a `source` that is not a network namespace is
    /// refused (EINVAL, or ENOTTY when it is no namespace at all) and nothing is made. EEXIST when NAME
    /// is taken.
    public static func bind(_ name: String, to source: String) throws(SystemCallError) {
        let fd = try FileDescriptor.open(source, O_RDONLY | O_CLOEXEC)
        defer { fd.close() }
        let type = try syscall("ioctl(\(source), NS_GET_NSTYPE)") { CTunnelgateShims_namespace_type(fd.rawValue) }
        guard type == CTunnelgateShims_clone_newnet() else {
            throw SystemCallError("ioctl(\(source), NS_GET_NSTYPE) (a namespace, but not a network namespace)", .invalidArgument)
        }
        _ = try syscall("mount(\(directory), MS_SHARED)") { CTunnelgateShims_netns_prepare_directory(directory) }
        _ = try syscall("mount(\(source), \(path(name)), MS_BIND)") { CTunnelgateShims_namespace_bind(fd.rawValue, path(name)) }
    }

    /// The inode of the namespace at `path` (what /proc/PID/ns/net of its processes links to), nil
    /// when there is nothing there.
    public static func inode(atPath path: String) -> UInt64? {
        var st = stat()
        guard stat(path, &st) == 0 else { return nil }
        return UInt64(st.st_ino)
    }

    /// True when `path` is a network namespace: a namespace file (nsfs) of type CLONE_NEWNET.
    public static func isNetworkNamespace(_ path: String) -> Bool {
        guard let fd = try? FileDescriptor.open(path, O_RDONLY | O_CLOEXEC) else { return false }
        defer { fd.close() }
        return CTunnelgateShims_namespace_type(fd.rawValue) == CTunnelgateShims_clone_newnet()
    }
}
