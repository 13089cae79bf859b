/// The names of one attachment's tunnel, derived from what identifies the attachment (the network,
/// CNI_CONTAINERID and CNI_IFNAME), so that DEL and CHECK find what ADD made from their own
/// parameters alone.
public struct AttachmentName: Equatable, Sendable {
    /// The tunnel's interface name in the container: "tgc" and 12 hex digits (15 bytes, the kernel's
    /// limit), which is also the tunnel's name for `tunnelgate status` and `down`.
    public let tunnel: String
    /// The name under /run/netns the plugin gives the container's namespace for the tunnel's life.
    public let namespace: String

    public init(network: String, containerID: String, ifname: String) {
        // FNV-1a (64 bits) of the three, NUL-separated; 48 bits of it. A collision between two live
        // attachments of a node (one in 2^24 at 4096 of them) is caught at ADD by the state record.
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in Array(network.utf8) + [0] + Array(containerID.utf8) + [0] + Array(ifname.utf8) {
            hash ^= UInt64(byte)
            hash = hash &* 0x0000_0100_0000_01b3
        }
        let hex = String(hash >> 16, radix: 16)
        tunnel = "tgc" + String(repeating: "0", count: 12 - hex.count) + hex
        namespace = "tgcni-" + tunnel
    }
}
