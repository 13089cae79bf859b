import CTunnelgateShims
import Glibc

extension ProcessControl {
    /// getppid(2).
    public static var parentID: Int32 { CTunnelgateShims_parent_pid() }

    /// execvp(3): replaces this process with `arguments[0]` found on PATH. Returns only by throwing.
    public static func replaceProcess(with arguments: [String]) throws(SystemCallError) -> Never {
        var argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
        _ = CTunnelgateShims_execvp(arguments[0], &argv)
        let e = Errno.current
        argv.forEach { free($0) }
        throw SystemCallError("execvp(\(arguments[0]))", e)
    }

    /// The start time of process `pid` in clock ticks since boot (field 22 of /proc/PID/stat), which
    /// with the pid names a process uniquely: a pid reused later has another start time. Nil when
    /// there is no such process.
    public static func startTime(of pid: Int32) -> UInt64? {
        guard let bytes = try? FileSystem.read("/proc/\(pid)/stat") else { return nil }
        let text = String(decoding: bytes, as: UTF8.self)
        // The command name (field 2) is in parentheses and may hold spaces: count from the last ')'.
        guard let close = text.lastIndex(of: ")") else { return nil }
        let fields = text[text.index(after: close)...].split(separator: " ")
        // fields[0] is field 3 (state); field 22 is fields[19].
        guard fields.count > 19 else { return nil }
        return UInt64(fields[19])
    }

    /// The short command name of `pid` (/proc/PID/comm), nil when it is gone.
    public static func commandName(of pid: Int32) -> String? {
        guard let bytes = try? FileSystem.read("/proc/\(pid)/comm") else { return nil }
        return String(decoding: bytes, as: UTF8.self).trimmingTrailingNewline()
    }

    /// The command line of `pid` (/proc/PID/cmdline), nil when it is gone.
    public static func commandLine(of pid: Int32) -> [String]? {
        guard let bytes = try? FileSystem.read("/proc/\(pid)/cmdline") else { return nil }
        return bytes.split(separator: 0, omittingEmptySubsequences: false).dropLast().map { String(decoding: $0, as: UTF8.self) }
    }

    /// True when `pid` is a zombie (exited, not yet reaped) or gone.
    public static func hasExited(_ pid: Int32) -> Bool {
        guard let bytes = try? FileSystem.read("/proc/\(pid)/stat") else { return true }
        let text = String(decoding: bytes, as: UTF8.self)
        guard let close = text.lastIndex(of: ")") else { return true }
        return text[text.index(after: close)...].split(separator: " ").first == "Z"
    }

    /// Every process whose network namespace has this inode (/proc/PID/ns/net). Equivalent to:
    /// `ip netns pids NAME`.
    public static func processes(inNetworkNamespace inode: UInt64) -> [Int32] {
        var out: [Int32] = []
        for entry in FileSystem.list("/proc") {
            guard let pid = Int32(entry) else { continue }
            var st = stat()
            if stat("/proc/\(pid)/ns/net", &st) == 0, UInt64(st.st_ino) == inode { out.append(pid) }
        }
        return out.sorted()
    }

    /// Every pid in /proc.
    public static func allProcesses() -> [Int32] {
        FileSystem.list("/proc").compactMap { Int32($0) }.sorted()
    }
}

extension String {
    func trimmingTrailingNewline() -> String {
        var s = self
        while s.hasSuffix("\n") { s.removeLast() }
        return s
    }
}

extension FileSystem {
    /// Writes `text` to a file (created with `mode`, truncated), e.g. a sysctl under /proc/sys.
    public static func write(_ path: String, _ text: String, mode: mode_t = 0o644) throws(SystemCallError) {
        let fd = try FileDescriptor.open(path, O_WRONLY | O_CREAT | O_TRUNC, mode: mode)
        defer { fd.close() }
        try fd.writeAll(Array(text.utf8))
    }

    /// `mkdir -p`.
    public static func makeDirectories(_ path: String, mode: mode_t = 0o755) throws(SystemCallError) {
        var current = path.hasPrefix("/") ? "" : "."
        for part in path.split(separator: "/") {
            current += "/" + part
            try makeDirectory(current, mode: mode)
        }
    }

    /// `rm -rf`: removes `path` and everything under it; a missing path is not an error.
    public static func removeTree(_ path: String) {
        var st = stat()
        guard lstat(path, &st) == 0 else { return }
        if st.st_mode & S_IFMT == S_IFDIR {
            for name in list(path) { removeTree("\(path)/\(name)") }
            _ = rmdir(path)
        } else {
            _ = unlink(path)
        }
    }

    /// True when `path` is a directory (symbolic links not followed).
    public static func isDirectory(_ path: String) -> Bool {
        var st = stat()
        return lstat(path, &st) == 0 && st.st_mode & S_IFMT == S_IFDIR
    }
}

extension ProcessControl {
    /// exit(3): flushes standard output and ends the process.
    public static func exit(_ code: Int32) -> Never { Glibc.exit(code) }

    /// fflush(NULL): what print(_:) buffered goes out now (before an exec or a fork).
    public static func flushStandardOutput() { fflush(nil) }

    /// Writes `text` to standard error at once.
    public static func writeStandardError(_ text: String) {
        let fd = FileDescriptor(rawValue: 2)
        try? fd.writeAll(Array(text.utf8))
    }

