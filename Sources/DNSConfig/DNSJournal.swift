
/// STATEDIR/NAME.dns: what a tunnel's DNS configuration is about to change,
/// written (synced, renamed into place) before anything changes, so that
/// `DNSConfigurator.restore` can put it back from this file alone, also
/// after the process was killed.
///
/// One record per line:
///   tunnelgate-dns 1
///   tunnel NAME
///   backend resolv.conf | backend netns NAMESPACE | backend systemd-resolved
/// then, for the resolv.conf backends:
///   path PATH                          the file that is replaced (rest of the line)
///   created-directory PATH             a directory that did not exist (zero or more, in creation order)
///   original absent                    PATH did not exist
///   original file MODE UID GID HEX     PATH was a regular file: octal mode, owner, and its bytes in hex
///   original symlink HEX               PATH was a symbolic link to this target
///   forwarder ADDRESS                  split DNS: the forwarder's address (informational)
/// or, for systemd-resolved:
///   link INDEX NAME                    the interface whose per-link settings are set (RevertLink on restore)
struct DNSJournal: Hashable, Sendable {
    enum Original: Hashable, Sendable {
        case absent
        /// The permission bits, owner and group are mode_t, uid_t and gid_t (FileStatus's).
        case file(bytes: [UInt8], permissions: UInt32, owner: UInt32, group: UInt32)
        case symbolicLink(target: [UInt8])
    }

    /// What is about to change.
    enum Change: Hashable, Sendable {
        /// A resolv.conf backend: the file that is replaced, the directories created for it, what it was.
        case file(path: String, createdDirectories: [String], original: Original)
        /// systemd-resolved: the link (index and name, both checked on restore) whose settings are set.
        case resolvedLink(index: Int32, name: String)
    }

    var tunnel: String
    var backend: DNSBackendKind
    var change: Change
    var forwarder: String?

    /// The file a resolv.conf backend replaces; nil for systemd-resolved.
    var path: String? {
        if case .file(let path, _, _) = change { return path }
        return nil
    }

    static let magic = "tunnelgate-dns 1"

    static func path(stateDirectory: String, tunnelName: String) -> String {
        "\(stateDirectory)/\(tunnelName).dns"
    }

    /// The temporary name a replacement is written under before it is renamed over `path`.
    static func temporaryPath(for path: String) -> String { path + ".tunnelgate-tmp" }

    var encoded: [UInt8] {
        var lines = [Self.magic, "tunnel \(tunnel)"]
        switch backend {
        case .resolvConf: lines.append("backend resolv.conf")
        case .namespaceResolvConf(let namespace): lines.append("backend netns \(namespace)")
        case .systemdResolved: lines.append("backend systemd-resolved")
        }
        switch change {
        case .file(let path, let createdDirectories, let original):
            lines.append("path \(path)")
            for directory in createdDirectories { lines.append("created-directory \(directory)") }
            switch original {
            case .absent:
                lines.append("original absent")
            case .file(let bytes, let permissions, let owner, let group):
                lines.append("original file \(String(permissions, radix: 8)) \(owner) \(group) \(Self.hex(bytes))")
            case .symbolicLink(let target):
                lines.append("original symlink \(Self.hex(target))")
            }
        case .resolvedLink(let index, let name):
            lines.append("link \(index) \(name)")
        }
        if let forwarder { lines.append("forwarder \(forwarder)") }
        return Array((lines.joined(separator: "\n") + "\n").utf8)
    }

    /// The journal of a resolv.conf backend.
    init(tunnel: String, backend: DNSBackendKind, path: String, createdDirectories: [String] = [],
         original: Original, forwarder: String? = nil) {
        self.tunnel = tunnel
        self.backend = backend
        self.change = .file(path: path, createdDirectories: createdDirectories, original: original)
        self.forwarder = forwarder
    }

    /// The journal of the systemd-resolved backend: link `index`, named `name`.
    init(tunnel: String, resolvedLinkIndex index: Int32, name: String) {
        self.tunnel = tunnel
        self.backend = .systemdResolved
        self.change = .resolvedLink(index: index, name: name)
        self.forwarder = nil
    }

