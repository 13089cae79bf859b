import CTunnelgateShims
import Glibc

extension ProcessControl {
    /// posix_spawn(3): starts `path` with `arguments` (argv[0] included), the
    /// caller's environment, and standard input, output and error on
    /// /dev/null. The child is created by the calling thread, so it starts in
    /// that thread's network namespace. Returns the child's pid.
    public static func spawn(_ path: String, _ arguments: [String]) throws(SystemCallError) -> Int32 {
        var actions = posix_spawn_file_actions_t()
        var rc = posix_spawn_file_actions_init(&actions)
        guard rc == 0 else { throw SystemCallError("posix_spawn_file_actions_init", Errno(rawValue: rc)) }
        defer { posix_spawn_file_actions_destroy(&actions) }
        for (fd, flags) in [(Int32(0), O_RDONLY), (1, O_WRONLY), (2, O_WRONLY)] {
            rc = posix_spawn_file_actions_addopen(&actions, fd, "/dev/null", flags, 0)
            guard rc == 0 else { throw SystemCallError("posix_spawn_file_actions_addopen", Errno(rawValue: rc)) }
        }
        var argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var pid: pid_t = 0
        rc = posix_spawn(&pid, path, &actions, nil, &argv, environ)
        guard rc == 0 else { throw SystemCallError("posix_spawn(\(path))", Errno(rawValue: rc)) }
        return pid
    }

    /// execveat(2) of an opened executable: this process becomes `executable` with `arguments`
    /// (argv[0] included) and the same environment, pid, descriptors without close-on-exec, namespaces
    /// and signal mask. Returns only when the kernel refused, with why.
    public static func execute(_ executable: FileDescriptor, _ arguments: [String]) -> SystemCallError {
        var argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        _ = CTunnelgateShims_execute_descriptor(executable.rawValue, &argv)
        return SystemCallError("execveat(\(arguments.first ?? ""))", Errno.current)
    }

    /// Runs an opened executable as a child with this process's standard input, output and error and
    /// environment, and waits for it (through /proc/self/fd/N, which names the checked file itself
    /// whatever happens to its path meanwhile).
    public static func run(_ executable: FileDescriptor, _ arguments: [String]) throws(SystemCallError) -> Termination {
        var argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var pid: pid_t = 0
        let rc = posix_spawn(&pid, executable.procPath, nil, nil, &argv, environ)
        guard rc == 0 else { throw SystemCallError("posix_spawn(\(arguments.first ?? ""))", Errno(rawValue: rc)) }
        while true {
            if let ended = try wait(for: pid) { return ended }  // waitpid retries EINTR itself (syscall)
        }
    }

    /// How a child ended.
    public enum Termination: Hashable, Sendable {
        case exited(Int32)
        case signalled(Int32)
    }

    /// waitpid(2): waits for the child `pid` to end, or returns nil at once
    /// when `block` is false and it is still running.
    public static func wait(for pid: Int32, block: Bool = true) throws(SystemCallError) -> Termination? {
        var status: Int32 = 0
        let result = try syscall("waitpid(\(pid))") { waitpid(pid, &status, block ? 0 : WNOHANG) }
        guard result == pid else { return nil }
        // WIFEXITED / WEXITSTATUS / WTERMSIG, which are macros.
        if status & 0x7f == 0 { return .exited((status >> 8) & 0xff) }
        return .signalled(status & 0x7f)
    }
}
