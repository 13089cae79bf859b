import LinuxSystem
import RuntimeABI
import TUN

/// The callback path's packets from the host, as the runtime takes them: IP packets of at most the
/// MTU, in the order the TUN gave them, handed in up to `capacity` at a time.
///
/// Without a virtio_net_hdr every TUN read is one packet, up to `capacity` reads per batch, and each is
/// handed in where it was read. With one (the engine makes a callback-path TUN with checksum and TCP
/// segmentation offload), the kernel's TCP sends a super-packet of up to 64 KB where it sent 40
/// packets, and the loop makes one read for all of them: each super-packet is cut here into the
/// segments a NIC would have sent (`TCPSegmentation`, checksums computed anew) in a staging area of
/// `capacity` MTU-sized slots, and a single packet's partial checksum is completed in place. A
/// super-packet with more segments than fit is cut over several fills; nothing is dropped for it.
///
/// One thread (the plane's loop) uses it. Everything is allocated by `init`.
final class HostPackets {
    static let capacity = 64

    let io: any PacketIO
    let mtu: Int
    /// The packets of the current fill, `count` of them: what `packetIn(batch:)` takes.
    let pointers: UnsafeMutablePointer<UnsafePointer<UInt8>?>
    let lengths: UnsafeMutablePointer<Int>
    private(set) var count = 0
    /// Packets over the MTU, dropped (the loop adds the writer's).
    private(set) var overMTU: UInt64 = 0

    private let reads: PacketBatch
    private var readIndex = 0
    /// The super-packet being cut: its index in `reads`, its plan, its next segment.
    private var cutting: (index: Int, plan: TCPSegmentation, next: Int)?
    private let staging: UnsafeMutableRawPointer

    init(io: any PacketIO) {
        self.io = io
        mtu = io.mtu
        // With a header every read may be a 64 KB super-packet: fewer slots (8, not 64). Without one,
        // slots of 64 KB too, so that a packet over the MTU (raised from outside) is seen and counted.
        reads = io.carriesVirtioHeader ? io.makeReadBatch(capacity: 8)
            : PacketBatch(capacity: Self.capacity, slotSize: 65536, headroom: 0)
        pointers = .allocate(capacity: Self.capacity)
        pointers.initialize(repeating: nil, count: Self.capacity)
        lengths = .allocate(capacity: Self.capacity)
        lengths.initialize(repeating: 0, count: Self.capacity)
        staging = .allocate(byteCount: io.carriesVirtioHeader ? Self.capacity * io.mtu : 1, alignment: 16)
    }

    deinit {
        pointers.deallocate()
        lengths.deallocate()
        staging.deallocate()
    }

    /// Whether every packet of the last read has been through a fill: the TUN may be read again.
    var isDrained: Bool { readIndex >= reads.count && cutting == nil }

    /// Reads what the TUN has (one batch); then `fill` hands it out. Only when drained.
    func read(counters: inout PacketCounters) throws(SystemCallError) -> Int {
        precondition(isDrained, "a read before the last one was handed out")
        readIndex = 0
        let n = try io.read(into: reads)
        // Reads that were no packet: counted as read, and dropped.
        counters.packetsFromHost += UInt64(reads.droppedReads)
        counters.droppedNotIP += UInt64(reads.droppedReads)
        return n
    }

    /// Fills `pointers` and `lengths` with the next packets of the last read (at most `capacity`),
    /// counting each in `counters`; drops what the host refuses to hand in (not IP, over the MTU, an
    /// offload it cannot cut) and counts it. `count` is 0 once the read is drained.
    func fill(counters: inout PacketCounters) {
        count = 0
        while count < Self.capacity {
            if let c = cutting {
                let source = UnsafeRawBufferPointer(reads.packet(c.index))
                var next = c.next
                while next < c.plan.count && count < Self.capacity {
                    let out = staging + count * mtu
                    let n = c.plan.writeSegment(next, of: source, to: out)
                    take(UnsafeRawPointer(out), n, &counters)
                    next += 1
                }
                cutting = next < c.plan.count ? (c.index, c.plan, next) : nil
                continue
            }
            guard readIndex < reads.count else { return }
            let i = readIndex
            readIndex += 1
            let packet = reads.packet(i)
            if io.carriesVirtioHeader {
                switch reads.header(i).prepare(packet, maxSegmentLength: mtu) {
                case .packet:
                    break
                case .segments(let plan):
                    counters.superPacketsFromHost = (counters.superPacketsFromHost ?? 0) + 1
                    cutting = (i, plan, 0)
                    continue
                case .unsupported, .malformed:
                    counters.packetsFromHost += 1
                    counters.bytesFromHost += UInt64(packet.count)
                    counters.droppedOffload = (counters.droppedOffload ?? 0) + 1
                    continue
                }
            }
            guard packet.count > 0 else { continue }
            let version = packet[0] >> 4
            if version != 4 && version != 6 {
                counters.packetsFromHost += 1
                counters.bytesFromHost += UInt64(packet.count)
                counters.droppedNotIP += 1
                continue
            }
            if packet.count > mtu {
                counters.packetsFromHost += 1
                counters.bytesFromHost += UInt64(packet.count)
                overMTU += 1
                continue
            }
            take(UnsafeRawPointer(packet.baseAddress!), packet.count, &counters)
        }
    }

    @inline(__always)
    private func take(_ packet: UnsafeRawPointer, _ length: Int, _ counters: inout PacketCounters) {
        pointers[count] = packet.assumingMemoryBound(to: UInt8.self)
        lengths[count] = length
        count += 1
        counters.packetsFromHost += 1
        counters.bytesFromHost += UInt64(length)
    }
}
