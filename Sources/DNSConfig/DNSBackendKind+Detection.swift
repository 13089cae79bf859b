import Glibc
import LinuxSystem

extension DNSBackendKind {
    /// The backend for the calling thread, decided from the system as it is:
    ///
    /// 1. The thread's network namespace (the device and inode of
    ///    /proc/thread-self/ns/net) is one of the named namespaces in
    ///    /run/netns → `.namespaceResolvConf(NAME)` (the first name in
    ///    sorted order when several name it).
    /// 2. /etc/resolv.conf is a symbolic link into /run/systemd/resolve/ and
    ///    resolved is running (its socket /run/systemd/resolve/io.systemd.Resolve
    ///    accepts a connection) → `.systemdResolved`.
    /// 3. Otherwise → `.resolvConf`.
    ///
    /// Reads only; changes nothing.
    public static func detect(paths: DNSPaths = .system) throws(DNSConfigError) -> DNSBackendKind {
        if let namespace = try namedNamespace(paths: paths) {
            return .namespaceResolvConf(namespace: namespace)
        }
        if try isManagedBySystemdResolved(paths: paths) {
            return .systemdResolved
        }
        return .resolvConf
    }

    /// The name under /run/netns of the calling thread's network namespace, if it has one.
    static func namedNamespace(paths: DNSPaths) throws(DNSConfigError) -> String? {
        guard let mine = try DNSConfigError.wrap({ () throws(SystemCallError) in
            try FileSystem.status(paths.networkNamespace, followingSymbolicLinks: true)
        }) else { return nil }
        for name in FileSystem.list(paths.namedNamespaces).sorted() {
            let candidate = try? FileSystem.status(paths.namedNamespaces + "/" + name, followingSymbolicLinks: true)
            if let candidate, candidate.device == mine.device, candidate.inode == mine.inode {
                return name
            }
        }
        return nil
    }

    /// True when /etc/resolv.conf links into resolved's runtime directory and resolved answers on its socket.
    static func isManagedBySystemdResolved(paths: DNSPaths) throws(DNSConfigError) -> Bool {
        let resolvConf = paths.resolvConf
        let status = try DNSConfigError.wrap { () throws(SystemCallError) in try FileSystem.status(resolvConf) }
        guard status?.kind == .symbolicLink else { return false }
        let target = try DNSConfigError.wrap { () throws(SystemCallError) in try FileSystem.symbolicLinkTarget(resolvConf) }
        let resolved = Self.lexicallyResolved(String(decoding: target, as: UTF8.self), relativeTo: "/etc")
        guard resolved.hasPrefix(DNSPaths.resolvedRuntimeDirectory + "/") else { return false }
        return Self.acceptsConnections(paths.resolvedSocket)
    }

    /// `target` as an absolute path, `.` and `..` removed without following
    /// links (as the kernel would, for the link's own directory `directory`).
    static func lexicallyResolved(_ target: String, relativeTo directory: String) -> String {
        let full = target.hasPrefix("/") ? target : directory + "/" + target
        var parts: [Substring] = []
        for part in full.split(separator: "/") {
            switch part {
            case ".": continue
            case "..": _ = parts.popLast()
            default: parts.append(part)
            }
        }
        return "/" + parts.joined(separator: "/")
    }

    /// True when a stream connection to the AF_UNIX socket at `path` succeeds.
    static func acceptsConnections(_ path: String) -> Bool {
        guard let socket = try? FileDescriptor.socket(family: AF_UNIX, type: .stream, nonBlocking: false) else {
            return false
        }
        defer { socket.close() }
        return (try? socket.connect(to: .unix(path))) == true
    }
}
