import LinuxSystem
import Netlink
import Nftables
import TunnelgateSettings

/// Why the engine could not do what it was asked. Each case reads as one
/// line that says what failed and why.
public enum EngineError: Error, CustomStringConvertible {
    case configuration(ConfigurationError)
    case alreadyRunning(name: String, pid: Int32?)
    case interfaceExists(String)
    case noFreeSlot
    case notFound(String)
    case system(SystemCallError)
    case netlink(NetlinkError)
    case apply(NetlinkBatchError, rolledBack: Bool)
    case verification([String], rolledBack: Bool)
    case firewall(NftablesError, rolledBack: Bool)
    case dns(String, rolledBack: Bool)
    case stopTimeout(name: String, pid: Int32)
    case residue(name: String, [String])

    public var description: String {
        switch self {
        case .configuration(let e): return e.description
        case .alreadyRunning(let name, let pid):
            return "tunnel \(name) is already up\(pid.map { " (pid \($0))" } ?? "") in this network namespace"
        case .interfaceExists(let name):
            return "an interface named \(name) already exists in this network namespace; choose another `name`"
        case .noFreeSlot:
            return "no free tunnel slot: \(TunnelSlot.count) tunnels are already up in this network namespace"
        case .notFound(let name): return "no tunnel named \(name) in this network namespace"
        case .system(let e): return e.description
        case .netlink(let e): return e.description
        case .apply(let e, let rolledBack):
            return "applying the settings failed: \(e)" + (rolledBack ? "\neverything applied was rolled back" : "")
        case .verification(let problems, let rolledBack):
            return "the kernel state does not match the plan after applying:\n" + problems.prefix(10).joined(separator: "\n")
                + (rolledBack ? "\neverything applied was rolled back" : "")
        case .firewall(let e, let rolledBack):
            return "applying the kill switch failed: \(e)" + (rolledBack ? "\neverything applied was rolled back" : "")
        case .dns(let e, let rolledBack):
            return "applying dnsSettings failed: \(e)" + (rolledBack ? "\neverything applied was rolled back" : "")
        case .stopTimeout(let name, let pid):
            return "tunnel \(name) (pid \(pid)) did not stop in time"
        case .residue(let name, let problems):
            return "removing tunnel \(name) left kernel state behind:\n" + problems.joined(separator: "\n")
        }
    }
}
