import LinuxSystem

/// Where Tunnelgate keeps what it knows about the tunnels of one network
/// namespace: /run/tunnelgate/net-INODE/. /run is shared by every namespace
/// that `ip netns exec` enters, so the namespace's inode keeps tunnels of
/// the same name in different namespaces apart.
///
/// Namespace inodes are reused once a namespace is gone, so the directory
/// also holds the namespace's cookie (SO_NETNS_COOKIE, never reused while the
/// system runs) in `namespace`; a directory whose cookie is not the current
/// namespace's belongs to a namespace that no longer exists, and is emptied.
///
/// For each tunnel NAME:
///   NAME.lock     held (flock) by the process that owns the tunnel, for its lifetime
///   NAME.journal  every kernel object, written before it is created; gone after a clean down
///   NAME.state    the owner's record (TunnelRecord: pid, NEVPNStatus, counters, the runtime's status),
///                 rewritten atomically; says disconnected until the owner releases NAME.lock
///   NAME.log      the detached owner's standard error
///   NAME.sock     the control socket of the running owner (owner-only, peer credentials checked)
///   NAME.dns      DNSConfig's journal: what the tunnel's DNS settings replaced
///   NAME.lasterror  why the last run ended, when it failed (DisconnectError, JSON)
///   NAME.firewall   the nftables table the owner enforces, as nf_tables messages (FirewallVerification)
///
/// A provider's proxy settings are written for every program of the namespace to read, so not here
/// (this directory is root's alone, and must stay so) but in `proxyPath`, ROOT-proxy/net-INODE/
/// (/run/tunnelgate-proxy/net-INODE/, directories 0755, files 0644): NAME.proxy.pac, NAME.proxy.env,
/// journaled (`file PATH`) like every change of the tunnel's, so `down` and crash recovery remove them.
public struct StateDirectory: Sendable {
    public static let root = "/run/tunnelgate"
    public let path: String
    /// Where the tunnels of this namespace write their proxy files (readable by everyone).
    public let proxyPath: String

    /// The directory of the calling thread's namespace; created (owner-only)
    /// when `create` is true, otherwise only named.
    ///
    /// Both `root` and the namespace's directory must be trusted before anything in them is read or
    /// written: real directories (no symbolic link, on a path of trusted directories: TrustedFile),
    /// owned by root or this user, mode 0700. Anything else is refused in one line
    /// (`SystemCallError(refusing:)`). A directory that does not exist yet, or that this user
    /// cannot reach (`status` as another user), is not refused when `create` is false.
    public init(root: String = StateDirectory.root, create: Bool) throws(SystemCallError) {
        let namespace = try ProcessControl.networkNamespaceIdentity()
        path = "\(root)/net-\(namespace)"
        proxyPath = "\(root)-proxy/net-\(namespace)"
        if create {
            try FileSystem.makeDirectory(root, mode: 0o700)
            try Self.checkTrusted(root, mustExist: true)
            try FileSystem.makeDirectory(path, mode: 0o700)
            try Self.checkTrusted(path, mustExist: true)
        } else {
            try Self.checkTrusted(root, mustExist: false)
            try Self.checkTrusted(path, mustExist: false)
        }
        let cookie = Array("\(try ProcessControl.networkNamespaceCookie())\n".utf8)
        let recorded = try? FileSystem.read("\(path)/namespace")
        isStale = recorded != nil && recorded != cookie
        if create {
            if recorded != cookie {
                // A dead namespace's leftovers: its kernel objects died with it.
                for file in FileSystem.list(path) { FileSystem.remove("\(path)/\(file)") }
                for file in FileSystem.list(proxyPath) { FileSystem.remove("\(proxyPath)/\(file)") }
                try FileSystem.writeAtomically("\(path)/namespace", cookie)
            }
        }
    }

    /// Refuses `directory` unless it is a real directory reached through trusted directories, owned
    /// by root or this user, mode 0700 (nothing for group or others).
    static func checkTrusted(_ directory: String, mustExist: Bool) throws(SystemCallError) {
        let opened: TrustedFile
        do { opened = try TrustedFile.open(directory, expecting: .directory) } catch {
            switch error {
            case .refused(let line): throw SystemCallError(refusing: line)
            case .notFound where !mustExist: return
            case .system(let e) where !mustExist && e.errno == .accessDenied: return
            case .notFound: throw SystemCallError("open(\(directory))", .noSuchEntry)
            case .system(let e): throw e
            }
        }
        defer { opened.close() }
        if opened.resolvedPath != directory {
            throw SystemCallError(refusing: "\(directory): reached through a symbolic link (to \(opened.resolvedPath)); "
                                  + "the state directory must be a directory itself; refusing it")
        }
        if opened.status.permissions & 0o7077 != 0 {
            let digits = String(opened.status.permissions & 0o7777, radix: 8)
            throw SystemCallError(refusing: "\(directory): open to others (mode \(String(repeating: "0", count: max(0, 4 - digits.count)))\(digits), "
                                  + "owner \(opened.status.owner == 0 ? "root" : "uid \(opened.status.owner)")); the state directory must be 0700; refusing it")
        }
    }

    /// True when the directory was left by an earlier namespace with the same inode.
    public let isStale: Bool

    public func lockPath(_ name: String) -> String { "\(path)/\(name).lock" }
    /// A provider's proxy files (ProxyFiles), in the namespace's public proxy directory.
    public func proxyPACPath(_ name: String) -> String { "\(proxyPath)/\(name).proxy.pac" }
    public func proxyEnvironmentPath(_ name: String) -> String { "\(proxyPath)/\(name).proxy.env" }
    public func journalPath(_ name: String) -> String { "\(path)/\(name).journal" }
    public func statePath(_ name: String) -> String { "\(path)/\(name).state" }
    public func logPath(_ name: String) -> String { "\(path)/\(name).log" }
    /// Why the tunnel's last run ended, when it failed (NE's last disconnect error); none after a clean stop.
    public func lastErrorPath(_ name: String) -> String { "\(path)/\(name).lasterror" }
    /// The running tunnel's control socket.
    public func controlPath(_ name: String) -> String { "\(path)/\(name).sock" }
    /// Serialises slot allocation between tunnels starting at the same time.
    public var allocationLockPath: String { "\(path)/.allocation.lock" }

    /// Removes the directory and everything in it (tests, after their namespace).
    public func removeAll() {
        for file in FileSystem.list(path) { FileSystem.remove("\(path)/\(file)") }
        FileSystem.removeDirectory(path)
    }

    /// Names of every tunnel with a journal or a state file here.
    public func tunnelNames() -> [String] {
        guard !isStale else { return [] }
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
        while true {
            let fd = try FileDescriptor.open(path, [.readWrite, .create], mode: 0o600)
            guard try fd.tryLockExclusive() else {
                fd.close()
                return nil
            }
            // The holder may have removed the file between our open and our lock:
            // then this lock guards nothing, and the name is free to take anew.
            if try fd.isSameFile(as: path) { return FileLock(fd, path: path) }
            fd.close()
        }
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

    private let path: String

    private init(_ fd: FileDescriptor, path: String) {
        descriptor = fd
        self.path = path
    }

    /// Removes the lock file, then releases the lock: for a name that is gone.
    public func releaseAndRemove() {
        guard !released else { return }
        FileSystem.remove(path)
        release()
    }

    /// Releases the lock. Idempotent; also done when the lock is deallocated.
    public func release() {
        guard !released else { return }
        released = true
        descriptor.close()
    }

    deinit { release() }
}
