import LinuxSystem

/// A TUN interface (IFF_TUN | IFF_NO_PI) and the descriptor that keeps it
/// alive: the interface is not persistent, so it disappears with the last
/// descriptor, also when the owning process is killed.
///
/// With `offloads`, the TUN is asked for IFF_VNET_HDR with checksum and TCP
/// segmentation offload (TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6): whoever reads
/// it then gets a struct virtio_net_hdr before each packet, which may be a
/// TCP super-packet of up to 64 KB to segment, and must write one before each
/// packet. A kernel that refuses gets a plain TUN; `carriesVirtioHeader` says
/// which one was made.
public final class TunDevice {
    public let name: String
    public let descriptor: FileDescriptor
    public let index: Int32
    /// Whether reads and writes carry a struct virtio_net_hdr (IFF_VNET_HDR was granted).
    public let carriesVirtioHeader: Bool

    public init(name: String, offloads: Bool = false) throws(SystemCallError) {
        let opened = try FileDescriptor.openTun(named: name, offloads: offloads)
        descriptor = opened.descriptor
        carriesVirtioHeader = offloads && descriptor.carriesVirtioHeader
        self.name = opened.name
        do throws(SystemCallError) {
            index = Int32(try SocketAddress.index(ofInterface: self.name))
        } catch {
            descriptor.close()
            throw error
        }
    }

    /// Whether the TUN open on `descriptor` was made with IFF_VNET_HDR (TUNGETIFF), so that every
    /// read and write carries a struct virtio_net_hdr first. False for anything that is not a TUN.
    public static func carriesVirtioHeader(_ descriptor: FileDescriptor) -> Bool {
        descriptor.carriesVirtioHeader
    }

    private var closed = false

    /// Closes the descriptor; the kernel then deletes the interface. Idempotent.
    public func close() {
        guard !closed else { return }
        closed = true
        descriptor.close()
    }

    deinit { close() }
}
