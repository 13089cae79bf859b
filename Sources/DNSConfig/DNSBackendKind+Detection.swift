import LinuxSystem
import TunnelgateSettings

extension DNSBackendKind {
    /// The backend for the calling thread, decided from the system as it is:
    ///
    /// 1. A resolv.conf says systemd-resolved — it is a symbolic link into
    ///    /run/systemd/resolve/, or every `nameserver` in it is resolved's
    ///    stub (127.0.0.53, 127.0.0.54) — and org.freedesktop.resolve1
    ///    answers on the system bus from a process in the calling thread's
    ///    network namespace → `.systemdResolved`. The resolv.conf looked at
    ///    is the namespace's own /etc/netns/NAME/resolv.conf in a named
    ///    namespace that has one (whatever this process's /etc/resolv.conf
    ///    is), else /etc/resolv.conf as this process sees it.
    /// 2. The thread's network namespace (the device and inode of
    ///    /proc/thread-self/ns/net) is one of the named namespaces in
    ///    /run/netns → `.namespaceResolvConf(NAME)` (the first name in
    ///    sorted order when several name it) — unless the namespace's own
    ///    resolv.conf says resolved and resolved does not answer at all
    ///    (3). A host's resolved, in another namespace, cannot serve this one.
    /// 3. The resolv.conf of 1 says resolved but resolved does not answer →
    ///    `DNSConfigError.resolvedNotAnswering`; outside a named namespace,
    ///    it answers from another network namespace →
    ///    `.resolvedInAnotherNamespace`. Tunnelgate does not write over a
    ///    file resolved manages.
    /// 4. Otherwise → `.resolvConf`.
    ///
    /// Reads and asks only; changes nothing.
    public static func detect(paths: DNSPaths = .system) throws(DNSConfigError) -> DNSBackendKind {
        let named = try namedNamespace(paths: paths)
        var evidence: ResolvedEvidence?
        let own = named.map { paths.namespaceResolvConf($0) }
        if let named, let own, try DNSConfigError.wrap({ () throws(SystemCallError) in try FileSystem.status(own) }) != nil {
            // The namespace's own file is its resolv.conf (`ip netns exec` shows it as /etc/resolv.conf).
            if let text = try resolvConfNamesResolved(own, linkDirectory: "/etc/netns/\(named)") {
                evidence = ResolvedEvidence(path: own, description: text, isNamespaceFile: true)
            }
        } else if let text = try resolvConfNamesResolved(paths.resolvConf, linkDirectory: "/etc") {
            evidence = ResolvedEvidence(path: paths.resolvConf, description: text, isNamespaceFile: false)
        }
        guard let evidence else {
            return named.map { .namespaceResolvConf(namespace: $0) } ?? .resolvConf
        }
        return try decide(namedNamespace: named, evidence: evidence, resolved: ResolvedPresence.probe(paths: paths))
    }

    /// A resolv.conf that says systemd-resolved manages DNS, and how it says so.
    struct ResolvedEvidence: Hashable {
        var path: String
        /// "a symbolic link to ../run/systemd/resolve/stub-resolv.conf" …
        var description: String
        /// It is a named namespace's own /etc/netns/NAME/resolv.conf.
        var isNamespaceFile: Bool
    }

    /// Rules 1–3 of `detect`, once a resolv.conf has said resolved.
    static func decide(namedNamespace: String?, evidence: ResolvedEvidence,
                       resolved: ResolvedPresence) throws(DNSConfigError) -> DNSBackendKind {
        switch resolved {
        case .answers(.same):
            return .systemdResolved
        case .answers(.unknown) where namedNamespace == nil:
            // The bus daemon did not tell the pid, or it is not ours to see: resolved serves this host.
            return .systemdResolved
        case .silent(let error) where namedNamespace == nil || evidence.isNamespaceFile:
            throw .resolvedNotAnswering(path: evidence.path, evidence: evidence.description, error)
        case .answers(.other(let pid)) where namedNamespace == nil:
            throw .resolvedInAnotherNamespace(path: evidence.path, evidence: evidence.description, pid: pid)
        case .answers(.unknown), .answers(.other), .silent:
            guard let namedNamespace else {
                throw .resolvedInAnotherNamespace(path: evidence.path, evidence: evidence.description, pid: nil)
            }
            return .namespaceResolvConf(namespace: namedNamespace)
        }
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

    /// How the resolv.conf at `resolvConf` says systemd-resolved manages DNS
    /// ("a symbolic link to ../run/systemd/resolve/stub-resolv.conf", "a file
    /// whose only nameserver is 127.0.0.53"), or nil when it does not (or
    /// does not exist). A relative link target is read from `linkDirectory`,
    /// the file's directory on the real system.
    static func resolvConfNamesResolved(_ resolvConf: String, linkDirectory: String) throws(DNSConfigError) -> String? {
        let status = try DNSConfigError.wrap { () throws(SystemCallError) in try FileSystem.status(resolvConf) }
        guard let status else { return nil }
        if status.kind == .symbolicLink {
            let raw = try DNSConfigError.wrap { () throws(SystemCallError) in try FileSystem.symbolicLinkTarget(resolvConf) }
            let target = String(decoding: raw, as: UTF8.self)
            if Self.lexicallyResolved(target, relativeTo: linkDirectory).hasPrefix(DNSPaths.resolvedRuntimeDirectory + "/") {
                return "a symbolic link to \(target)"
            }
        }
        guard let bytes = try? FileSystem.read(resolvConf) else { return nil } // a dangling link: nothing to read
        let nameservers = ResolvConf(parsing: bytes).nameservers.map(\.address)
        guard !nameservers.isEmpty, nameservers.allSatisfy(DNSPaths.resolvedStubAddresses.contains) else { return nil }
        let listed = Array(Set(nameservers)).map(\.description).sorted().joined(separator: " and ")
        return "a file whose only nameserver is \(listed) (systemd-resolved's stub)"
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
}

/// Whether systemd-resolved answers on the system bus, and for which network namespace.
enum ResolvedPresence {
    enum Namespace: Hashable {
        /// resolved's process is in the calling thread's network namespace.
        case same
        /// It is in another one.
        case other(pid: UInt32)
        /// The bus daemon did not give its pid, or /proc has no such process here (another pid namespace).
        case unknown
    }

    case answers(Namespace)
    /// Nothing answers for org.freedesktop.resolve1 (no bus, no resolved, a timeout).
    case silent(SystemBusError)

    /// Seconds detection waits for each answer.
    static let timeout = 5.0

    /// Asks the bus at `paths.systemBusAddress` who answers for
    /// org.freedesktop.resolve1 and compares that process's network
    /// namespace (/proc/PID/ns/net) with the calling thread's.
    static func probe(paths: DNSPaths) -> ResolvedPresence {
        let owner: (name: String, pid: UInt32?)
        do throws(SystemBusError) {
            let bus = try SystemBus(address: paths.systemBusAddress, timeout: timeout)
            owner = try ResolvedClient(bus: bus).owner()
        } catch {
            return .silent(error)
        }
        guard let pid = owner.pid,
              let theirs = try? FileSystem.status(paths.networkNamespace(ofProcess: pid), followingSymbolicLinks: true),
              let mine = try? FileSystem.status(paths.networkNamespace, followingSymbolicLinks: true) else {
            return .answers(.unknown)
        }
        return .answers(theirs.device == mine.device && theirs.inode == mine.inode ? .same : .other(pid: pid))
    }
}
