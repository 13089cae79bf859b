import LinuxSystem

/// Batched packet I/O on a TUN, or on anything that stands for one: what every reader and writer of a
/// tunnel's packets works through (the WireGuard device, the runtimes' writer, the packet loop). After
/// wireguard-go's tun.Device: reads and writes take batches, a TUN made with IFF_VNET_HDR puts a
/// struct virtio_net_hdr before every packet (its offset: the batch's headroom), and the MTU says how
/// large a packet may be.
///
/// `TunPacketIO` is the real one, over a TUN descriptor; `PacketChannel` is an in-memory double with
/// two ends, so that whatever moves packets can be tested without root.
///
/// Reads and batch writes belong to one thread at a time; `write(_:)` of one packet may be called from
/// any thread, also while another reads.
public protocol PacketIO: AnyObject, Sendable {
    /// The largest packet without offloads: the interface's MTU.
    var mtu: Int { get }
    /// Whether a struct virtio_net_hdr comes before every packet read (a read may then be a TCP
    /// super-packet, or need its checksum completed: `VirtioNetHeader.prepare`) and goes before every
    /// packet written (`PacketBatch.header(_:)`, GSO_NONE unless set).
    var carriesVirtioHeader: Bool { get }
    /// Readable (POLLIN) while a read would give a packet: what an event loop polls. Owned by the I/O.
    var readiness: FileDescriptor { get }
    /// The largest packet a read can give, which a slot of a read batch must hold: the MTU, or with a
    /// virtio_net_hdr a super-packet of up to `VirtioNetHeader.largestPacket` bytes.
    var largestRead: Int { get }

    /// Reads what is waiting, up to `batch.capacity` packets (the batch is emptied first; it must own
    /// slots of at least `headerSize` bytes of headroom): how many packets it now holds, 0 when none was
    /// waiting. Reads that were no packet or did not fit a slot are dropped and counted in
    /// `batch.droppedReads`. Throws only when the first read fails (a later failure ends the batch, and
    /// comes again on the next read).
    func read(into batch: PacketBatch) throws(SystemCallError) -> Int

    /// Writes every packet of `batch`, each with its virtio_net_hdr in the `headerSize` bytes before it
    /// when the I/O carries one (the batch's headroom must have room for it). A packet the other side
    /// refuses is skipped and the rest still go: what was written.
    func write(_ batch: PacketBatch) -> PacketBatch.Written

    /// Writes one packet gathered from `pieces`, with `header` in the `headerSize` bytes before piece 0
    /// (which must be writable) when the I/O carries one: a super-packet's merged headers then its
    /// segments' payloads where they lie (`PacketCoalescer`). Whether the other side took it whole.
    func write(_ pieces: IOVectors, header: VirtioNetHeader) -> Bool

    /// Writes one packet that has no headroom (a GSO_NONE virtio_net_hdr is sent before it when the
    /// I/O carries one): the bytes of `packet` written. Safe from any thread.
    func write(_ packet: UnsafeRawBufferPointer) throws(SystemCallError) -> Int
}

extension PacketIO {
    /// The bytes before each packet that the virtio_net_hdr takes: `VirtioNetHeader.size` or 0.
    public var headerSize: Int { carriesVirtioHeader ? VirtioNetHeader.size : 0 }

    /// A batch of `capacity` slots that fits every read of this I/O.
    public func makeReadBatch(capacity: Int) -> PacketBatch {
        PacketBatch(capacity: capacity, slotSize: largestRead, headroom: headerSize)
    }
}
