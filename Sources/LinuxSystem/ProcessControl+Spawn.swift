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
