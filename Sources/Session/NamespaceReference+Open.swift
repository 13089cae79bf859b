import LinuxSystem
import TunnelgateSettings

/// Why `--netns` found no namespace; the message names the argument and what was wrong.
public struct NamespaceOpenError: Error, CustomStringConvertible {
    public let description: String
    init(_ reference: NamespaceReference, _ reason: String) { description = "--netns \(reference): \(reason)" }
}

/// A namespace `--netns` named, held open, and what tells that it went away.
public final class OpenedNamespace {
    public let reference: NamespaceReference
    public let namespace: NetworkNamespace
    /// The process whose namespace it is (pid:, docker:, podman:, /proc/PID/ns/net), followed by a
    /// pidfd opened before the namespace file was, so that it is that process's namespace.
    public let process: ProcessExit?
    /// Otherwise the namespace file (a name's /run/netns/NAME, a bind-mounted path), whose removal
    /// ends the tunnel.
    public let file: String?

    init(reference: NamespaceReference, namespace: NetworkNamespace, process: ProcessExit?, file: String?) {
        self.reference = reference
        self.namespace = namespace
        self.process = process
        self.file = file
    }

    deinit { process?.close() }

    /// What the engine's loop watches to end the tunnel when the namespace goes (docs/operations.md,
    /// When the namespace goes): the process's pidfd, or inotify on the directory of the namespace file.
    public func watch() throws(SystemCallError) -> NamespaceWatch {
        if let process { return NamespaceWatch(descriptor: process.descriptor, gone: { process.hasExited ? "process \(process.pid), whose namespace it is, exited" : nil }) }
        guard let file else { preconditionFailure("an opened namespace has a process or a file") }
        let removals = try EntryRemovals(inDirectoryOf: file)
        let inode = namespace.inode
        return NamespaceWatch(descriptor: removals.descriptor, close: { removals.close() }, gone: {
            removals.drain()
            guard let now = NamedNetworkNamespaces.inode(atPath: file) else { return "its namespace file \(file) was removed" }
            return now == inode ? nil : "its namespace file \(file) now names another namespace (net:[\(now)])"
        })
    }

    /// What the namespace is, for logs: "docker:web (process 4242, net:[4026532481])".
    public var summary: String {
        "\(reference) (" + (process.map { "process \($0.pid), " } ?? "") + "net:[\(namespace.inode)])"
    }
}

extension NamespaceReference {
    /// Finds the namespace and opens it. A container is asked for its process id first (Docker:
    /// dockerd's API socket, $DOCKER_HOST or /var/run/docker.sock; Podman: `podman inspect`, whose
    /// storage no daemon serves). What is opened must be a network namespace (NS_GET_NSTYPE), and not
    /// the one this thread is in (isolate mode needs another). Nothing is changed.
    public func open() throws(NamespaceOpenError) -> OpenedNamespace {
        let pid: Int32?
        switch self {
        case .named, .path: pid = filePath.flatMap(Self.process(inProcPath:))
        case .process(let p): pid = p
        case .container(let engine, let name):
            switch engine {
            case .docker: pid = try dockerProcess(name)
            case .podman: pid = try podmanProcess(name)
            }
        }
        let path = filePath ?? "/proc/\(pid ?? 0)/ns/net"
        // The process first, then its namespace file: while the process has not exited, the file
        // opened is its namespace's (a pid reused in between would have a live pidfd of another process
        // only if the first had exited before pidfd_open, which the check after the open sees).
        var process: ProcessExit?
        if let pid {
            do { process = try ProcessExit(pid: pid) } catch {
                throw NamespaceOpenError(self, error.errno == .noSuchProcess ? "there is no process \(pid)" : "pidfd_open(\(pid)): \(error.errno)")
            }
        }
        let namespace: NetworkNamespace
        do { namespace = try NetworkNamespace(path: path, label: description) } catch {
            process?.close()
            throw NamespaceOpenError(self, Self.openProblem(path, error, named: self))
        }
        if let process, process.hasExited {
            process.close()
            throw NamespaceOpenError(self, "process \(pid!) exited while its namespace was opened")
        }
        if let own = try? ProcessControl.networkNamespaceIdentity(), own == namespace.inode {
            process?.close()
            throw NamespaceOpenError(self, "is the network namespace tunnelgate runs in (net:[\(own)]); isolate mode puts the tunnel into another one")
        }
        return OpenedNamespace(reference: self, namespace: namespace, process: process, file: process == nil ? path : nil)
    }

    static func openProblem(_ path: String, _ error: SystemCallError, named: NamespaceReference) -> String {
        switch error.errno {
        case .noSuchEntry:
            if case .named(let n) = named {
                return "no network namespace named \(n) (\(path) does not exist)"
                    + (n.contains(":") ? "; it takes \(forms)" : "")
            }
            return "\(path) does not exist"
        case .notATerminal:  // NS_GET_NSTYPE on a file of another file system
            return "\(path) is not a namespace file (no nsfs inode: NS_GET_NSTYPE fails with \(error.errno))"
        case .invalidArgument:
            return "\(path) is a namespace, but not a network namespace"
        default:
            return "\(error)"
        }
    }

    // MARK: - Docker

    /// The socket dockerd serves its API on: $DOCKER_HOST when it is unix://PATH, else /var/run/docker.sock.
    static func dockerSocket() throws(NamespaceOpenError) -> String {
        guard let host = ProcessControl.environmentValue("DOCKER_HOST"), !host.isEmpty else { return "/var/run/docker.sock" }
        guard host.hasPrefix("unix://"), host.count > 7 else {
            throw NamespaceOpenError(.container(.docker, "?"), "DOCKER_HOST=\(host): only a unix:// socket is asked")
        }
        return String(host.dropFirst(7))
    }

