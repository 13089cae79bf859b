import Glibc

extension ProcessControl {
    /// posix_spawn(3) of a long-lived child that outlives its parent: a new
    /// session (POSIX_SPAWN_SETSID: no controlling terminal, a terminal's ^C
    /// does not reach it), standard input from /dev/null, standard output and
    /// error appended to `logPath` (created 0600), and exactly `environment`
    /// ("KEY=VALUE" strings). Like `spawn`, the child starts in the calling
    /// thread's network namespace. `passing` becomes the child's descriptor 3
    /// (a handoff: SealedFile). Returns the child's pid; the caller reaps
    /// it with `wait(for:block:)` or leaves it to init when it exits first.
    public static func spawnDetached(_ path: String, _ arguments: [String], environment: [String],
                                     logPath: String, passing handoff: FileDescriptor? = nil) throws(SystemCallError) -> Int32 {
        var actions = posix_spawn_file_actions_t()
        var rc = posix_spawn_file_actions_init(&actions)
        guard rc == 0 else { throw SystemCallError("posix_spawn_file_actions_init", Errno(rawValue: rc)) }
        defer { posix_spawn_file_actions_destroy(&actions) }
        for (fd, file, flags) in [(Int32(0), "/dev/null", O_RDONLY),
                                  (1, logPath, O_WRONLY | O_CREAT | O_APPEND),
                                  (2, logPath, O_WRONLY | O_CREAT | O_APPEND)] {
            rc = posix_spawn_file_actions_addopen(&actions, fd, file, flags, 0o600)
            guard rc == 0 else { throw SystemCallError("posix_spawn_file_actions_addopen(\(file))", Errno(rawValue: rc)) }
        }
        // Numbered 4 or more first: the actions above give the child 0, 1 and 2, and this becomes 3.
        // Open until posix_spawn has run the actions.
        let source = try handoff.map { h throws(SystemCallError) in h.rawValue > 3 ? h : try h.duplicate(atLeast: 4) }
        defer { if let source, source != handoff { source.close() } }
        if let source {
            rc = posix_spawn_file_actions_adddup2(&actions, source.rawValue, 3)
            guard rc == 0 else { throw SystemCallError("posix_spawn_file_actions_adddup2(3)", Errno(rawValue: rc)) }
        }
        var attributes = posix_spawnattr_t()
        rc = posix_spawnattr_init(&attributes)
        guard rc == 0 else { throw SystemCallError("posix_spawnattr_init", Errno(rawValue: rc)) }
        defer { posix_spawnattr_destroy(&attributes) }
        // POSIX_SPAWN_SETSID (0x80, glibc ≥ 2.26) and POSIX_SPAWN_SETSIGMASK: the child starts with no
        // signal blocked, whatever the parent blocks (a provider host blocks SIGTERM itself, with a signalfd).
        var empty = sigset_t()
        sigemptyset(&empty)
        rc = posix_spawnattr_setsigmask(&attributes, &empty)
        guard rc == 0 else { throw SystemCallError("posix_spawnattr_setsigmask", Errno(rawValue: rc)) }
        rc = posix_spawnattr_setflags(&attributes, Int16(0x80 | POSIX_SPAWN_SETSIGMASK))
        guard rc == 0 else { throw SystemCallError("posix_spawnattr_setflags", Errno(rawValue: rc)) }
        var argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var envp: [UnsafeMutablePointer<CChar>?] = environment.map { strdup($0) } + [nil]
        defer { envp.forEach { free($0) } }
        var pid: pid_t = 0
        rc = posix_spawn(&pid, path, &actions, &attributes, &argv, &envp)
        guard rc == 0 else { throw SystemCallError("posix_spawn(\(path))", Errno(rawValue: rc)) }
        return pid
    }
}
