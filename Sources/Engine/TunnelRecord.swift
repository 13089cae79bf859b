import TunnelgateSettings
import LinuxSystem
import RuntimeABI
import TUN
import RuntimeABI

/// NEVPNStatus, as Tunnelgate reports it.
public enum TunnelStatus: String, Codable, Sendable {
    case disconnected, connecting, connected, reasserting, disconnecting
}

/// What the owner of a tunnel publishes in NAME.state for `status` and `down`.
public struct TunnelRecord: Codable, Sendable, Equatable {
    public var name: String
    public var pid: Int32
    public var status: TunnelStatus
    /// The tunnel's slot (table, priorities, mark); `noSlot` for a claim (`Engine.claim`: nothing applied).
    public var slot: Int
    public static let noSlot = -1
    public var configPath: String?
    public var since: Double
    /// When the tunnel last went reasserting in this run (CLOCK_MONOTONIC, like `since`); nil until it has.
    public var lastReasserting: Double?
    /// The runtime's own status JSON, as it last reported it (secrets scrubbed).
    public var runtimeStatus: String?
    /// Which DNS backend the tunnel's dnsSettings went to.
    public var dnsBackend: String?
    /// The namespace the tunnel's interface was moved into (isolate mode).
    public var isolatedIn: String?
    /// Whose packets to the carriers bypass the tunnel, in words (TunnelPlan.carrierExemption).
    public var carrierExemption: String?
    /// The packet plane's pid and uid (the unprivileged process that runs the runtime), while it runs.
    public var planePID: Int32?
    public var planeUser: UInt32?
    /// false when the plane runs without its read-only mount namespace (TUNNELGATE_PLANE_MOUNT_NAMESPACE
    /// off, in a container without CAP_SYS_ADMIN); nil (older records) or true: with it.
    public var planeMountNamespace: Bool?
    public var counters: PacketCounters?
    /// A provider's proxy settings as the files written for the namespace (Engine+Proxy).
    public var proxy: ProxyRecord?
    /// For a provider with disconnectOnSleep: "following logind's PrepareForSleep on BUS", or why not.
    public var disconnectOnSleep: String?

    public func write(to path: String) throws(SystemCallError) {
        let json = (try? JSONCoding.encodeValue(self)) ?? .object([])
        try FileSystem.writeAtomically(path, Array(json.sortingKeys().serialized().utf8))
    }

    public static func read(from path: String) -> TunnelRecord? {
        guard let bytes = try? FileSystem.read(path) else { return nil }
        return try? JSONCoding.decode(TunnelRecord.self, from: bytes)
    }
}

extension TunnelRecord {
    /// Who the packet plane is (nil pid: none runs now; its mount namespace is then unknown).
    mutating func setPlane(pid: Int32?, user: UInt32?, mountNamespace: Bool?) {
        planePID = pid
        planeUser = user
        planeMountNamespace = pid == nil ? nil : mountNamespace
    }
}
