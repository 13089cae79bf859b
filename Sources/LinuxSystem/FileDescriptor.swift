import CTunnelgateShims
import Glibc

/// A file descriptor owned by this value's holder. Non-owning uses take the
/// raw value; `close()` must be called exactly once by the owner.
public struct FileDescriptor: Hashable, Sendable {
    public let rawValue: Int32
    public init(rawValue: Int32) { self.rawValue = rawValue }

    /// Descriptors 0, 1 and 2 (STDIN_FILENO, STDOUT_FILENO, STDERR_FILENO); not owned.
    public static let standardInput = FileDescriptor(rawValue: STDIN_FILENO)
    public static let standardOutput = FileDescriptor(rawValue: STDOUT_FILENO)
    public static let standardError = FileDescriptor(rawValue: STDERR_FILENO)

    /// isatty(3): whether the descriptor is a terminal.
    public var isTerminal: Bool { isatty(rawValue) == 1 }

    public static func open(_ path: String, _ flags: Int32, mode: mode_t = 0) throws(SystemCallError) -> FileDescriptor {
        FileDescriptor(rawValue: try syscall("open(\(path))") { Glibc.open(path, flags | O_CLOEXEC, mode) })
    }

    public func close() {
        _ = Glibc.close(rawValue)
    }

    /// Reads into `buffer`; nil when the descriptor is non-blocking and has nothing.
    public func read(into buffer: UnsafeMutableRawBufferPointer) throws(SystemCallError) -> Int? {
        do throws(SystemCallError) {
            return try syscall("read") { Glibc.read(rawValue, buffer.baseAddress, buffer.count) }
        } catch where error.errno == .wouldBlock {
            return nil
        }
    }

    public func write(_ buffer: UnsafeRawBufferPointer) throws(SystemCallError) -> Int {
        try syscall("write") { Glibc.write(rawValue, buffer.baseAddress, buffer.count) }
    }

    /// Writes all of `bytes`, looping over short writes.
    public func writeAll(_ bytes: [UInt8]) throws(SystemCallError) {
        var offset = 0
        while offset < bytes.count {
            let written = bytes.withUnsafeBytes { b in
                Result { () throws(SystemCallError) in try write(UnsafeRawBufferPointer(rebasing: b[offset...])) }
            }
            offset += try written.get()
        }
    }

    public func sync() throws(SystemCallError) {
        _ = try syscall("fsync") { Glibc.fsync(rawValue) }
    }

    /// Takes an exclusive advisory lock without waiting; false when another
    /// open file description holds it.
    public func tryLockExclusive() throws(SystemCallError) -> Bool {
        do throws(SystemCallError) {
            _ = try syscall("flock") { CTunnelgateShims_flock(rawValue, LOCK_EX | LOCK_NB) }
            return true
        } catch where error.errno == .wouldBlock {
            return false
        }
    }

    /// True when `path` names the file this descriptor has open.
    public func isSameFile(as path: String) throws(SystemCallError) -> Bool {
        var mine = stat(), theirs = stat()
        _ = try syscall("fstat") { fstat(rawValue, &mine) }
        let rc: Int32 = stat(path, &theirs)
        if rc != 0 { return false }
        return mine.st_dev == theirs.st_dev && mine.st_ino == theirs.st_ino
    }

    public func setNonBlocking(_ on: Bool) throws(SystemCallError) {
        let flags = try syscall("fcntl(F_GETFL)") { fcntl(rawValue, F_GETFL) }
        _ = try syscall("fcntl(F_SETFL)") { fcntl(rawValue, F_SETFL, on ? flags | O_NONBLOCK : flags & ~O_NONBLOCK) }
    }

    public func setCloseOnExec(_ on: Bool) throws(SystemCallError) {
        let flags = try syscall("fcntl(F_GETFD)") { fcntl(rawValue, F_GETFD) }
        _ = try syscall("fcntl(F_SETFD)") { fcntl(rawValue, F_SETFD, on ? flags | FD_CLOEXEC : flags & ~FD_CLOEXEC) }
    }
}
