import LinuxSystem
import TunnelgateSettings

/// Applies a tunnel's NEDNSSettings to the system and puts the system back.
///
/// Journal first: before any file changes, STATEDIR/NAME.dns records what is
/// about to change (the path, whether it existed, its exact bytes, mode and
/// owner or its symbolic-link target, the directories that will be
/// created), synced and renamed into place. `restore` needs nothing but that
/// file, so it works after a crash; it puts back the original bytes, mode
/// and owner (or link, or absence) and removes the directories it created.
///
/// resolv.conf backends write the file of `ResolvConf.render`. An existing
/// regular file is rewritten in place (same inode: the bind mounts
/// `ip netns exec` made of it, and its owner, stay); a symbolic link or a
/// missing file is replaced by a new file renamed into place.
///
/// The systemd-resolved backend (DNSConfigurator+Resolved.swift) changes no
/// file: NAME.dns names the tunnel's link, and the settings are the link's
/// in resolved, set over D-Bus and taken back by RevertLink.
public struct DNSConfigurator: Sendable {
    public var paths: DNSPaths
    /// The backend to use; nil: `DNSBackendKind.detect(paths:)` when applying.
    public var backend: DNSBackendKind?
    /// Where the split-DNS forwarder listens: 127.0.0.153 (one forwarder per
    /// network namespace, as only one tunnel per namespace sets DNS).
    public var forwarderAddress: IPAddress
    /// The forwarder's port. resolv.conf cannot name a port, so anything but 53 is for tests.
    public var forwarderPort: UInt16

    public static let defaultForwarderAddress = IPAddress.v4(IPv4Address(0x7f00_0099)) // 127.0.0.153

    public init(paths: DNSPaths = .system, backend: DNSBackendKind? = nil,
                forwarderAddress: IPAddress = DNSConfigurator.defaultForwarderAddress, forwarderPort: UInt16 = 53) {
        self.paths = paths
        self.backend = backend
        self.forwarderAddress = forwarderAddress
        self.forwarderPort = forwarderPort
    }

    /// Mode of a resolv.conf Tunnelgate creates.
    static let createdFileMode: UInt32 = 0o644
    /// Mode of a directory Tunnelgate creates (/etc/netns, /etc/netns/NAME).
    static let createdDirectoryMode: UInt32 = 0o755

    /// Applies `settings` for tunnel `tunnelName` on `interfaceName`. Call it
    /// after the TUN exists and `lo` is up (split DNS binds 127.0.0.153),
    /// from a thread in the tunnel's network namespace. Refuses when
    /// STATEDIR/NAME.dns exists (restore first) or another tunnel's journal
    /// in STATEDIR owns the same file. On failure everything already changed
    /// is put back before the error is thrown.
    public func apply(settings: DNSSettings, interfaceName: String, interfaceIndex: Int32,
                      stateDirectory: String, tunnelName: String) throws(DNSConfigError) -> DNSApplied {
        let backend: DNSBackendKind
        if let chosen = self.backend { backend = chosen } else { backend = try DNSBackendKind.detect(paths: paths) }
        let journalPath = DNSJournal.path(stateDirectory: stateDirectory, tunnelName: tunnelName)
        if try DNSConfigError.wrap({ () throws(SystemCallError) in try FileSystem.status(journalPath) }) != nil {
            throw .journalExists(path: journalPath)
        }
        guard let path = backend.resolvConfPath(paths) else {
            return try applyResolved(settings, interfaceName: interfaceName, interfaceIndex: interfaceIndex,
                                     stateDirectory: stateDirectory, tunnelName: tunnelName)
        }
        try Self.refuseIfOwned(path, stateDirectory: stateDirectory, except: tunnelName)

        // What is there now.
        let original: DNSJournal.Original
        var currentContents: [UInt8] = []
        let status = try DNSConfigError.wrap { () throws(SystemCallError) in try FileSystem.status(path) }
        switch status {
        case nil:
            original = .absent
        case let status? where status.kind == .regular:
            currentContents = try DNSConfigError.wrap { () throws(SystemCallError) in try FileSystem.read(path) } ?? []
            original = .file(bytes: currentContents, permissions: status.permissions, owner: status.owner, group: status.group)
        case let status? where status.kind == .symbolicLink:
            let target = try DNSConfigError.wrap { () throws(SystemCallError) in try FileSystem.symbolicLinkTarget(path) }
            original = .symbolicLink(target: target)
            currentContents = (try? FileSystem.read(path)) ?? [] // a dangling link reads as empty
        case let status?:
            throw .unsupportedFile(path: path, kind: status.kind)
        }
        var directories: [String] = []
        if case .namespaceResolvConf(let namespace) = backend {
            for directory in [paths.namespaceConfiguration, paths.namespaceConfiguration(namespace)] {
                if try DNSConfigError.wrap({ () throws(SystemCallError) in try FileSystem.status(directory) }) == nil {
                    directories.append(directory)
                }
            }
        }
        let previous = ResolvConf(parsing: currentContents)

        // Split DNS: listen before anything changes, so a busy address fails here.
        var forwarder: SplitDNSForwarder?
        if settings.isSplitDNS {
            let configuration = forwarderConfiguration(settings, previous: previous, interfaceName: interfaceName,
                                                       interfaceIndex: interfaceIndex)
            let created = SplitDNSForwarder(configuration: configuration)
            try created.bind()
            forwarder = created
        }
        let text = ResolvConf.render(settings, tunnelName: tunnelName, interfaceName: interfaceName,
                                     forwarder: forwarder.map { _ in forwarderAddress },
                                     original: previous)
        let journal = DNSJournal(tunnel: tunnelName, backend: backend, path: path, createdDirectories: directories,
                                 original: original, forwarder: forwarder.map { _ in forwarderAddress.description })
        do throws(DNSConfigError) {
            try DNSConfigError.wrap { () throws(SystemCallError) in
                try FileSystem.writeAtomically(journalPath, journal.encoded, mode: 0o600)
                try FileSystem.syncDirectory(stateDirectory)
            }
        } catch {
            try? forwarder?.stop()
            throw error
        }

        do throws(DNSConfigError) {
            try DNSConfigError.wrap { () throws(SystemCallError) in
                for directory in directories {
                    _ = try FileSystem.createDirectory(directory, mode: Self.createdDirectoryMode)
                }
                let bytes = Array(text.utf8)
                if status?.kind == .regular {
                    try Self.rewriteInPlace(path, bytes)
                } else {
                    try Self.replace(path, bytes, permissions: Self.createdFileMode, owner: nil)
                }
            }
        } catch {
            try? forwarder?.stop()
            try? Self.restore(stateDirectory: stateDirectory, tunnelName: tunnelName, paths: paths)
            throw error
        }
        return DNSApplied(backend: backend, path: path, journalPath: journalPath, forwarder: forwarder)
    }

