import CTunnelgateShims
import Glibc

extension NetworkNamespace {
    /// The network namespace at `path`, any namespace file: /run/netns/NAME, /proc/PID/ns/net,
    /// dockerd's /var/run/docker/netns/ID. `label` is what it is called in messages and records (the
    /// argument it was given as). The file is checked through the descriptor kept: a file that is no
    /// namespace (NS_GET_NSTYPE fails: ENOTTY) or a namespace of another type (EINVAL) is refused, and
    /// nothing is held. Equivalent to what `nsenter --net=PATH` opens.
    public convenience init(path: String, label: String) throws(SystemCallError) {
        let fd = try FileDescriptor.open(path, O_RDONLY | O_CLOEXEC)
        let type = CTunnelgateShims_namespace_type(fd.rawValue)
        if type < 0 {
            let e = Errno.current
            fd.close()
            throw SystemCallError("ioctl(\(path), NS_GET_NSTYPE) (not a namespace file)", e)
        }
        guard type == CTunnelgateShims_clone_newnet() else {
            fd.close()
            throw SystemCallError("ioctl(\(path), NS_GET_NSTYPE) (a namespace, but not a network namespace)", .invalidArgument)
        }
        self.init(descriptor: fd, name: label)
    }

    /// The namespace's inode (what /proc/PID/ns/net of its processes links to, net:[INODE]), from the
    /// descriptor held.
    public var inode: UInt64 {
        var st = stat()
        // fstat of a descriptor this object owns cannot fail but for a bug (EBADF traps in syscall()).
        _ = try? syscall("fstat(netns)") { fstat(descriptor.rawValue, &st) }
        return UInt64(st.st_ino)
    }
}
