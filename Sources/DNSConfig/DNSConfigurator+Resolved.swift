import LinuxSystem
import TunnelgateSettings

/// The systemd-resolved backend: the tunnel's NEDNSSettings become per-link
/// settings of its interface in resolved (`ResolvedLinkSettings`), set over
/// D-Bus, and RevertLink takes them back.
extension DNSConfigurator {
    /// Seconds each call to resolved may take.
    static let resolvedTimeout = 5.0

    /// Journal first (STATEDIR/NAME.dns names the link by index and name),
    /// then the setters, then the link's properties read back and compared.
    /// On any failure the link is reverted before the error is thrown.
    /// Several tunnels of one namespace may each set their own link; a stale
    /// journal of another tunnel naming the same index is no conflict (its
    /// restore checks the name as well).
    func applyResolved(_ settings: DNSSettings, interfaceName: String, interfaceIndex: Int32,
                       stateDirectory: String, tunnelName: String) throws(DNSConfigError) -> DNSApplied {
        let journalPath = DNSJournal.path(stateDirectory: stateDirectory, tunnelName: tunnelName)
        let wanted = ResolvedLinkSettings(settings)
        let journal = DNSJournal(tunnel: tunnelName, resolvedLinkIndex: interfaceIndex, name: interfaceName)
        try DNSConfigError.wrap { () throws(SystemCallError) in
            try FileSystem.writeAtomically(journalPath, journal.encoded, mode: 0o600)
            try FileSystem.syncDirectory(stateDirectory)
        }
        do throws(DNSConfigError) {
            let resolved = try Self.resolvedClient(paths)
            let actual: ResolvedLinkSettings
            do throws(SystemBusError) {
                try resolved.apply(wanted, index: interfaceIndex)
                actual = try resolved.settings(index: interfaceIndex)
            } catch {
                throw .resolved(error)
            }
            let differences = wanted.differences(from: actual)
            guard differences.isEmpty else {
                throw .resolvedVerification(link: "\(interfaceName) (\(interfaceIndex))", differences: differences)
            }
        } catch {
            try? Self.restore(stateDirectory: stateDirectory, tunnelName: tunnelName, paths: paths)
            throw error
        }
        return DNSApplied(backend: .systemdResolved, path: nil, journalPath: journalPath, forwarder: nil)
    }

    /// RevertLink for link `index`, when the calling thread's network
    /// namespace still has an interface `name` with that index. When it has
    /// not, the tunnel's interface is gone — resolved drops a link's
    /// settings when the kernel removes the link — and an interface that
    /// took over the index is someone else's: nothing is sent. A resolved
    /// that no longer knows the link (NoSuchLink) is success too.
    static func restoreResolvedLink(index: Int32, name: String, paths: DNSPaths) throws(DNSConfigError) {
        guard SocketAddress.interfaceIndex(named: name) == UInt32(index) else { return }
        let resolved = try resolvedClient(paths)
        do throws(SystemBusError) {
            try resolved.revert(index: index)
        } catch where error.errorName == ResolvedClient.noSuchLink {
            return
        } catch {
            throw .resolved(error)
        }
    }

    static func resolvedClient(_ paths: DNSPaths) throws(DNSConfigError) -> ResolvedClient {
        do throws(SystemBusError) {
            return ResolvedClient(bus: try SystemBus(address: paths.systemBusAddress, timeout: resolvedTimeout))
        } catch {
            throw .resolved(error)
        }
    }
}
