import Engine
import LinuxSystem

/// The unprivileged user a tunnel's packet plane runs as: one of its own, so that its sockets are its
/// carrier identity (`ip rule uidrange`, nftables `meta skuid`) and no other tunnel's plane shares it.
///
/// Dynamic, as systemd's DynamicUser= is: a uid from a range no account uses (no /etc/passwd entry, so
/// `ps` shows the number), held for the tunnel's life by an flock on /run/tunnelgate/planes/UID.lock
/// that the kernel releases when the engine dies. The group is the same number.
public final class PlaneUser {
    /// The first uid of the range: 0x74670000 ("tg"), 1952907264; 4096 of them.
    public static let base: UInt32 = 0x7467_0000
    public static let count: UInt32 = 4096
    public static let directory = StateDirectory.root + "/planes"

    public let uid: UInt32
    public var gid: UInt32 { uid }
    private let lock: FileLock

    private init(uid: UInt32, lock: FileLock) {
        self.uid = uid
        self.lock = lock
    }

    /// The lowest free uid of the range.
    public static func allocate() throws(SystemCallError) -> PlaneUser {
        try FileSystem.makeDirectory(StateDirectory.root, mode: 0o700)
        try FileSystem.makeDirectory(directory, mode: 0o700)
        for i in 0..<count {
            let uid = base + i
            if let lock = try FileLock.tryAcquire("\(directory)/\(uid).lock") {
                return PlaneUser(uid: uid, lock: lock)
            }
        }
        throw SystemCallError("allocating a packet plane user (all \(count) of \(base)…\(base + count - 1) are in use)", .busy)
    }

    /// Gives the uid back (the engine is done with this tunnel's planes).
    public func release() { lock.releaseAndRemove() }

    deinit { lock.release() }
}
