import LinuxSystem

/// Why the DNS layer could not do what it was asked. Each case reads as one
/// line that says what failed, where, and why.
public enum DNSConfigError: Error, CustomStringConvertible {
    /// A system call failed; its text names the call, the path and the errno.
    case system(SystemCallError)
    /// A journal of this tunnel is already there: restore it before applying again.
    case journalExists(path: String)
    /// The journal cannot be read back.
    case corruptJournal(path: String, reason: String)
    /// Another tunnel's DNS already owns this file.
    case fileInUse(path: String, tunnel: String)
    /// The file to replace is neither a regular file nor a symbolic link.
    case unsupportedFile(path: String, kind: FileStatus.Kind)
    /// resolv.conf (`path`, which is `evidence`) says systemd-resolved
    /// manages DNS, but resolved does not answer on the system bus.
    case resolvedNotAnswering(path: String, evidence: String, SystemBusError)
    /// resolv.conf says systemd-resolved, and resolved answers, but it runs
    /// in another network namespace (process `pid`): it cannot serve this one's links.
    case resolvedInAnotherNamespace(path: String, evidence: String, pid: UInt32?)
    /// A call to systemd-resolved failed.
    case resolved(SystemBusError)
    /// resolved does not hold what was set on the link.
    case resolvedVerification(link: String, differences: [String])
    /// The split-DNS forwarder could not listen on its address.
    case forwarderListen(address: SocketAddress, SystemCallError)
    /// A call that the forwarder's current state does not allow.
    case invalidState(operation: String, state: String)

    public var description: String {
        switch self {
        case .system(let e):
            return e.description
        case .journalExists(let path):
            return "\(path) already exists: a previous DNS configuration of this tunnel was not restored (restore it first)"
        case .corruptJournal(let path, let reason):
            return "\(path) is not a DNS journal Tunnelgate can read: \(reason)"
        case .fileInUse(let path, let tunnel):
            return "\(path) is already managed by tunnel \(tunnel); only one tunnel per network namespace can set DNS"
        case .unsupportedFile(let path, let kind):
            let what = kind == .directory ? "a directory" : "a special file"
            return "\(path) is \(what), not a regular file or a symbolic link; it is left alone"
        case .resolvedNotAnswering(let path, let evidence, let error):
            return "\(path) is \(evidence), so systemd-resolved manages DNS here, but it does not answer on the "
                + "system bus (\(error)); start systemd-resolved, or replace \(path) with a file of your own "
                + "(Tunnelgate does not write over a resolv.conf that resolved manages)"
        case .resolvedInAnotherNamespace(let path, let evidence, let pid):
            return "\(path) is \(evidence), but the systemd-resolved on the system bus"
                + (pid.map { " (pid \($0))" } ?? "") + " runs in another network namespace and cannot serve "
                + "this one's links; run the tunnel in a named namespace (ip netns add) to give it its own resolv.conf"
        case .resolved(let error):
            return "systemd-resolved: \(error)"
        case .resolvedVerification(let link, let differences):
            return "systemd-resolved does not hold the DNS settings of link \(link): " + differences.joined(separator: "; ")
        case .forwarderListen(let address, let e):
            return "the split-DNS forwarder cannot listen on \(address): \(e)"
        case .invalidState(let operation, let state):
            return "\(operation) is not possible while the forwarder is \(state)"
        }
    }

    /// Runs a LinuxSystem call, turning its error into `.system`.
    @inline(__always)
    static func wrap<T>(_ body: () throws(SystemCallError) -> T) throws(DNSConfigError) -> T {
        do throws(SystemCallError) {
            return try body()
        } catch {
            throw .system(error)
        }
    }
}
