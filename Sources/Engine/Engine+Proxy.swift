import LinuxSystem
import TunnelgateSettings

/// What `status` shows of a tunnel's proxy files (TunnelRecord.proxy).
public struct ProxyRecord: Codable, Sendable, Equatable {
    /// The PAC file written (NAME.proxy.pac), if any.
    public var pacFile: String?
    /// The environment file written (NAME.proxy.env), if any.
    public var environmentFile: String?
    /// The provider's PAC URL: named, not fetched.
    public var pacURL: String?
    /// What the files cannot say.
    public var notes: [String]

    public init(pacFile: String? = nil, environmentFile: String? = nil, pacURL: String? = nil, notes: [String] = []) {
        self.pacFile = pacFile
        self.environmentFile = environmentFile
        self.pacURL = pacURL
        self.notes = notes
    }
}

extension Engine {
    /// Writes the proxy files of tunnel `name` in the namespace's proxy directory (0755; files 0644,
    /// for every program of the namespace), each journaled before it is written; removes the files of
    /// `previous` that `proxy` no longer has. nil `proxy`: only the removal. Nothing is enforced.
    func applyProxy(_ proxy: ProxyFiles?, name: String, previous: ProxyRecord?) throws(SystemCallError) -> ProxyRecord? {
        var record: ProxyRecord?
        var wanted: [(path: String, text: String)] = []
        if let proxy {
            var r = ProxyRecord(pacURL: proxy.pacURL, notes: proxy.notes)
            if let pac = proxy.pac {
                r.pacFile = state.proxyPACPath(name)
                wanted.append((state.proxyPACPath(name), pac))
            }
            if let environment = proxy.environment, !environment.isEmpty {
                r.environmentFile = state.proxyEnvironmentPath(name)
                wanted.append((state.proxyEnvironmentPath(name), environment))
            }
            record = r
        }
        if !wanted.isEmpty {
            let parent = state.proxyPath.split(separator: "/", omittingEmptySubsequences: false).dropLast().joined(separator: "/")
            try FileSystem.makeDirectory(parent, mode: 0o755)
            try FileSystem.makeDirectory(state.proxyPath, mode: 0o755)
            try Journal.append(path: state.journalPath(name), wanted.map { Journal.fileRecord($0.path) })
            for file in wanted { try FileSystem.writeAtomically(file.path, Array(file.text.utf8), mode: 0o644) }
        }
        for old in [previous?.pacFile, previous?.environmentFile].compactMap({ $0 }) where !wanted.contains(where: { $0.path == old }) {
            FileSystem.remove(old)
        }
        return record
    }

    /// Removes the files a journal records; what could not be removed.
    func removeFiles(_ journal: JournalContents) -> [String] {
        var failures: [String] = []
        for path in journal.files {
            FileSystem.remove(path)
            if FileSystem.exists(path) { failures.append("file \(path) remains") }
        }
        // The namespace's proxy directory goes when no tunnel has files there (rmdir refuses otherwise).
        if !journal.files.isEmpty { FileSystem.removeDirectory(state.proxyPath) }
        return failures
    }
}

extension ActiveTunnel {
    /// Publishes the proxy files now written (after a re-apply).
    func publish(proxy: ProxyRecord?) {
        updateRecord { $0.proxy = proxy }
    }

    /// Publishes whether the host's sleep is followed (a provider with disconnectOnSleep), or why not.
    public func publish(disconnectOnSleep note: String?) {
        updateRecord { $0.disconnectOnSleep = note }
    }
}
