import Foundation

/// What ADD made for one attachment, kept in the plugin's state directory as NAME.record (JSON), so
/// that DEL removes exactly that and CHECK compares against it. Written before anything is made
/// (phase `adding`) and again once the tunnel is up (phase `up`): a plugin killed halfway leaves a
/// record DEL can finish from.
public struct AttachmentRecord: Codable, Equatable, Sendable {
    public enum Phase: String, Codable, Sendable {
        case adding
        case up
    }

    public var network: String
    public var containerID: String
    public var ifname: String
    /// CNI_NETNS at ADD.
    public var netns: String
    /// The inode of that namespace: CHECK refuses a CNI_NETNS that is another namespace.
    public var netnsInode: UInt64
    /// The tunnel's name (its interface in the container).
    public var tunnel: String
    /// The name under /run/netns the plugin gave the namespace.
    public var namespaceName: String
    /// The file `tunnelgate up` was given (in the state directory: a copy with the tunnel's name, or
    /// a link to a wg-quick file named after the tunnel).
    public var configuration: String
    /// Where the configuration came from and who chose it, for messages.
    public var source: String
    public var phase: Phase
    /// The tunnel's owner, once up: its pid and start time (which tell a reused pid apart).
    public var ownerPID: Int32?
    public var ownerStartTime: UInt64?

    public init(network: String, containerID: String, ifname: String, netns: String, netnsInode: UInt64, tunnel: String,
                namespaceName: String, configuration: String, source: String, phase: Phase) {
        self.network = network
        self.containerID = containerID
        self.ifname = ifname
        self.netns = netns
        self.netnsInode = netnsInode
        self.tunnel = tunnel
        self.namespaceName = namespaceName
        self.configuration = configuration
        self.source = source
        self.phase = phase
    }

    public func encoded() -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        return Array((try? encoder.encode(self)) ?? Data())
    }

    public static func decode(_ bytes: [UInt8]) -> AttachmentRecord? {
        try? JSONDecoder().decode(AttachmentRecord.self, from: Data(bytes))
    }

    /// True when the record is this attachment's (and not another's whose names hash alike).
    public func belongs(network: String, containerID: String, ifname: String) -> Bool {
        self.network == network && self.containerID == containerID && self.ifname == ifname
    }
}
