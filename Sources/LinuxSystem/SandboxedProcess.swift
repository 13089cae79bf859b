import CTunnelgateShims
import Glibc

/// A packet plane's process, started by the engine into its sandbox (CTunnelgateShims_spawn_plane): an
/// unprivileged user, no capabilities in any set, no_new_privs, a read-only mount namespace with the
/// engine's files hidden, killed with the engine, and nothing inherited but its channel and its log.
/// The plane installs its own seccomp filter first thing (it cannot be added before execveat without
/// allowing execveat itself).
public struct SandboxedProcess: Sendable {
    public let pid: Int32
    /// Readable when the process has exited (pidfd_open).
    public let exitDescriptor: FileDescriptor

    public struct Spec {
        /// The executable, opened by the caller (the file run is the file checked).
        public var executable: FileDescriptor
        /// The plane's end of the channel; descriptor 3 in the plane.
        public var channel: FileDescriptor
        /// Standard output and error, or nil for /dev/null.
        public var log: FileDescriptor?
        public var uid: UInt32
        public var gid: UInt32
        public var arguments: [String]
        /// Hidden behind an empty read-only tmpfs.
        public var hidden: [String]
        /// The only writable directory (a private tmpfs owned by `uid`).
        public var writable: String?
        /// The environment ("NAME=VALUE"; empty unless test hooks are passed on).
        public var environment: [String] = []
        /// Tests only: a host directory bind-mounted read-write at the same path inside.
        public var testDirectory: String?
        /// The read-only mount namespace with `hidden` and `writable` (CLONE_NEWNS needs CAP_SYS_ADMIN).
        /// False only where the engine runs without it and was told to go on: the plane then sees the
        /// file system as the engine does, limited by its uid's permissions.
        public var mountNamespace = true

        public init(executable: FileDescriptor, channel: FileDescriptor, log: FileDescriptor?, uid: UInt32, gid: UInt32,
                    arguments: [String], hidden: [String], writable: String?) {
            self.executable = executable
            self.channel = channel
            self.log = log
            self.uid = uid
            self.gid = gid
            self.arguments = arguments
            self.hidden = hidden
            self.writable = writable
        }
    }

    /// Starts the process; an error names the sandbox step that failed in the child.
    public static func spawn(_ spec: Spec) throws(SystemCallError) -> SandboxedProcess {
        var argv = spec.arguments.map { strdup($0) } + [nil]
        var environment = spec.environment.map { strdup($0) } + [nil]
        var testFD: Int32 = -1
        // O_PATH: a directory named, not opened for reading.
        if let dir = spec.testDirectory { testFD = open(dir, 0o10000000 | O_DIRECTORY | O_CLOEXEC) }
        let testPath: UnsafeMutablePointer<CChar>? = spec.testDirectory.flatMap { strdup($0) }
        defer {
            for p in environment { free(p) }
            if testFD >= 0 { close(testFD) }
            free(testPath)
        }
        var hidden = spec.hidden.map { UnsafePointer(strdup($0)) } + [nil]
        let writable: UnsafeMutablePointer<CChar>? = spec.writable.flatMap { strdup($0) }
        defer {
            for p in argv { free(p) }
            for p in hidden { free(UnsafeMutablePointer(mutating: p)) }
            free(writable)
        }
        var pid: pid_t = 0
        var step: UnsafePointer<CChar>?
        let rc: Int32 = argv.withUnsafeMutableBufferPointer { argvBuffer in
            hidden.withUnsafeMutableBufferPointer { hiddenBuffer in
                environment.withUnsafeMutableBufferPointer { environmentBuffer in
                    var c = CTunnelgateShims_plane_spawn(
                        executable_fd: spec.executable.rawValue, channel_fd: spec.channel.rawValue,
                        log_fd: spec.log?.rawValue ?? -1, uid: spec.uid, gid: spec.gid,
                        argv: argvBuffer.baseAddress, hidden: hiddenBuffer.baseAddress, writable: UnsafePointer(writable),
                        environment: environmentBuffer.baseAddress, test_directory_fd: testFD,
                        test_directory: UnsafePointer(testPath), mount_namespace: spec.mountNamespace ? 1 : 0)
                    return CTunnelgateShims_spawn_plane(&c, &pid, &step)
                }
            }
        }
        guard rc == 0 else {
            throw SystemCallError("starting the packet plane (\(step.map { String(cString: $0) } ?? "fork"))", Errno(rawValue: rc))
        }
        let fd = CTunnelgateShims_pidfd_open(pid)
        guard fd >= 0 else {
            let e = Errno.current
            kill(pid, SIGKILL)
            throw SystemCallError("pidfd_open(\(pid))", e)
        }
        return SandboxedProcess(pid: pid, exitDescriptor: FileDescriptor(rawValue: fd))
    }

