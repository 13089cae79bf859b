import LinuxSystem
import Netlink
import Nftables

/// A node of a run: its namespace, entered for the length of a call.
public struct NodeNamespace {
    public let node: String
    public let namespaceName: String

    public init(node: String, namespaceName: String) {
        self.node = node
        self.namespaceName = namespaceName
    }

    /// Runs `body` on the calling thread inside the node's namespace (sockets opened inside stay there).
    public func perform<T>(_ body: () throws -> T) throws -> T {
        let ns: NetworkNamespace
        do { ns = try NetworkNamespace(named: namespaceName) } catch {
            throw LabError("node \(node): cannot open its namespace \(namespaceName): \(error)")
        }
        var result: Result<T, any Error>?
        do {
            try ns.perform { () throws(SystemCallError) in
                result = Result { try body() }
            }
        } catch {
            throw LabError("node \(node): \(error)")
        }
        return try result!.get()
    }

    /// An rtnetlink socket in the node.
    public func netlink() throws -> NetlinkSocket {
        try perform { () throws -> NetlinkSocket in
            do { return try NetlinkSocket() } catch { throw LabError("node \(node): \(error)") }
        }
    }

    /// An nf_tables socket in the node.
    public func nftables() throws -> NftablesProgramSocket {
        try perform { () throws -> NftablesProgramSocket in
            do { return try NftablesProgramSocket() } catch { throw LabError("node \(node): \(error)") }
        }
    }

    /// Writes a sysctl (a key under net.) in the node: /proc/sys/net/… opened from inside it.
    public func setSysctl(_ key: String, _ value: String) throws {
        let path = "/proc/sys/" + key.replacing(".", with: "/")
        try perform { () throws in
            do { try FileSystem.write(path, value + "\n") } catch {
                throw LabError("node \(node): sysctl \(key)=\(value): \(error)")
            }
        }
    }

    public var inode: UInt64? { NamedNetworkNamespaces.inode(namespaceName) }
}
