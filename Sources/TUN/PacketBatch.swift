/// Packets for one batched read from, or write to, a TUN or anything else a `PacketIO` stands for,
/// as wireguard-go's tun.Device passes them (buffers, sizes and an offset): up to `capacity`
/// packets, each with its virtio_net_hdr when the I/O carries one, and `headroom` bytes free before
/// each packet for whatever the I/O or its caller puts there.
///
/// A batch made with a `slotSize` owns its memory: `capacity` slots of `headroom + slotSize` bytes,
/// which `PacketIO.read(into:)` fills. A batch made without one refers to packets in someone else's
/// memory, appended one by one, for a write: the WireGuard device hands the TUN the packets it
/// decrypted in place in its datagram batch, and the I/O writes each packet's virtio_net_hdr in the
/// `headroom` bytes before it (the spent transport header), so header and packet go in one write
/// without a copy.
///
/// Used by one thread at a time. Everything is allocated by `init`; nothing after.
public final class PacketBatch {
    /// A write's outcome: the packets the I/O took, and their bytes (headers not counted).
    public struct Written: Sendable, Equatable {
        public var packets = 0
        public var bytes = 0
        public init(packets: Int = 0, bytes: Int = 0) {
            self.packets = packets
            self.bytes = bytes
        }
    }

    public let capacity: Int
    /// Bytes before each packet that a read or write may use: in an owning batch, the start of every
    /// slot; in a batch of references, what the appender promises is writable before each packet.
    public let headroom: Int
    /// The largest packet a slot holds; 0 for a batch of references.
    public let slotSize: Int
    /// Packets in the batch.
    @inlinable public var count: Int { stored }
    @usableFromInline var stored = 0
    /// Packets the last read took from the I/O and dropped because they were no packet (shorter than
    /// their virtio_net_hdr) or larger than a slot. Reset by `removeAll()`.
    public var droppedReads = 0

    @usableFromInline let storage: UnsafeMutableRawPointer?
    @usableFromInline let stride: Int
    @usableFromInline let starts: UnsafeMutablePointer<UnsafeMutableRawPointer?>
    @usableFromInline let lengths: UnsafeMutablePointer<Int>
    @usableFromInline let headers: UnsafeMutablePointer<VirtioNetHeader>

    /// A batch that owns `capacity` slots of `slotSize` bytes, each after `headroom` free bytes: for reads.
    public init(capacity: Int, slotSize: Int, headroom: Int) {
        precondition(capacity > 0 && slotSize > 0 && headroom >= 0)
        self.capacity = capacity
        self.slotSize = slotSize
        self.headroom = headroom
        // Slots start 16-byte aligned after their headroom, so that a packet's IP header is aligned too.
        let before = (headroom + 15) & ~15
        stride = (before + slotSize + 15) & ~15
        let base = UnsafeMutableRawPointer.allocate(byteCount: stride * capacity, alignment: 16)
        storage = base + (before - headroom)
        starts = .allocate(capacity: capacity)
        starts.initialize(repeating: nil, count: capacity)
        lengths = .allocate(capacity: capacity)
        lengths.initialize(repeating: 0, count: capacity)
        headers = .allocate(capacity: capacity)
        headers.initialize(repeating: VirtioNetHeader(), count: capacity)
    }

    /// A batch of up to `capacity` references to packets elsewhere, each with `headroom` writable bytes
    /// before it: for writes.
    public init(references capacity: Int, headroom: Int) {
        precondition(capacity > 0 && headroom >= 0)
        self.capacity = capacity
        self.headroom = headroom
        slotSize = 0
        stride = 0
        storage = nil
        starts = .allocate(capacity: capacity)
        starts.initialize(repeating: nil, count: capacity)
        lengths = .allocate(capacity: capacity)
        lengths.initialize(repeating: 0, count: capacity)
        headers = .allocate(capacity: capacity)
        headers.initialize(repeating: VirtioNetHeader(), count: capacity)
    }

    deinit {
        if let storage { (storage - (((headroom + 15) & ~15) - headroom)).deallocate() }
        starts.deallocate()
        lengths.deallocate()
        headers.deallocate()
    }

    @inlinable
    public var isEmpty: Bool { count == 0 }
    @inlinable
    public var isFull: Bool { count == capacity }

    /// Empties the batch (the slots keep their bytes) and resets `droppedReads`.
    @inlinable
    public func removeAll() {
        stored = 0
        droppedReads = 0
    }

    // MARK: Reading into an owning batch

    /// The whole next slot, headroom first (`headroom + slotSize` bytes), for a read to fill before `commit`.
    @inlinable
    public var nextSlot: UnsafeMutableRawBufferPointer {
        precondition(storage != nil, "a batch of references has no slots")
        precondition(count < capacity, "the batch is full")
        return UnsafeMutableRawBufferPointer(start: storage! + count * stride, count: headroom + slotSize)
    }

    /// Takes the `length` bytes after the next slot's headroom as the next packet, with `header`.
    @inlinable
    public func commit(length: Int, header: VirtioNetHeader = VirtioNetHeader()) {
        precondition(storage != nil && count < capacity && length >= 0 && length <= slotSize)
        starts[count] = storage! + count * stride + headroom
        lengths[count] = length
        headers[count] = header
        stored += 1
    }

    // MARK: Referring to packets elsewhere

    /// Appends a reference to `packet`; the `headroom` bytes before it must be writable until the batch
    /// is written.
    @inlinable
    public func append(_ packet: UnsafeMutableRawBufferPointer, header: VirtioNetHeader = VirtioNetHeader()) {
        precondition(count < capacity, "the batch is full")
        starts[count] = packet.baseAddress
        lengths[count] = packet.count
        headers[count] = header
        stored += 1
    }

    // MARK: The packets

    /// Packet `i` (0 ..< count): its bytes, after its headroom.
    @inlinable
    public func packet(_ i: Int) -> UnsafeMutableRawBufferPointer {
        precondition(i >= 0 && i < count)
        return UnsafeMutableRawBufferPointer(start: starts[i], count: lengths[i])
    }

    /// Packet `i`'s virtio_net_hdr: the one a read gave, or the one a write puts before it.
    @inlinable
    public func header(_ i: Int) -> VirtioNetHeader {
        precondition(i >= 0 && i < count)
        return headers[i]
    }

    @inlinable
    public func setHeader(_ header: VirtioNetHeader, of i: Int) {
        precondition(i >= 0 && i < count)
        headers[i] = header
    }

    /// Calls `body` with the packets' addresses and lengths as C arrays of `count` (what the callback
    /// ABI's packet_in_batch takes).
    public func withPacketPointers<R>(_ body: (UnsafePointer<UnsafePointer<UInt8>?>, UnsafePointer<Int>, Int) throws -> R) rethrows -> R {
        try UnsafeMutableRawPointer(starts).withMemoryRebound(to: UnsafePointer<UInt8>?.self, capacity: capacity) {
            try body($0, lengths, count)
        }
    }
}