    /// Puts back what `apply` changed, from STATEDIR/NAME.dns alone, then
    /// removes that file. Nothing to do (and no error) when it does not
    /// exist, so it is safe to call again, and after a crash. Stop the
    /// forwarder first, if there is one. Call it from a thread in the
    /// tunnel's network namespace (systemd-resolved's link is looked up there).
    public static func restore(stateDirectory: String, tunnelName: String,
                               paths: DNSPaths = .system) throws(DNSConfigError) {
        let journalPath = DNSJournal.path(stateDirectory: stateDirectory, tunnelName: tunnelName)
        guard let bytes = try DNSConfigError.wrap({ () throws(SystemCallError) in try FileSystem.read(journalPath) }) else {
            return
        }
        let journal = try DNSJournal(parsing: bytes, source: journalPath)
        switch journal.change {
        case .file(let path, let createdDirectories, let original):
            try restoreFile(path, createdDirectories: createdDirectories, original: original)
        case .resolvedLink(let index, let name):
            try restoreResolvedLink(index: index, name: name, paths: paths)
        }
        try DNSConfigError.wrap { () throws(SystemCallError) in
            try FileSystem.removeFile(journalPath)
            try FileSystem.syncDirectory(stateDirectory)
        }
    }

    static func restoreFile(_ path: String, createdDirectories: [String], original: DNSJournal.Original) throws(DNSConfigError) {
        try DNSConfigError.wrap { () throws(SystemCallError) in
            try FileSystem.removeFile(DNSJournal.temporaryPath(for: path))
            let current = try FileSystem.status(path)
            switch original {
            case .absent:
                if current != nil { try FileSystem.removeFile(path) }
            case .file(let bytes, let permissions, let owner, let group):
                if current?.kind == .regular {
                    try rewriteInPlace(path, bytes, permissions: permissions, owner: (owner, group))
                } else {
                    try replace(path, bytes, permissions: permissions, owner: (owner, group))
                }
            case .symbolicLink(let target):
                var same = false
                if current?.kind == .symbolicLink { same = try FileSystem.symbolicLinkTarget(path) == target }
                if !same {
                    let temporary = DNSJournal.temporaryPath(for: path)
                    try FileSystem.createSymbolicLink(at: temporary, target: target)
                    try FileSystem.rename(temporary, path)
                }
            }
            if try FileSystem.status(directory(of: path))?.kind == .directory {
                try FileSystem.syncDirectory(directory(of: path))
            }
            for created in createdDirectories.reversed() {
                do throws(SystemCallError) {
                    try FileSystem.removeEmptyDirectory(created)
                } catch where error.errno == .directoryNotEmpty {
                    continue // someone else put files there meanwhile: theirs now
                }
            }
        }
    }

