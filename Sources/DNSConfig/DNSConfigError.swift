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
    /// systemd-resolved manages DNS here, and this version cannot configure it.
    case systemdResolvedNotSupported
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
        case .systemdResolvedNotSupported:
            return "systemd-resolved manages DNS here, and this version cannot configure it yet"
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
