import LinuxSystem

/// Tunnelgate's state directories (/run/tunnelgate/net-INODE, docs/architecture.md) of a run's
/// namespaces, which a killed scenario leaves behind: the sweep and `down` remove them.
///
/// A directory is named after its namespace's inode, which the kernel gives to a later namespace
/// once that one is gone; so it is told apart by the `namespace` file Tunnelgate keeps in it, the
/// namespace's cookie (SO_NETNS_COOKIE), never reused while the system runs. Only a directory whose
/// cookie is one of the run's is removed, and only when no tunnel in it is held: each running tunnel's
/// owner holds an flock on NAME.lock for its life.
public enum TunnelgateStateDirectories {
    public static let root = "/run/tunnelgate"

    /// The cookie a state directory's `namespace` file holds ("96541\n"); nil for anything else.
    public static func cookie(fromNamespaceFile bytes: [UInt8]) -> UInt64? {
        var text = String(decoding: bytes, as: UTF8.self)
        if text.hasSuffix("\n") { text.removeLast() }
        guard !text.isEmpty, text.allSatisfy(\.isASCII), text.allSatisfy(\.isNumber) else { return nil }
        return UInt64(text)
    }

    /// Of `entries` (directory name → its `namespace` file), the directories that belong to one of
    /// `cookies`: named net-DIGITS, with a cookie that is one of them.
    public static func belonging(to cookies: Set<UInt64>, entries: [String: [UInt8]?]) -> [String] {
        entries.compactMap { name, file in
            guard name.hasPrefix("net-"), !name.dropFirst(4).isEmpty, name.dropFirst(4).allSatisfy(\.isNumber),
                  let file, let c = cookie(fromNamespaceFile: file), cookies.contains(c) else { return nil }
            return name
        }.sorted()
    }

    /// Whether a tunnel's owner holds one of the directory's NAME.lock files.
    static func holdsLiveTunnel(_ directory: String) -> Bool {
        for name in FileSystem.list(directory) where name.hasSuffix(".lock") {
            guard let fd = try? FileDescriptor.open("\(directory)/\(name)", [.readOnly]) else { continue }
            defer { fd.close() }
            if (try? fd.tryLockExclusive()) != true { return true }
        }
        return false
    }

    /// Removes the state directories of the namespaces whose cookies are given; returns the problems
    /// (a directory left because a tunnel in it is still held).
    @discardableResult
    public static func remove(cookies: Set<UInt64>, root: String = root) -> [String] {
        guard !cookies.isEmpty, FileSystem.isDirectory(root) else { return [] }
        var entries: [String: [UInt8]?] = [:]
        for name in FileSystem.list(root) where FileSystem.isDirectory("\(root)/\(name)") {
            entries[name] = (try? FileSystem.read("\(root)/\(name)/namespace")) ?? nil
        }
        var problems: [String] = []
        for name in belonging(to: cookies, entries: entries) {
            let dir = "\(root)/\(name)"
            if holdsLiveTunnel(dir) {
                problems.append("\(dir): a tunnel in it is still running (its NAME.lock is held); left")
                continue
            }
            FileSystem.removeTree(dir)
        }
        return problems
    }
}
