import Glibc

/// What lstat(2)/stat(2) say about a file: its type, permission bits, owner
/// and identity.
public struct FileStatus: Hashable, Sendable {
    public enum Kind: Hashable, Sendable {
        case regular      // S_IFREG
        case directory    // S_IFDIR
        case symbolicLink // S_IFLNK
        case other        // devices, sockets, FIFOs
    }
    public var kind: Kind
    /// The permission bits (and set-id and sticky bits): `st_mode & 07777`.
    public var permissions: mode_t
    public var owner: uid_t
    public var group: gid_t
    /// `st_dev` and `st_ino`: together they name the file (or namespace).
    public var device: UInt64
    public var inode: UInt64
    /// `st_size`: the length of a regular file in bytes.
    public var size: Int64

    init(_ st: stat) {
        switch st.st_mode & S_IFMT {
        case S_IFREG: kind = .regular
        case S_IFDIR: kind = .directory
        case S_IFLNK: kind = .symbolicLink
        default: kind = .other
        }
        permissions = st.st_mode & 0o7777
        owner = st.st_uid
        group = st.st_gid
        device = UInt64(st.st_dev)
        inode = UInt64(st.st_ino)
        size = Int64(st.st_size)
    }
}

extension FileSystem {
    /// lstat(2) (or stat(2) when `followingSymbolicLinks`); nil when the path does not exist.
    public static func status(_ path: String, followingSymbolicLinks: Bool = false) throws(SystemCallError) -> FileStatus? {
        var st = stat()
        do throws(SystemCallError) {
            if followingSymbolicLinks {
                _ = try syscall("stat(\(path))") { stat(path, &st) }
            } else {
                _ = try syscall("lstat(\(path))") { lstat(path, &st) }
            }
        } catch where error.errno == .noSuchEntry || error.errno == .notADirectory {
            return nil
        }
        return FileStatus(st)
    }

    /// readlink(2): the target of a symbolic link, as stored (not resolved).
    public static func symbolicLinkTarget(_ path: String) throws(SystemCallError) -> [UInt8] {
        var size = 256
        while true {
            var buffer = [UInt8](repeating: 0, count: size)
            let n = try syscall("readlink(\(path))") {
                buffer.withUnsafeMutableBufferPointer { b in
                    b.baseAddress!.withMemoryRebound(to: CChar.self, capacity: size) { readlink(path, $0, size) }
                }
            }
            if n < size { return Array(buffer[0..<n]) }
            size *= 4
        }
    }

    /// symlink(2): creates `path` as a symbolic link to `target`.
    public static func createSymbolicLink(at path: String, target: [UInt8]) throws(SystemCallError) {
        let terminated = target.map { CChar(bitPattern: $0) } + [0]
        _ = try syscall("symlink(\(path))") { symlink(terminated, path) }
    }

    /// mkdir(2); false (and no error) when something already exists at `path`.
    public static func createDirectory(_ path: String, mode: mode_t) throws(SystemCallError) -> Bool {
        do throws(SystemCallError) {
            _ = try syscall("mkdir(\(path))") { mkdir(path, mode) }
            return true
        } catch where error.errno == .exists {
            return false
        }
    }

    /// unlink(2); false when there was nothing to remove (ENOENT, or ENOTDIR:
    /// a component of the path is not a directory).
    @discardableResult
    public static func removeFile(_ path: String) throws(SystemCallError) -> Bool {
        do throws(SystemCallError) {
            _ = try syscall("unlink(\(path))") { unlink(path) }
            return true
        } catch where error.errno == .noSuchEntry || error.errno == .notADirectory {
            return false
        }
    }

    /// rmdir(2) of a directory that must be empty; false when there is no
    /// directory there (ENOENT, ENOTDIR). ENOTEMPTY is thrown: something is inside.
    @discardableResult
    public static func removeEmptyDirectory(_ path: String) throws(SystemCallError) -> Bool {
        do throws(SystemCallError) {
            _ = try syscall("rmdir(\(path))") { rmdir(path) }
            return true
        } catch where error.errno == .noSuchEntry || error.errno == .notADirectory {
            return false
        }
    }

    /// fsync(2) of a directory, so that entries created, renamed or removed in
    /// it survive a crash of the machine.
    public static func syncDirectory(_ path: String) throws(SystemCallError) {
        let fd = try FileDescriptor.open(path, O_RDONLY | O_DIRECTORY)
        defer { fd.close() }
        try fd.sync()
    }
}

extension FileDescriptor {
    /// fstat(2).
    public func status() throws(SystemCallError) -> FileStatus {
        var st = stat()
        _ = try syscall("fstat") { fstat(rawValue, &st) }
        return FileStatus(st)
    }

    /// ftruncate(2).
    public func truncate(to length: Int) throws(SystemCallError) {
        _ = try syscall("ftruncate") { ftruncate(rawValue, off_t(length)) }
    }

    /// lseek(2) to an absolute offset.
    public func seek(to offset: Int) throws(SystemCallError) {
        _ = try syscall("lseek") { lseek(rawValue, off_t(offset), SEEK_SET) }
    }

    /// fchmod(2).
    public func setPermissions(_ mode: mode_t) throws(SystemCallError) {
        _ = try syscall("fchmod") { fchmod(rawValue, mode) }
    }

    /// fchown(2).
    public func setOwner(_ owner: uid_t, group: gid_t) throws(SystemCallError) {
        _ = try syscall("fchown") { fchown(rawValue, owner, group) }
    }
}

extension Errno {
    public static let notADirectory = Errno(rawValue: ENOTDIR)       // ENOTDIR
    public static let directoryNotEmpty = Errno(rawValue: ENOTEMPTY) // ENOTEMPTY
    public static let inProgress = Errno(rawValue: EINPROGRESS)      // EINPROGRESS
    public static let addressInUse = Errno(rawValue: EADDRINUSE)     // EADDRINUSE
    public static let connectionRefused = Errno(rawValue: ECONNREFUSED) // ECONNREFUSED
    public static let invalidArgument = Errno(rawValue: EINVAL)      // EINVAL
}