    /// GET /containers/NAME/json on dockerd's socket (HTTP/1.0, so the answer is not chunked and ends
    /// with the connection): .State.Pid of a running container.
    func dockerProcess(_ name: String) throws(NamespaceOpenError) -> Int32 {
        let socket = try Self.dockerSocket()
        let answer: [UInt8]
        do {
            let fd = try UnixSocket.connect(to: socket)
            defer { fd.close() }
            try fd.writeAll(Array("GET /containers/\(name)/json HTTP/1.0\r\nHost: docker\r\n\r\n".utf8))
            answer = try Self.readToEnd(fd, limit: 4 << 20, timeout: 15)
        } catch {
            throw NamespaceOpenError(self, "asking dockerd at \(socket) failed: \(error)")
        }
        guard let (status, body) = Self.httpResponse(answer) else {
            throw NamespaceOpenError(self, "dockerd at \(socket) gave an answer that is not HTTP")
        }
        let json = try? JSONParser.parse(body)
        guard status == 200 else {
            if status == 404 { throw NamespaceOpenError(self, "dockerd at \(socket) has no container \(name)") }
            throw NamespaceOpenError(self, "dockerd at \(socket) answered \(status)" + (json?.member("message")?.text.map { ": \($0)" } ?? ""))
        }
        guard let state = json?.member("State"), let pid = state.member("Pid")?.integer else {
            throw NamespaceOpenError(self, "dockerd's answer has no State.Pid")
        }
        guard pid > 0, state.member("Running") != .bool(false) else {
            throw NamespaceOpenError(self, "container \(name) is not running")
        }
        return Int32(pid)
    }

    static func httpResponse(_ bytes: [UInt8]) -> (Int, [UInt8])? {
        let end: [UInt8] = [13, 10, 13, 10]
        guard let split = (0...max(0, bytes.count - 4)).first(where: { bytes.count >= 4 && Array(bytes[$0..<$0 + 4]) == end }) else { return nil }
        let head = String(decoding: bytes[..<split], as: UTF8.self)
        let words = head.prefix(while: { $0 != "\r" }).split(separator: " ")
        guard words.count >= 2, words[0].hasPrefix("HTTP/"), let status = Int(words[1]) else { return nil }
        return (status, Array(bytes[(split + 4)...]))
    }

    static func readToEnd(_ fd: FileDescriptor, limit: Int, timeout: Double) throws(SystemCallError) -> [UInt8] {
        var out: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 16384)
        let deadline = ProcessControl.monotonicSeconds() + timeout
        while out.count < limit {
            let left = deadline - ProcessControl.monotonicSeconds()
            guard left > 0, try Poll.readable(fd, timeoutMilliseconds: Int32(left * 1000) + 1) else {
                throw SystemCallError("read (no answer within \(Int(timeout)) s)", .timedOut)
            }
            let n = try chunk.withUnsafeMutableBytes { b in Result { () throws(SystemCallError) in try fd.read(into: b) } }.get()
            guard let n, n > 0 else { break }
            out += chunk[0..<n]
        }
        return out
    }

    // MARK: - Podman

    /// `podman inspect --type container --format {{.State.Pid}} NAME`, with this process's
    /// environment (CONTAINERS_CONF, CONTAINERS_STORAGE_CONF …): Podman has no daemon to ask unless
    /// its API service was started, and the command reads the very storage that service would.
    func podmanProcess(_ name: String) throws(NamespaceOpenError) -> Int32 {
        let result: ProcessControl.Captured
        do {
            result = try ProcessControl.capture(["podman", "inspect", "--type", "container", "--format", "{{.State.Pid}}", name], timeout: 30)
        } catch {
            if error.errno == .noSuchEntry { throw NamespaceOpenError(self, "podman is not installed (podman: is asked with `podman inspect`)") }
            throw NamespaceOpenError(self, "podman inspect failed: \(error)")
        }
        let out = String(decoding: result.standardOutput, as: UTF8.self).split(whereSeparator: \.isWhitespace)
        guard result.termination == .exited(0) else {
            let line = String(decoding: result.standardError, as: UTF8.self).split(separator: "\n").first.map(String.init) ?? "\(result.termination)"
            throw NamespaceOpenError(self, "podman inspect \(name) failed: \(line)")
        }
        guard out.count == 1, let pid = Int32(out[0]) else {
            throw NamespaceOpenError(self, "podman inspect \(name) printed no process id")
        }
        guard pid > 0 else { throw NamespaceOpenError(self, "container \(name) is not running") }
        return pid
    }
}

/// Readable when the namespace may have gone; `gone()` says whether it has, and why.
public final class NamespaceWatch {
    public let descriptor: FileDescriptor
    private let closeBody: () -> Void
    private let goneBody: () -> String?

    init(descriptor: FileDescriptor, close: @escaping () -> Void = {}, gone: @escaping () -> String?) {
        self.descriptor = descriptor
        closeBody = close
        goneBody = gone
    }

    deinit { closeBody() }

    /// nil while the namespace is there; else why it is taken as gone.
    public func gone() -> String? { goneBody() }
}

extension JSONValue {
    var text: String? { if case .string(let s) = self { s } else { nil } }
    var integer: Int? { if case .number(let d, _) = self, d == d.rounded(), abs(d) < 1e15 { Int(d) } else { nil } }
}
