import LinuxSystem

/// Datagrams gathered for one sendmmsg, or filled by one recvmmsg: fixed
/// slots in one allocation, each with its peer's address (a struct sockaddr
/// per slot, `SocketAddress.storageSize` bytes). No allocation per packet;
/// the device thread owns it. A `Bind` sends and fills it.
///
/// With `segmentation`, a run of datagrams to one address that are all of one length but the last
/// (the sealed segments of a TCP super-packet) goes as one message with UDP_SEGMENT (UDP GSO): the
/// kernel looks the route up once and takes one buffer down the stack for up to 64 datagrams. If
/// the kernel refuses (EIO, EINVAL, ENOPROTOOPT, EOPNOTSUPP), that run goes a datagram at a time
/// and segmentation stays off.
public final class DatagramBatch {
    /// Slots of a batch unless its maker says otherwise (sendmmsg batches; recvmmsg without UDP_GRO).
    public static let capacity = 64
    /// This batch's slots.
    public let capacity: Int
    public let slotSize: Int
    private let buffers: UnsafeMutableRawPointer
    private let lengths: UnsafeMutablePointer<Int>
    private let addresses: UnsafeMutableRawPointer
    private let addressLengths: UnsafeMutablePointer<UInt32>
    private let segmentSizes: UnsafeMutablePointer<UInt16>
    private static let addressSize = SocketAddress.storageSize
    public private(set) var count = 0
    /// Whether flush may send runs with UDP_SEGMENT; cleared for good when the kernel refuses it.
    public private(set) var segmentation: Bool
    /// Messages sent with UDP_SEGMENT.
    public private(set) var segmentedSends: UInt64 = 0

    public init(slotSize: Int, capacity: Int = DatagramBatch.capacity, segmentation: Bool = false) {
        precondition(capacity > 0)
        self.segmentation = segmentation
        self.capacity = capacity
        self.slotSize = (slotSize + 15) & ~15
        buffers = .allocate(byteCount: self.slotSize * capacity, alignment: 16)
        lengths = .allocate(capacity: capacity)
        addresses = .allocate(byteCount: Self.addressSize * capacity, alignment: 8)
        addressLengths = .allocate(capacity: capacity)
        segmentSizes = .allocate(capacity: capacity)
        segmentSizes.initialize(repeating: 0, count: capacity)
    }

    deinit {
        buffers.deallocate()
        lengths.deallocate()
        addresses.deallocate()
        addressLengths.deallocate()
        segmentSizes.deallocate()
    }

    public var isFull: Bool { count == capacity }
    public var isEmpty: Bool { count == 0 }

    /// Where the next datagram is written before `commit`.
    public var nextSlot: UnsafeMutableRawBufferPointer {
        UnsafeMutableRawBufferPointer(start: buffers + count * slotSize, count: slotSize)
    }

    /// Takes the `length` bytes written at `nextSlot` as a datagram to (or, received, from) `endpoint`.
    public func commit(length: Int, to endpoint: Endpoint) {
        lengths[count] = length
        segmentSizes[count] = 0
        addressLengths[count] = UInt32(endpoint.store(to: addresses + count * Self.addressSize))
        count += 1
    }

    /// Datagram `i` and its peer: where it came from (received), or where it goes (to send).
    public func datagram(_ i: Int) -> (bytes: UnsafeMutableRawBufferPointer, source: Endpoint?) {
        let bytes = UnsafeMutableRawBufferPointer(start: buffers + i * slotSize, count: min(lengths[i], slotSize))
        return (bytes, Endpoint(socketAddress: addresses + i * Self.addressSize))
    }

    /// Received datagram `i`'s segment size when the kernel merged a run of its sender's datagrams
    /// into it (UDP_GRO): every segment that long but the last. 0 when it is one datagram.
    public func segmentSize(_ i: Int) -> Int { Int(segmentSizes[i]) }

    /// Takes the `length` bytes written at `nextSlot` as a received run of datagrams from `endpoint`,
    /// merged as UDP_GRO merges them (`segmentSize` each, the last shorter or equal): what a `Bind`
    /// that is no socket does.
    public func commitReceived(length: Int, segmentSize: Int, from endpoint: Endpoint) {
        commit(length: length, to: endpoint)
        segmentSizes[count - 1] = UInt16(truncatingIfNeeded: segmentSize)
    }

    /// Forgets every datagram (a send that took them, or a receive about to fill the batch).
    public func removeAll() { count = 0 }

    /// Sends every datagram with sendmmsg on `socket`; returns how many failed. The batch is empty after.
    func flush(_ socket: FileDescriptor) -> Int {
        guard count > 0 else { return 0 }
        let sent = (try? socket.sendDatagrams(from: buffers, slotSize: slotSize, lengths: lengths, count: count,
                                               addresses: addresses, addressLengths: addressLengths,
                                               segmentation: &segmentation)) ?? (sent: 0, segmented: 0)
        segmentedSends += UInt64(sent.segmented)
        let failed = count - sent.sent
        count = 0
        return failed
    }

    /// Fills the batch with what recvmmsg has waiting on `socket`; returns the count (0: nothing waiting).
    func receive(_ socket: FileDescriptor) -> Int {
        let n = (try? socket.receiveDatagrams(into: buffers, slotSize: slotSize, count: capacity, lengths: lengths,
                                              addresses: addresses, segmentSizes: segmentSizes)) ?? 0
        count = max(0, n)
        return count
    }
}
