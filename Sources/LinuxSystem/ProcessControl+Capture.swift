import Glibc

extension ProcessControl {
    /// What a command printed, and how it ended.
    public struct Captured: Sendable {
        public var termination: Termination
        public var standardOutput: [UInt8]
        public var standardError: [UInt8]
    }

    /// Runs `arguments[0]` (searched on PATH) with the caller's environment, standard input on
    /// /dev/null, and its standard output and error read through pipes (each at most `limit` bytes;
    /// more is read and dropped). Waits at most `timeout` seconds: then the command is killed
    /// (SIGKILL) and ETIMEDOUT thrown. ENOENT when there is no such command.
    public static func capture(_ arguments: [String], timeout: Double, limit: Int = 1 << 20) throws(SystemCallError) -> Captured {
        let out = try FileDescriptor.pipe()
        let err: (read: FileDescriptor, write: FileDescriptor)
        do { err = try FileDescriptor.pipe() } catch {
            out.read.close(); out.write.close()
            throw error
        }
        var pid: pid_t = 0
        do throws(SystemCallError) {
            var actions = posix_spawn_file_actions_t()
            var rc = posix_spawn_file_actions_init(&actions)
            guard rc == 0 else { throw SystemCallError("posix_spawn_file_actions_init", Errno(rawValue: rc)) }
            defer { posix_spawn_file_actions_destroy(&actions) }
            rc = posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
            if rc == 0 { rc = posix_spawn_file_actions_adddup2(&actions, out.write.rawValue, 1) }
            if rc == 0 { rc = posix_spawn_file_actions_adddup2(&actions, err.write.rawValue, 2) }
            guard rc == 0 else { throw SystemCallError("posix_spawn_file_actions_adddup2", Errno(rawValue: rc)) }
            var argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
            defer { argv.forEach { free($0) } }
            rc = posix_spawnp(&pid, arguments[0], &actions, nil, &argv, environ)
            guard rc == 0 else { throw SystemCallError("posix_spawnp(\(arguments[0]))", Errno(rawValue: rc)) }
        } catch {
            for fd in [out.read, out.write, err.read, err.write] { fd.close() }
            throw error
        }
        out.write.close()
        err.write.close()
        defer { out.read.close(); err.read.close() }

        var collected: [[UInt8]] = [[], []]
        var open = [true, true]
        let deadline = monotonicSeconds() + timeout
        var chunk = [UInt8](repeating: 0, count: 8192)
        while open[0] || open[1] {
            let left = deadline - monotonicSeconds()
            if left <= 0 {
                _ = kill(pid, SIGKILL)
                _ = try? wait(for: pid)
                throw SystemCallError("\(arguments[0]) did not finish within \(Int(timeout)) s", .timedOut)
            }
            var set = PollSet()
            let ends = [out.read, err.read]
            var slots: [Int: Int] = [:]
            for i in 0..<2 where open[i] { slots[set.add(ends[i], .readable)] = i }
            _ = try set.wait(timeoutMilliseconds: Int32(min(left, 1) * 1000) + 1)
            for (slot, i) in slots where set.events(at: slot) != [] {
                let n = chunk.withUnsafeMutableBytes { b in Result { () throws(SystemCallError) in try ends[i].read(into: b) } }
                switch n {
                case .success(let count?) where count > 0:
                    if collected[i].count < limit { collected[i] += chunk[0..<min(count, limit - collected[i].count)] }
                case .success(nil): break
                default: open[i] = false
                }
            }
        }
        guard let termination = try wait(for: pid) else {
            throw SystemCallError("waitpid(\(pid))", .noChild)
        }
        return Captured(termination: termination, standardOutput: collected[0], standardError: collected[1])
    }
}