    /// posix_spawnp(3) of `arguments[0]` (searched on PATH) in the calling thread's network
    /// namespace, with no signal blocked and SIGINT/SIGTERM at their defaults whatever the caller
    /// does with them. Standard input is /dev/null; standard output and error are the caller's, or
    /// the files named (created 0600, truncated). With `newProcessGroup` the child leads a process
    /// group of its own (its pid), which `signalGroup` reaches with everything it starts.
    /// `environment` nil: the caller's. With `inheritStandardInput` standard input is the caller's
    /// too (`tunnelgate exec`'s command). Returns the child's pid.
    public static func spawnProcess(_ arguments: [String], environment: [String]? = nil, standardOutput: String? = nil,
                                    standardError: String? = nil, newProcessGroup: Bool = false,
                                    inheritStandardInput: Bool = false) throws(SystemCallError) -> Int32 {
        var actions = posix_spawn_file_actions_t()
        var rc = posix_spawn_file_actions_init(&actions)
        guard rc == 0 else { throw SystemCallError("posix_spawn_file_actions_init", Errno(rawValue: rc)) }
        defer { posix_spawn_file_actions_destroy(&actions) }
        var opens: [(Int32, String, Int32)] = inheritStandardInput ? [] : [(0, "/dev/null", O_RDONLY)]
        if let standardOutput { opens.append((1, standardOutput, O_WRONLY | O_CREAT | O_TRUNC)) }
        if let standardError { opens.append((2, standardError, O_WRONLY | O_CREAT | O_TRUNC)) }
        for (fd, file, flags) in opens {
            rc = posix_spawn_file_actions_addopen(&actions, fd, file, flags, 0o600)
            guard rc == 0 else { throw SystemCallError("posix_spawn_file_actions_addopen(\(file))", Errno(rawValue: rc)) }
        }
        var attributes = posix_spawnattr_t()
        rc = posix_spawnattr_init(&attributes)
        guard rc == 0 else { throw SystemCallError("posix_spawnattr_init", Errno(rawValue: rc)) }
        defer { posix_spawnattr_destroy(&attributes) }
        var empty = sigset_t(), defaults = sigset_t()
        sigemptyset(&empty)
        sigemptyset(&defaults)
        sigaddset(&defaults, SIGINT)
        sigaddset(&defaults, SIGTERM)
        sigaddset(&defaults, SIGPIPE)
        var flags = Int32(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF)
        if newProcessGroup { flags |= Int32(POSIX_SPAWN_SETPGROUP) }
        posix_spawnattr_setsigmask(&attributes, &empty)
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setpgroup(&attributes, 0)
        rc = posix_spawnattr_setflags(&attributes, Int16(flags))
        guard rc == 0 else { throw SystemCallError("posix_spawnattr_setflags", Errno(rawValue: rc)) }
        var argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var envp: [UnsafeMutablePointer<CChar>?]? = environment.map { $0.map { strdup($0) } + [nil] }
        defer { envp?.forEach { free($0) } }
        var pid: pid_t = 0
        if envp != nil {
            rc = posix_spawnp(&pid, arguments[0], &actions, &attributes, &argv, &envp!)
        } else {
            rc = posix_spawnp(&pid, arguments[0], &actions, &attributes, &argv, environ)
        }
        guard rc == 0 else { throw SystemCallError("posix_spawnp(\(arguments[0]))", Errno(rawValue: rc)) }
        return pid
    }

    /// kill(-pgid, signal): every process of the group.
    public static func signalGroup(_ pgid: Int32, _ signal: Int32) {
        _ = kill(-pgid, signal)
    }

    /// The environment as KEY=VALUE strings.
    public static func environment() -> [String] {
        var out: [String] = []
        var p = environ
        while let entry = p.pointee {
            out.append(String(cString: entry))
            p += 1
        }
        return out
    }

    /// The effective uid.
    public static var effectiveUserID: UInt32 { geteuid() }

    /// gethostname(2).
    public static var hostName: String {
        var buf = [CChar](repeating: 0, count: 256)
        guard gethostname(&buf, 255) == 0 else { return "localhost" }
        return String(cString: buf)
    }

    /// The wall clock in seconds since the epoch.
    public static func wallClockSeconds() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }

    /// /proc/self/exe: this program's own path.
    public static func executablePath() -> String? {
        var buf = [CChar](repeating: 0, count: 4096)
        let n = readlink("/proc/self/exe", &buf, 4095)
        guard n > 0 else { return nil }
        return String(cString: buf)
    }
}

/// Termination signals as a descriptor (SIGINT, SIGTERM, SIGHUP blocked, read from a signalfd).
public struct TerminationSignalDescriptor {
    public let descriptor: FileDescriptor

    /// Blocks SIGINT, SIGTERM and SIGHUP for the calling thread and the threads it starts later (call it
    /// before any other starts, so none takes them instead) and opens the signalfd that reports them.
    public init() throws(SystemCallError) {
        descriptor = FileDescriptor(rawValue: try syscall("signalfd") { CTunnelgateShims_termination_signalfd() })
    }

    /// The signalfd an earlier `init()` opened, kept by its holder as a plain descriptor.
    public init(_ descriptor: FileDescriptor) { self.descriptor = descriptor }

    /// The next pending signal, without waiting; nil when none is.
    public func next() -> Int32? {
        let s = CTunnelgateShims_signalfd_read(descriptor.rawValue)
        return s > 0 ? s : nil
    }

    /// The signal received within `timeoutMilliseconds`, or nil.
    public func wait(timeoutMilliseconds: Int32) -> Int32? {
        guard (try? Poll.readable(descriptor, timeoutMilliseconds: timeoutMilliseconds)) == true else { return nil }
        return next()
    }
}
