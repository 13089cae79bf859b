import CTunnelgateShims
import Glibc

/// Datagrams gathered for one sendmmsg, or filled by one recvmmsg: fixed
/// slots in one allocation, each with its peer's address. No allocation
/// per packet; the device thread owns it.
///
/// With `segmentation`, a run of datagrams to one address that are all of one length but the last
/// (the sealed segments of a TCP super-packet) goes as one message with UDP_SEGMENT (UDP GSO): the
/// kernel looks the route up once and takes one buffer down the stack for up to 64 datagrams. If
/// the kernel refuses (EIO, EINVAL, ENOPROTOOPT, EOPNOTSUPP), that run goes a datagram at a time
/// and segmentation stays off.
final class DatagramBatch {
    static let capacity = 64
    let slotSize: Int
    private let buffers: UnsafeMutableRawPointer
    private let lengths: UnsafeMutablePointer<Int>
    private let addresses: UnsafeMutableRawPointer
    private let addressLengths: UnsafeMutablePointer<UInt32>
    private static let addressSize = MemoryLayout<sockaddr_storage>.size
    private(set) var count = 0
    /// Whether flush may send runs with UDP_SEGMENT; cleared for good when the kernel refuses it.
    private(set) var segmentation: Bool
    /// Messages sent with UDP_SEGMENT.
    private(set) var segmentedSends: UInt64 = 0

    init(slotSize: Int, segmentation: Bool = false) {
        self.segmentation = segmentation
        self.slotSize = (slotSize + 15) & ~15
        buffers = .allocate(byteCount: self.slotSize * Self.capacity, alignment: 16)
        lengths = .allocate(capacity: Self.capacity)
        addresses = .allocate(byteCount: Self.addressSize * Self.capacity, alignment: 8)
        addressLengths = .allocate(capacity: Self.capacity)
    }

    deinit {
        buffers.deallocate()
        lengths.deallocate()
        addresses.deallocate()
        addressLengths.deallocate()
    }

    var isFull: Bool { count == Self.capacity }
    var isEmpty: Bool { count == 0 }

    /// Where the next datagram is written before `commit`.
    var nextSlot: UnsafeMutableRawBufferPointer {
        UnsafeMutableRawBufferPointer(start: buffers + count * slotSize, count: slotSize)
    }

    /// Takes the `length` bytes written at `nextSlot` as a datagram to `endpoint`.
    func commit(length: Int, to endpoint: Endpoint) {
        lengths[count] = length
        addressLengths[count] = UInt32(endpoint.withSockaddr { sockaddr, size in
            (addresses + count * Self.addressSize).copyMemory(from: sockaddr, byteCount: Int(size))
            return size
        })
        count += 1
    }

    /// Sends every datagram with sendmmsg on `fd`; returns how many failed.
    func flush(_ fd: Int32) -> Int {
        guard count > 0 else { return 0 }
        var segment: Int32 = segmentation ? 1 : 0
        var segmented: UInt32 = 0
        let n = CTunnelgateShims_send_batch(fd, buffers, slotSize, lengths, UInt32(count),
                                            addresses, Self.addressSize, addressLengths, &segment, &segmented)
        segmentation = segment != 0
        segmentedSends += UInt64(segmented)
        let failed = count - max(0, Int(n))
        count = 0
        return failed
    }

    /// Fills the batch with what recvmmsg has waiting on `fd`; returns the count (0: nothing waiting).
    func receive(_ fd: Int32) -> Int {
        let n = CTunnelgateShims_receive_batch(fd, buffers, slotSize, UInt32(Self.capacity), lengths,
                                               addresses, Self.addressSize)
        count = max(0, Int(n))
        return count
    }

    /// Received datagram `i` and where it came from.
    func datagram(_ i: Int) -> (bytes: UnsafeMutableRawBufferPointer, source: Endpoint?) {
        let bytes = UnsafeMutableRawBufferPointer(start: buffers + i * slotSize, count: min(lengths[i], slotSize))
        let source = (addresses + i * Self.addressSize).withMemoryRebound(to: sockaddr_storage.self, capacity: 1) { Endpoint($0) }
        return (bytes, source)
    }
}
