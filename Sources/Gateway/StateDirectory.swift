import Glibc
import LinuxSystem

/// Where Tunnelgate keeps what it knows about the tunnels of one network
/// namespace: /run/tunnelgate/net-INODE/. /run is shared by every namespace
/// that `ip netns exec` enters, so the namespace's inode keeps tunnels of
/// the same name in different namespaces apart.
///
/// For each tunnel NAME:
///   NAME.lock     held (flock) by the process that owns the tunnel, for its lifetime
///   NAME.journal  every kernel object, written before it is created; gone after a clean down
///   NAME.state    the owner's pid and NEVPNStatus, rewritten on each transition
///   NAME.log      the detached owner's standard error
public struct StateDirectory: Sendable {
    public static let root = "/run/tunnelgate"
    public let path: String

    /// The directory of the calling thread's namespace; created (owner-only)
    /// when `create` is true, otherwise only named.
    public init(root: String = StateDirectory.root, create: Bool) throws(SystemCallError) {
        let namespace = try ProcessControl.networkNamespaceIdentity()
        path = "\(root)/net-\(namespace)"
        if create {
            try FileSystem.makeDirectory(root, mode: 0o700)
            try FileSystem.makeDirectory(path, mode: 0o700)
        }
    }

    public func lockPath(_ name: String) -> String { "\(path)/\(name).lock" }
    public func journalPath(_ name: String) -> String { "\(path)/\(name).journal" }
    public func statePath(_ name: String) -> String { "\(path)/\(name).state" }
    public func logPath(_ name: String) -> String { "\(path)/\(name).log" }
    /// Serialises slot allocation between tunnels starting at the same time.
    public var allocationLockPath: String { "\(path)/.allocation.lock" }

    /// Names of every tunnel with a journal or a state file here.
    public func tunnelNames() -> [String] {
        var names = Set<String>()
        for file in FileSystem.list(path) {
            for suffix in [".journal", ".state"] where file.hasSuffix(suffix) {
                names.insert(String(file.dropLast(suffix.count)))
            }
        }
        return names.sorted()
    }
}

/// An exclusive flock on a file, held until `release()` or process exit, so
/// the kernel releases it even after SIGKILL.
public final class FileLock {
    private let descriptor: FileDescriptor

    /// Takes the lock, or returns nil when another process holds it.
    public static func tryAcquire(_ path: String) throws(SystemCallError) -> FileLock? {
        let fd = try FileDescriptor.open(path, O_RDWR | O_CREAT, mode: 0o600)
        if try fd.tryLockExclusive() { return FileLock(fd) }
        fd.close()
        return nil
    }

    /// Waits for the lock, polling; nil when `timeout` passes first.
    public static func acquire(_ path: String, timeout: Double) throws(SystemCallError) -> FileLock? {
        let deadline = ProcessControl.monotonicSeconds() + timeout
        while true {
            if let lock = try tryAcquire(path) { return lock }
            if ProcessControl.monotonicSeconds() > deadline { return nil }
            ProcessControl.sleep(seconds: 0.005)
        }
    }

    /// True when some process holds the lock now.
    public static func isHeld(_ path: String) throws(SystemCallError) -> Bool {
        guard FileSystem.exists(path) else { return false }
        guard let lock = try tryAcquire(path) else { return true }
        lock.release()
        return false
    }

    private var released = false

    private init(_ fd: FileDescriptor) { descriptor = fd }

    /// Releases the lock. Idempotent; also done when the lock is deallocated.
    public func release() {
        guard !released else { return }
        released = true
        descriptor.close()
    }

    deinit { release() }
}