    /// Sends a signal; a process already gone is not an error.
    public func signal(_ signal: Int32) {
        _ = kill(pid, signal)
    }

    /// Reaps the process if it has exited: its wait status, or nil while it runs.
    public func reap() -> Int32? {
        var status: Int32 = 0
        while true {
            let rc = waitpid(pid, &status, WNOHANG)
            if rc == pid { return status }
            if rc == 0 { return nil }
            if errno == EINTR { continue }
            return nil
        }
    }

    /// Waits up to `seconds` for the process to exit; its wait status, or nil if it is still running.
    public func wait(seconds: Double) -> Int32? {
        let deadline = ProcessControl.monotonicSeconds() + seconds
        while true {
            if let status = reap() { return status }
            let left = deadline - ProcessControl.monotonicSeconds()
            if left <= 0 { return nil }
            var p = pollfd(fd: exitDescriptor.rawValue, events: Int16(POLLIN), revents: 0)
            _ = poll(&p, 1, Int32(max(1, min(left, 1) * 1000)))
        }
    }

    /// How a wait status reads: "exited with status 1", "killed by signal 9".
    public static func describe(status: Int32) -> String {
        let signal = status & 0x7f
        if signal == 0 { return "exited with status \((status >> 8) & 0xff)" }
        return "killed by signal \(signal)"
    }
}

/// One end of an engine–plane channel: a SOCK_SEQPACKET socket carrying whole messages, with
/// descriptors as SCM_RIGHTS.
public struct SeqPacketChannel: Sendable {
    public let descriptor: FileDescriptor

    public init(_ descriptor: FileDescriptor) { self.descriptor = descriptor }

    /// A connected pair: the engine's end and the plane's.
    public static func pair() throws(SystemCallError) -> (engine: SeqPacketChannel, plane: SeqPacketChannel) {
        var fds: [Int32] = [0, 0]
        _ = try syscall("socketpair(AF_UNIX, SOCK_SEQPACKET)") { CTunnelgateShims_channel_pair(&fds) }
        return (SeqPacketChannel(FileDescriptor(rawValue: fds[0])), SeqPacketChannel(FileDescriptor(rawValue: fds[1])))
    }

    /// Sends one message with its descriptors (they stay open here).
    public func send(_ bytes: UnsafeRawBufferPointer, descriptors: [FileDescriptor] = []) throws(SystemCallError) {
        let fds = descriptors.map(\.rawValue)
        let n = try syscall("sendmsg(channel)") {
            fds.withUnsafeBufferPointer { CTunnelgateShims_send_with_fds(descriptor.rawValue, bytes.baseAddress, bytes.count, $0.baseAddress, Int32($0.count)) }
        }
        guard n == bytes.count else { throw SystemCallError("sendmsg(channel): short", .current) }
    }

    public struct Received {
        /// The message's length (0 with `closed`).
        public var count: Int
        public var descriptors: [FileDescriptor]
        /// The message or its descriptors did not fit (a garbled or hostile peer).
        public var truncated: Bool
        /// The other end is gone.
        public var closed: Bool
    }

    /// Receives one message without waiting: nil when none is there.
    public func receive(into buffer: UnsafeMutableRawBufferPointer) throws(SystemCallError) -> Received? {
        var fds = [Int32](repeating: -1, count: 16)
        var got: Int32 = 0
        var truncated: Int32 = 0
        let n = fds.withUnsafeMutableBufferPointer {
            CTunnelgateShims_receive_with_fds(descriptor.rawValue, buffer.baseAddress, buffer.count, $0.baseAddress, Int32($0.count), &got, &truncated)
        }
        if n < 0 {
            let e = Errno.current
            if e == .wouldBlock { return nil }
            if e.rawValue == ECONNRESET { return Received(count: 0, descriptors: [], truncated: false, closed: true) }
            throw SystemCallError("recvmsg(channel)", e)
        }
        let descriptors = fds.prefix(Int(got)).map { FileDescriptor(rawValue: $0) }
        return Received(count: n, descriptors: descriptors, truncated: truncated != 0, closed: n == 0 && got == 0 && truncated == 0)
    }
}

extension FileDescriptor {
    /// The executable at `path` opened for execveat (read-only, close-on-exec).
    public static func openExecutable(_ path: String = "/proc/self/exe") throws(SystemCallError) -> FileDescriptor {
        try open(path, O_RDONLY | O_CLOEXEC)
    }

    /// `/proc/self/fd/N`: the path through which dlopen and friends open this descriptor's file.
    public var procPath: String { "/proc/self/fd/\(rawValue)" }
}
