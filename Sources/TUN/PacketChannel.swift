import LinuxSystem
import Synchronization

/// An in-memory TUN: two ends, each a `PacketIO`, where packets written to one end are read from the
/// other (as wireguard-go's tun/tuntest channel TUN). `tunnel` is what a packet runtime gets in place
/// of the TUN descriptor; `host` plays the kernel's side of the TUN: a test writes there the packets
/// the host sends into the tunnel and reads there what the tunnel delivers. Needs no root: it opens
/// no TUN and no socket, only a pipe per direction as its readiness.
///
/// Each direction holds at most `capacity` packets; a write to a full direction drops the packet and
/// counts it (`End.overflowDrops`), as a TUN's queue does. With `virtioHeader`, both ends carry a
/// virtio_net_hdr as a TUN with IFF_VNET_HDR does: what the host end writes with a GSO header (a TCP
/// super-packet) the tunnel end reads with it.
///
/// A test double: it copies each packet and takes a lock per read and write.
public final class PacketChannel: Sendable {
    public let tunnel: End
    public let host: End

    public init(mtu: Int = 1420, capacity: Int = 1024, virtioHeader: Bool = false) throws(SystemCallError) {
        let toHost = try Queue(capacity: capacity)
        let toTunnel = try Queue(capacity: capacity)
        tunnel = End(incoming: toTunnel, outgoing: toHost, mtu: mtu, virtioHeader: virtioHeader)
        host = End(incoming: toHost, outgoing: toTunnel, mtu: mtu, virtioHeader: virtioHeader)
    }

    /// One end of the channel.
    public final class End: PacketIO {
        let incoming: Queue
        let outgoing: Queue
        public let mtu: Int
        public let carriesVirtioHeader: Bool

        init(incoming: Queue, outgoing: Queue, mtu: Int, virtioHeader: Bool) {
            self.incoming = incoming
            self.outgoing = outgoing
            self.mtu = mtu
            carriesVirtioHeader = virtioHeader
        }

        public var readiness: FileDescriptor { incoming.readable }
        public var largestRead: Int { carriesVirtioHeader ? VirtioNetHeader.largestPacket : mtu }
        /// Packets written at this end that the other end's full queue dropped.
        public var overflowDrops: Int { outgoing.drops.load(ordering: .relaxed) }
        /// Packets waiting to be read at this end.
        public var waiting: Int { incoming.count }

        public func read(into batch: PacketBatch) throws(SystemCallError) -> Int {
            batch.removeAll()
            precondition(batch.slotSize > 0, "a read needs a batch with slots")
            incoming.take(upTo: batch.capacity) { packet, header in
                guard packet.count <= batch.slotSize else {
                    batch.droppedReads += 1
                    return
                }
                let slot = batch.nextSlot
                packet.withUnsafeBytes { slot.baseAddress!.advanced(by: batch.headroom).copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
                batch.commit(length: packet.count, header: carriesVirtioHeader ? header : VirtioNetHeader())
            }
            return batch.count
        }

        public func write(_ batch: PacketBatch) -> PacketBatch.Written {
            var written = PacketBatch.Written()
            for i in 0..<batch.count {
                let packet = batch.packet(i)
                if outgoing.put(Array(packet), header: carriesVirtioHeader ? batch.header(i) : VirtioNetHeader()) {
                    written.packets += 1
                    written.bytes += packet.count
                }
            }
            return written
        }

        public func write(_ pieces: IOVectors, header: VirtioNetHeader) -> Bool {
            var packet: [UInt8] = []
            packet.reserveCapacity(pieces.byteCount)
            for i in 0..<pieces.count { packet.append(contentsOf: pieces[i]) }
            return outgoing.put(packet, header: carriesVirtioHeader ? header : VirtioNetHeader())
        }

        public func write(_ packet: UnsafeRawBufferPointer) throws(SystemCallError) -> Int {
            outgoing.put(Array(packet), header: VirtioNetHeader()) ? packet.count : 0
        }

        /// Writes `packet` with `header` (the host's side writing a super-packet, say); false when dropped.
        @discardableResult
        public func write(_ packet: [UInt8], header: VirtioNetHeader = VirtioNetHeader()) -> Bool {
            outgoing.put(packet, header: header)
        }

        /// Takes up to `limit` waiting packets with their headers, without a batch.
        public func readPackets(limit: Int = .max) -> [(packet: [UInt8], header: VirtioNetHeader)] {
            var out: [(packet: [UInt8], header: VirtioNetHeader)] = []
            incoming.take(upTo: limit) { out.append(($0, $1)) }
            return out
        }
    }

    /// One direction: a bounded queue, and a pipe that holds one byte exactly while the queue is not empty.
    final class Queue: Sendable {
        struct State {
            var packets: [(packet: [UInt8], header: VirtioNetHeader)] = []
            var head = 0
            var count: Int { packets.count - head }
        }
        let state = Mutex(State())
        let capacity: Int
        let drops = Atomic<Int>(0)
        let readable: FileDescriptor
        let signal: FileDescriptor

        init(capacity: Int) throws(SystemCallError) {
            precondition(capacity > 0)
            self.capacity = capacity
            (readable, signal) = try FileDescriptor.pipe()
        }

        deinit {
            readable.close()
            signal.close()
        }

        var count: Int { state.withLock { $0.count } }

        func put(_ packet: [UInt8], header: VirtioNetHeader) -> Bool {
            state.withLock { s in
                guard s.count < capacity else {
                    drops.add(1, ordering: .relaxed)
                    return false
                }
                if s.count == 0 {
                    var one: UInt8 = 1
                    _ = withUnsafeBytes(of: &one) { try? signal.write($0) }
                }
                s.packets.append((packet, header))
                return true
            }
        }

        func take(upTo limit: Int, _ body: ([UInt8], VirtioNetHeader) -> Void) {
            state.withLock { s in
                var taken = 0
                while taken < limit, s.count > 0 {
                    let (packet, header) = s.packets[s.head]
                    s.packets[s.head] = ([], VirtioNetHeader())
                    s.head += 1
                    taken += 1
                    body(packet, header)
                }
                if s.count == 0 {
                    s.packets.removeAll(keepingCapacity: true)
                    s.head = 0
                    var byte: UInt8 = 0
                    _ = withUnsafeMutableBytes(of: &byte) { try? readable.read(into: $0) }
                }
            }
        }
    }
}
