import LinuxSystem

extension DNSConfigurator {
    /// The resolver the network itself gives this namespace, beneath any tunnel's DNS: when a tunnel of
    /// this state directory replaced a resolv.conf (its NAME.dns journal holds the file as it was), that
    /// original; else `path` as it is now (`/etc/resolv.conf`, which `ip netns exec` binds to the
    /// namespace's own). On-demand rules are judged by the network's DNS, not the tunnel's, as on iOS.
    /// systemd-resolved's per-link settings are not read (its global resolv.conf stub says 127.0.0.53).
    public static func underlyingResolvConf(stateDirectory: String, path: String = "/etc/resolv.conf") -> ResolvConf {
        for file in FileSystem.list(stateDirectory) where file.hasSuffix(".dns") {
            let journalPath = "\(stateDirectory)/\(file)"
            guard let bytes = try? FileSystem.read(journalPath),
                  let journal = try? DNSJournal(parsing: bytes, source: journalPath),
                  case .file(_, _, let original) = journal.change else { continue }
            switch original {
            case .file(let bytes, _, _, _): return ResolvConf(parsing: bytes)
            case .absent, .symbolicLink: return ResolvConf()
            }
        }
        return ResolvConf(parsing: (try? FileSystem.read(path)) ?? [])
    }
}
