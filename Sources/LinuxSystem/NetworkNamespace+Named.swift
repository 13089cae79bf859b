import CTunnelgateShims
import Glibc

/// Named network namespaces as `ip netns add NAME` and `ip netns del NAME` make and remove them:
/// a file /run/netns/NAME onto which a namespace is bind-mounted.
public enum NamedNetworkNamespaces {
    /// Where iproute2 (and so every tool that takes a namespace name) looks for them.
    public static let directory = "/run/netns"

    public static func path(_ name: String) -> String { "\(directory)/\(name)" }

    /// Creates the namespace NAME. Equivalent to: `ip netns add NAME`. The namespace is made on a
    /// thread of its own (unshare(CLONE_NEWNET) moves only the calling thread), which ends at once;
    /// the caller's namespace is never touched. EEXIST when NAME is taken.
    public static func create(_ name: String) throws(SystemCallError) {
        _ = try syscall("mount(\(directory), MS_SHARED)") { CTunnelgateShims_netns_prepare_directory(directory) }
        let target = path(name)
        let outcome = ThreadOutcome()
        let thread = try SystemThread.spawn {
            outcome.set(CTunnelgateShims_netns_create(target) == 0 ? 0 : errno)
        }
        thread.join()
        let code = outcome.get()
        if code != 0 {
            throw SystemCallError("unshare(CLONE_NEWNET) + mount(\(target), MS_BIND)", Errno(rawValue: code))
        }
    }

    /// Removes the name NAME; the namespace ends once no process and no descriptor holds it.
    /// Equivalent to: `ip netns del NAME`. ENOENT when there is no such name.
    public static func remove(_ name: String) throws(SystemCallError) {
        _ = try syscall("umount2(\(path(name))) + unlink") { CTunnelgateShims_netns_remove(path(name)) }
    }

    /// The names in /run/netns. Equivalent to: `ip netns list` (without the ids).
    public static func names() -> [String] {
        FileSystem.list(directory).sorted()
    }

    /// Prepares the calling thread, already in the namespace NAME, to run a command as
    /// `ip netns exec NAME` would: a mount namespace of its own, /sys of NAME, /etc/netns/NAME/* over /etc.
    public static func enterMountsForExec(_ name: String) throws(SystemCallError) {
        var step = [CChar](repeating: 0, count: 64)
        if CTunnelgateShims_netns_exec_mounts(name, &step) != 0 {
            let e = Errno.current
            throw SystemCallError(String(cString: step), e)
        }
    }

    /// The inode of the namespace named NAME (what /proc/PID/ns/net of its processes links to).
    public static func inode(_ name: String) -> UInt64? {
        var st = stat()
        guard stat(path(name), &st) == 0 else { return nil }
        return UInt64(st.st_ino)
    }
}

/// The errno a namespace thread ended with (written by that thread before `join`, read after).
private final class ThreadOutcome: @unchecked Sendable {
    // @unchecked: written once by the spawned thread, read once after pthread_join (a happens-before edge).
    private var code: Int32 = 0
    func set(_ value: Int32) { code = value }
    func get() -> Int32 { code }
}
