import FoundationEssentials
import LinuxSystem

/// What the lab knows of one run, kept in /run/tunnelgate-lab/RUN/run.json: written before the
/// first namespace is made (so that a crash at any point leaves something `lab sweep` can find)
/// and after each change.
public struct RunState: Codable, Sendable, Equatable {
    public var id: String
    /// The process the run belongs to: `lab sweep` removes the run once it is gone. A pid and its
    /// start time (a pid reused later has another).
    public var ownerPID: Int32
    public var ownerStartTime: UInt64?
    /// The topology file as given.
    public var topologyPath: String
    /// Node name → namespace name.
    public var namespaces: [String: String]
    /// Link name → the impairments in force on it.
    public var impairments: [String: LinkImpairment] = [:]
    /// Router node → NAT mode.
    public var nat: [String: NATMode] = [:]
    /// Node → the address every answer of its lying resolver gives (`lab dns-hijack`).
    public var dnsHijack: [String: String] = [:]
    /// Node → pid of the dnsmasq the lab runs in it (a truthful one, or the liar).
    public var dnsServers: [String: Int32] = [:]
    /// Node → interface → the addresses set by `lab addr` (in place of the topology's).
    public var addressOverrides: [String: [String: [String]]] = [:]
    /// The current phase of a scenario (`lab phase`).
    public var phase: String?
    /// Node → its namespace's cookie (SO_NETNS_COOKIE), recorded once the namespaces exist: what tells
    /// Tunnelgate's state directories of the run's namespaces from a later namespace's of the same
    /// inode after they are gone (TunnelgateStateDirectories). Absent in a state written before.
    public var namespaceCookies: [String: UInt64]?

    public init(id: String, ownerPID: Int32, ownerStartTime: UInt64?, topologyPath: String, namespaces: [String: String]) {
        self.id = id
        self.ownerPID = ownerPID
        self.ownerStartTime = ownerStartTime
        self.topologyPath = topologyPath
        self.namespaces = namespaces
    }

    /// The owner process is gone (or its pid now names another process).
    public var ownerIsGone: Bool {
        guard ProcessControl.exists(ownerPID), !ProcessControl.hasExited(ownerPID) else { return true }
        if let ownerStartTime, let now = ProcessControl.startTime(of: ownerPID), now != ownerStartTime { return true }
        return false
    }
}

/// What is in force on one link.
public struct LinkImpairment: Codable, Sendable, Equatable {
    public var lossPercent: Int?
    public var rateKbit: UInt64?
    public var blackholeBytes: Int?
    public var down = false
    public init() {}
    public var isEmpty: Bool { lossPercent == nil && rateKbit == nil && blackholeBytes == nil && !down }
}

public enum NATMode: String, Codable, Sendable, CaseIterable {
    /// `masquerade`: the router's address, the source port kept where it is free (Linux's default).
    case masquerade
    /// `masquerade persistent`: the same, with one mapping per source address.
    case portPreserving = "port-preserving"
    /// `masquerade fully-random`: a random source port for every new flow.
    case portRandom = "port-random"
}