    /// Reads a journal back; `source` names the file in errors.
    init(parsing bytes: [UInt8], source: String) throws(DNSConfigError) {
        func corrupt(_ reason: String) -> DNSConfigError { .corruptJournal(path: source, reason: reason) }
        let lines = bytes.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: true)
            .map { String(decoding: $0, as: UTF8.self) }
        guard lines.first == Self.magic else { throw corrupt("the first line is not '\(Self.magic)'") }
        var tunnel: String?, backend: DNSBackendKind?, path: String?, original: Original?
        var directories: [String] = [], forwarder: String?, link: (index: Int32, name: String)?
        for (number, line) in lines.enumerated().dropFirst() {
            let fields = line.split(separator: " ", maxSplits: 1).map(String.init)
            guard fields.count == 2 else { throw corrupt("line \(number + 1) has no value: '\(line)'") }
            let value = fields[1]
            switch fields[0] {
            case "tunnel": tunnel = value
            case "path": path = value
            case "created-directory": directories.append(value)
            case "forwarder": forwarder = value
            case "link":
                let f = value.split(separator: " ", maxSplits: 1).map(String.init)
                guard f.count == 2, let index = Int32(f[0]), index > 0, !f[1].isEmpty, !f[1].contains(" ") else {
                    throw corrupt("line \(number + 1): malformed 'link' record")
                }
                link = (index, f[1])
            case "backend":
                if value == "resolv.conf" { backend = .resolvConf }
                else if value.hasPrefix("netns "), value.count > 6 { backend = .namespaceResolvConf(namespace: String(value.dropFirst(6))) }
                else if value == "systemd-resolved" { backend = .systemdResolved }
                else { throw corrupt("line \(number + 1): unknown backend '\(value)'") }
            case "original":
                let f = value.split(separator: " ").map(String.init)
                switch f.first {
                case "absent" where f.count == 1:
                    original = .absent
                case "file" where f.count == 4 || f.count == 5:
                    guard let mode = UInt32(f[1], radix: 8), let owner = UInt32(f[2]), let group = UInt32(f[3]),
                          let content = Self.unhex(f.count == 5 ? f[4] : "") else {
                        throw corrupt("line \(number + 1): malformed 'original file' record")
                    }
                    original = .file(bytes: content, permissions: mode, owner: owner, group: group)
                case "symlink" where f.count == 2:
                    guard let target = Self.unhex(f[1]), !target.isEmpty else {
                        throw corrupt("line \(number + 1): malformed 'original symlink' record")
                    }
                    original = .symbolicLink(target: target)
                default:
                    throw corrupt("line \(number + 1): malformed 'original' record")
                }
            default:
                throw corrupt("line \(number + 1): unknown record '\(fields[0])'")
            }
        }
        guard let tunnel else { throw corrupt("no 'tunnel' record") }
        guard let backend else { throw corrupt("no 'backend' record") }
        if backend == .systemdResolved {
            guard let link else { throw corrupt("no 'link' record") }
            guard path == nil, original == nil, directories.isEmpty, forwarder == nil else {
                throw corrupt("a systemd-resolved journal with a file's records")
            }
            self.init(tunnel: tunnel, resolvedLinkIndex: link.index, name: link.name)
            return
        }
        guard link == nil else { throw corrupt("a 'link' record in a resolv.conf journal") }
        guard let path, path.hasPrefix("/") else { throw corrupt("no absolute 'path' record") }
        guard let original else { throw corrupt("no 'original' record") }
        self.init(tunnel: tunnel, backend: backend, path: path, createdDirectories: directories,
                  original: original, forwarder: forwarder)
    }

    static func hex(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count * 2)
        for b in bytes {
            out.append(digits[Int(b >> 4)])
            out.append(digits[Int(b & 0x0f)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    static func unhex(_ text: String) -> [UInt8]? {
        let chars = Array(text.utf8)
        guard chars.count % 2 == 0 else { return nil }
        func value(_ c: UInt8) -> UInt8? {
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): c - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): c - UInt8(ascii: "a") + 10
            default: nil
            }
        }
        var out: [UInt8] = []
        out.reserveCapacity(chars.count / 2)
        var i = 0
        while i < chars.count {
            guard let high = value(chars[i]), let low = value(chars[i + 1]) else { return nil }
            out.append(high << 4 | low)
            i += 2
        }
        return out
    }
}