    // MARK: Files

    /// Rewrites a regular file in place, keeping its inode: new bytes from
    /// offset 0, then the length cut (a reader never sees an empty file), then fsync.
    static func rewriteInPlace(_ path: String, _ bytes: [UInt8], permissions: UInt32? = nil,
                               owner: (UInt32, UInt32)? = nil) throws(SystemCallError) {
        let fd = try FileDescriptor.open(path, [.writeOnly, .noFollow])
        defer { fd.close() }
        try fd.writeAll(bytes)
        try fd.truncate(to: bytes.count)
        if let permissions { try fd.setPermissions(permissions) }
        if let owner { try fd.setOwner(owner.0, group: owner.1) }
        try fd.sync()
    }

    /// Writes a new file next to `path` and renames it over `path` (which may be a link, or absent).
    static func replace(_ path: String, _ bytes: [UInt8], permissions: UInt32,
                        owner: (UInt32, UInt32)?) throws(SystemCallError) {
        let temporary = DNSJournal.temporaryPath(for: path)
        try FileSystem.removeFile(temporary)
        let fd = try FileDescriptor.open(temporary, [.writeOnly, .create, .exclusive, .noFollow], mode: permissions)
        do throws(SystemCallError) {
            try fd.writeAll(bytes)
            try fd.setPermissions(permissions) // the umask may have taken bits away
            if let owner { try fd.setOwner(owner.0, group: owner.1) }
            try fd.sync()
        } catch {
            fd.close()
            _ = try? FileSystem.removeFile(temporary)
            throw error
        }
        fd.close()
        try FileSystem.rename(temporary, path)
        try FileSystem.syncDirectory(directory(of: path))
    }

    static func directory(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        return slash == path.startIndex ? "/" : String(path[..<slash])
    }

    /// Throws `.fileInUse` when another tunnel's journal in `stateDirectory` names `path`.
    static func refuseIfOwned(_ path: String, stateDirectory: String, except tunnelName: String) throws(DNSConfigError) {
        for file in FileSystem.list(stateDirectory).sorted() where file.hasSuffix(".dns") && file != "\(tunnelName).dns" {
            guard let bytes = try? FileSystem.read("\(stateDirectory)/\(file)"),
                  let other = try? DNSJournal(parsing: bytes, source: file) else { continue }
            if other.path == path { throw .fileInUse(path: path, tunnel: other.tunnel) }
        }
    }

    // MARK: Forwarder

    func forwarderConfiguration(_ settings: DNSSettings, previous: ResolvConf, interfaceName: String,
                                interfaceIndex: Int32) -> SplitDNSForwarder.Configuration {
        let tunnelServers = settings.servers.map { server -> SocketAddress in
            if case .v6(let address) = server, address.isLinkLocal {
                return .ipv6(server.bytes, port: 53, scope: UInt32(bitPattern: interfaceIndex))
            }
            return Self.socketAddress(server, port: 53)
        }
        var fallback: [SocketAddress] = previous.nameservers.compactMap { nameserver in
            guard let scope = nameserver.scope else { return Self.socketAddress(nameserver.address, port: 53) }
            guard let index = UInt32(scope) ?? SocketAddress.interfaceIndex(named: scope) else { return nil }
            return .ipv6(nameserver.address.bytes, port: 53, scope: index)
        }
        fallback.removeAll { Self.address(of: $0) == forwarderAddress }
        if previous.nameservers.isEmpty {
            fallback = [.ipv4([127, 0, 0, 1], port: 53)] // glibc's default when resolv.conf lists none
        }
        return SplitDNSForwarder.Configuration(
            listenAddress: Self.socketAddress(forwarderAddress, port: forwarderPort),
            policy: SplitDNSPolicy(matchDomains: settings.matchDomains ?? []),
            tunnelServers: tunnelServers, tunnelInterface: interfaceName, fallbackServers: fallback)
    }

    static func socketAddress(_ address: IPAddress, port: UInt16) -> SocketAddress {
        switch address {
        case .v4: .ipv4(address.bytes, port: port)
        case .v6: .ipv6(address.bytes, port: port)
        }
    }

    /// The IP address of an IPv4 or IPv6 socket address (nil for AF_UNIX).
    static func address(of socketAddress: SocketAddress) -> IPAddress? {
        switch socketAddress {
        case .ipv4(let bytes, _): .v4(IPv4Address(bytes: bytes))
        case .ipv6(let bytes, _, _): .v6(IPv6Address(bytes: bytes))
        case .unix: nil
        }
    }
}
