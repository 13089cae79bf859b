import CTunnelgateShims
import Glibc

/// Small process-level facts and actions, each one libc call.
public enum ProcessControl {
    public static var id: Int32 { getpid() }

    /// getenv(3): the value of the environment variable `name`, nil when it is not set.
    public static func environmentValue(_ name: String) -> String? {
        getenv(name).map { String(cString: $0) }
    }

    /// True when a process with this pid exists (it may belong to another user).
    public static func exists(_ pid: Int32) -> Bool {
        kill(pid, 0) == 0 || errno == EPERM
    }

    public static func signal(_ pid: Int32, _ signal: Int32) throws(SystemCallError) {
        _ = try syscall("kill(\(pid), \(signal))") { kill(pid, signal) }
    }

    /// The inode of the calling thread's network namespace: it names the
    /// namespace for as long as the namespace exists.
    public static func networkNamespaceIdentity() throws(SystemCallError) -> UInt64 {
        var st = stat()
        _ = try syscall("stat(/proc/self/ns/net)") { stat("/proc/thread-self/ns/net", &st) }
        return UInt64(st.st_ino)
    }

    /// The network namespace cookie (SO_NETNS_COOKIE): unlike the inode, it
    /// is never reused while the system runs.
    public static func networkNamespaceCookie() throws(SystemCallError) -> UInt64 {
        let fd = try syscall("socket(AF_UNIX)") { socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue | SOCK_CLOEXEC.rawValue), 0) }
        defer { close(fd) }
        var cookie: UInt64 = 0
        var length = socklen_t(MemoryLayout<UInt64>.size)
        _ = try syscall("getsockopt(SO_NETNS_COOKIE)") { getsockopt(fd, SOL_SOCKET, 71 /* SO_NETNS_COOKIE */, &cookie, &length) }
        return cookie
    }

    /// Moves the calling thread into a new, empty network namespace (tests
    /// use it to get a private kernel to change).
    public static func enterNewNetworkNamespace() throws(SystemCallError) {
        _ = try syscall("unshare(CLONE_NEWNET)") { CTunnelgateShims_unshare_network() }
    }

    /// The CPUs this thread may run on (sched_getaffinity), at least 1.
    public static func usableProcessors() -> Int { Int(CTunnelgateShims_usable_processors()) }

    /// The monotonic clock in seconds.
    public static func monotonicSeconds() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }

    /// Sleeps for `seconds` (used by pollers with short intervals).
    public static func sleep(seconds: Double) {
        var ts = timespec(tv_sec: Int(seconds), tv_nsec: Int((seconds - Double(Int(seconds))) * 1e9))
        var remaining = timespec()
        while nanosleep(&ts, &remaining) == -1 && errno == EINTR { ts = remaining }
    }
}

/// Signal numbers, for `ProcessControl.signal(_:_:)` and its kin.
public enum Signal {
    public static let hangUp = SIGHUP      // SIGHUP
    public static let interrupt = SIGINT   // SIGINT
    public static let kill = SIGKILL       // SIGKILL
    public static let terminate = SIGTERM  // SIGTERM
}

/// File system calls used by the state directory.
public enum FileSystem {
    public static func makeDirectory(_ path: String, mode: mode_t) throws(SystemCallError) {
        if mkdir(path, mode) == -1 && errno != EEXIST { throw SystemCallError("mkdir(\(path))", .current) }
    }

    public static func exists(_ path: String) -> Bool { access(path, F_OK) == 0 }

    /// getcwd(3): the calling process's working directory; nil when it cannot say (it was removed,
    /// or its path is longer than PATH_MAX).
    public static func currentDirectory() -> String? {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX))
        guard getcwd(&buffer, buffer.count) != nil else { return nil }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    public static func remove(_ path: String) {
        _ = unlink(path)
    }

    public static func removeDirectory(_ path: String) {
        _ = rmdir(path)
    }

    public static func rename(_ from: String, _ to: String) throws(SystemCallError) {
        _ = try syscall("rename(\(from), \(to))") { Glibc.rename(from, to) }
    }

    /// The whole file, or nil when it does not exist.
    public static func read(_ path: String) throws(SystemCallError) -> [UInt8]? {
        let fd: FileDescriptor
        do throws(SystemCallError) {
            fd = try FileDescriptor.open(path, O_RDONLY)
        } catch where error.errno == .noSuchEntry {
            return nil
        }
        defer { fd.close() }
        var out: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let n = chunk.withUnsafeMutableBytes { b in
                Result { () throws(SystemCallError) in try fd.read(into: b) ?? 0 }
            }
            let count = try n.get()
            if count == 0 { break }
            out.append(contentsOf: chunk[0..<count])
        }
        return out
    }

    /// Replaces a file atomically (write to a temporary name, fsync, rename).
    public static func writeAtomically(_ path: String, _ bytes: [UInt8], mode: mode_t = 0o600) throws(SystemCallError) {
        let temporary = path + ".tmp"
        let fd = try FileDescriptor.open(temporary, O_WRONLY | O_CREAT | O_TRUNC, mode: mode)
        do throws(SystemCallError) {
            try fd.writeAll(bytes)
            try fd.sync()
        } catch {
            fd.close()
            throw error
        }
        fd.close()
        try rename(temporary, path)
    }

    /// Names in a directory (not . and ..), or [] when it does not exist.
    public static func list(_ path: String) -> [String] {
        guard let dir = opendir(path) else { return [] }
        defer { closedir(dir) }
        var names: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(cString: raw.bindMemory(to: CChar.self).baseAddress!)
            }
            if name != "." && name != ".." { names.append(name) }
        }
        return names
    }
}

extension ProcessControl {
    /// Makes the calling thread nicer by `increment` (setpriority on its thread id: Linux keeps a nice
    /// value per thread), so that under contention for the CPU the process's other threads win. A
    /// thread can always lower its own priority; an error is returned, not thrown, for the caller to log.
    public static func lowerThisThreadsPriority(by increment: Int32) -> SystemCallError? {
        let tid = id_t(CTunnelgateShims_gettid())
        errno = 0
        let current = getpriority(__priority_which_t(PRIO_PROCESS.rawValue), tid)
        if current == -1 && errno != 0 { return SystemCallError("getpriority", .current) }
        do throws(SystemCallError) {
            _ = try syscall("setpriority") { setpriority(__priority_which_t(PRIO_PROCESS.rawValue), tid, min(19, current + increment)) }
        } catch {
            return error
        }
        return nil
    }
}
