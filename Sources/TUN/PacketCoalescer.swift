import LinuxSystem

/// Receive-side offload for a TUN with a virtio_net_hdr (what the kernel's GRO does on a NIC): the
/// packets of one write batch (a receive batch's decrypted packets, in arrival order) grouped so that
/// the in-order TCP segments of one flow go to the TUN as one super-packet (GSO_TCPV4/TCPV6), and,
/// where the TUN takes it, a run of same-size UDP datagrams of one flow as one GSO_UDP_L4 packet. The
/// kernel then takes one packet up its stack instead of dozens, and cuts it again only if it forwards
/// it somewhere that cannot take it whole.
///
/// A segment joins the group of its flow only where the kernel's own GRO (tcp_gro_receive) would join
/// it: same addresses, ports, IP fields (TOS/traffic class, TTL/hop limit, DF), acknowledgment, window
/// and TCP options byte for byte; its sequence number right after the group's last byte; every
/// segment before it exactly the group's segment size, itself at most that; only ACK (and PSH, which
/// closes the group) set; no IPv4 options, fragments or IPv6 extension headers; at most 64 segments
/// and 65,535 bytes. Anything else is written as it came. A group is closed when a segment of its flow
/// cannot join, and a new one begins, so within a flow the order is the order of arrival.
///
/// Every packet written carries NEEDS_CSUM with its TCP or UDP checksum field holding only the
/// pseudo-header's sum (CHECKSUM_PARTIAL): the kernel does not verify what the AEAD already
/// authenticated (as the kernel's WireGuard marks decrypted packets CHECKSUM_UNNECESSARY), and
/// completes the sum itself if it forwards the packet.
///
/// A group's merged headers are written to scratch space of its own and the payloads are gathered from
/// where they lie (writev), so the packets are not copied and stay as they were: a super-packet the TUN
/// refuses (a kernel without GSO_UDP_L4 on TUN writes) is written segment by segment instead, and that
/// kind of coalescing stops. Used by one thread; allocates only in `init`.
public final class PacketCoalescer {
    /// Segments per group at most (the kernel's GRO stops at 64 too).
    public static let groupLimit = 64
    /// Groups at most that are open to more segments at once (concurrent flows of one batch).
    static let openLimit = 8
    /// Room for a group's merged headers: a virtio_net_hdr, an IPv6 header and a TCP header with the
    /// largest options (10 + 40 + 60), rounded up.
    static let scratchSize = 128

    /// Whether runs of UDP datagrams are coalesced (GSO_UDP_L4); cleared when the TUN refuses one.
    public private(set) var coalescesUDP: Bool
    /// Super-packets written (each of two or more segments), and the segments they carried.
    public private(set) var superPackets: UInt64 = 0
    public private(set) var coalescedSegments: UInt64 = 0
    /// Super-packets the TUN refused, written again segment by segment.
    public private(set) var refusedSuperPackets: UInt64 = 0

    let capacity: Int
    /// The batch's groups. A value of its own, grouped by one mutating call and read through one copy
    /// per write: as stored properties of this class every element read and written would be a dynamic
    /// exclusivity check (swift_beginAccess and AccessSet::insert under `write`: 2.6 % of a receiving
    /// plane's CPU under TCP, perf, docs/performance.md session 10).
    private var grouping: Grouping
    private let scratch: UnsafeMutableRawPointer
    private let vectors: IOVectors

    struct Shape {
        enum Kind: UInt8 { case other, tcp, udp }
        var kind = Kind.other
        var isIPv6 = false
        /// Where the transport header starts, and where the payload starts.
        var transportOffset = 0
        var payloadOffset = 0
        var payloadLength = 0
        var flags: UInt8 = 0
    }

    struct Group {
        var head = 0
        var last = 0
        var members = 1
        var payloadLength = 0
        /// The segment size: the first segment's payload.
        var segmentSize = 0
        /// No more segments may join (a shorter segment, PSH, or the limits).
        var closed = false
    }

    /// Per packet of the batch: its parsed shape and the next member of its group (-1: none); the
    /// groups in order of their first segment, and those still open to segments of their flow.
    struct Grouping {
        var shapes: [Shape]
        var next: [Int]
        var groups: [Group]
        var groupCount = 0
        var open: [Int]
        var openCount = 0

        init(capacity: Int) {
            shapes = Array(repeating: Shape(), count: capacity)
            next = Array(repeating: -1, count: capacity)
            groups = Array(repeating: Group(), count: capacity)
            open = Array(repeating: 0, count: PacketCoalescer.openLimit)
        }
    }

    public init(capacity: Int, coalescesUDP: Bool = true) {
        precondition(capacity > 0)
        self.capacity = capacity
        self.coalescesUDP = coalescesUDP
        grouping = Grouping(capacity: capacity)
        scratch = .allocate(byteCount: Self.scratchSize * capacity, alignment: 16)
        vectors = IOVectors(capacity: Self.groupLimit + 1)
    }

    deinit { scratch.deallocate() }

    /// Writes every packet of `batch` to `io` (whose headroom before each packet must hold its
    /// virtio_net_hdr), coalesced where it can be: what was written, in packets and bytes as they were
    /// in the batch (a super-packet of 10 segments counts 10).
    public func write(_ batch: PacketBatch, to io: any PacketIO) -> PacketBatch.Written {
        precondition(batch.count <= capacity, "a batch larger than the coalescer")
        guard io.carriesVirtioHeader else { return io.write(batch) }
        grouping.group(batch, coalescesUDP: coalescesUDP)
        let grouping = self.grouping  // one read; the arrays are shared, not copied
        let next = grouping.next
        var written = PacketBatch.Written()
        for g in 0..<grouping.groupCount {
            let group = grouping.groups[g]
            if group.members == 1 {
                if writeSingle(group.head, of: batch, grouping, to: io) {
                    written.packets += 1
                    written.bytes += batch.packet(group.head).count
                }
                continue
            }
            if writeGroup(g, of: batch, grouping, to: io) {
                superPackets += 1
                coalescedSegments += UInt64(group.members)
                written.packets += group.members
                var i = group.head
                while i >= 0 {
                    written.bytes += batch.packet(i).count
                    i = next[i]
                }
                continue
            }
            // Refused whole: its segments one by one, and no more groups of that kind.
            refusedSuperPackets += 1
            if grouping.shapes[group.head].kind == .udp { coalescesUDP = false }
            var i = group.head
            while i >= 0 {
                if writeSingle(i, of: batch, grouping, to: io) {
                    written.packets += 1
                    written.bytes += batch.packet(i).count
                }
                i = next[i]
            }
        }
        return written
    }

    static let ack: UInt8 = 0x10, psh: UInt8 = 0x08

    /// What `packet` is, for coalescing: TCP with only ACK (and maybe PSH) set, or UDP, each directly
    /// after an IPv4 header without options and not a fragment, or after an IPv6 header without
    /// extension headers; anything else is `.other`.
    static func shape(of packet: UnsafeRawBufferPointer) -> Shape {
        var shape = Shape()
        let n = packet.count
        guard n >= 20 else { return shape }
        let proto: UInt8
        switch packet[0] >> 4 {
        case 4:
            // No options; fragment offset 0 and MF clear (DF may be set).
            guard packet[0] & 0x0F == 5, packet[6] & 0x3F == 0, packet[7] == 0,
                  Int(packet[2]) << 8 | Int(packet[3]) == n else { return shape }
            proto = packet[9]
            shape.transportOffset = 20
        case 6:
            guard n >= 40, (Int(packet[4]) << 8 | Int(packet[5])) + 40 == n else { return shape }
            proto = packet[6]
            shape.isIPv6 = true
            shape.transportOffset = 40
        default:
            return shape
        }
        let t = shape.transportOffset
        switch proto {
        case 6:
            guard t + 20 <= n else { return shape }
            let headerLength = Int(packet[t + 12] >> 4) * 4
            let flags = packet[t + 13]
            guard headerLength >= 20, t + headerLength <= n else { return shape }
            shape.payloadOffset = t + headerLength
            shape.flags = flags
            // Only ACK, or ACK and PSH: SYN, FIN, RST, URG, ECE and CWR are written alone.
            shape.kind = flags & ~psh == ack ? .tcp : .other
        case 17:
            guard t + 8 <= n, Int(packet[t + 4]) << 8 | Int(packet[t + 5]) == n - t else { return shape }
            shape.payloadOffset = t + 8
            shape.kind = .udp
        default:
            return shape
        }
        shape.payloadLength = n - shape.payloadOffset
        return shape
    }

    /// Whether two packets of the same kind belong to one flow: addresses, ports, and the IP fields
    /// every segment of a super-packet shares.
    static func sameFlow(_ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer, _ sa: Shape, _ sb: Shape) -> Bool {
        guard sa.kind == sb.kind, sa.isIPv6 == sb.isIPv6 else { return false }
        if sa.isIPv6 {
            // Version, traffic class and flow label; hop limit; addresses; ports.
            guard a.loadUnaligned(as: UInt32.self) == b.loadUnaligned(as: UInt32.self), a[7] == b[7] else { return false }
            return memoryEqual(a, b, from: 8, count: 32) && memoryEqual(a, b, from: 40, count: 4)
        }
        // TOS; DF; TTL; addresses; ports.
        guard a[1] == b[1], a[6] == b[6], a[8] == b[8] else { return false }
        return memoryEqual(a, b, from: 12, count: 8) && memoryEqual(a, b, from: 20, count: 4)
    }

    private static func memoryEqual(_ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer, from offset: Int, count: Int) -> Bool {
        var i = offset
        while i + 8 <= offset + count {
            guard a.loadUnaligned(fromByteOffset: i, as: UInt64.self) == b.loadUnaligned(fromByteOffset: i, as: UInt64.self) else { return false }
            i += 8
        }
        while i < offset + count {
            guard a[i] == b[i] else { return false }
            i += 1
        }
        return true
    }

    // MARK: Writing

    /// The pseudo-header's sum for a transport segment of `length` bytes, folded, in the machine's
    /// order: what a CHECKSUM_PARTIAL packet's checksum field holds.
    static func pseudoHeaderSum(_ packet: UnsafeRawBufferPointer, isIPv6: Bool, proto: UInt8, length: Int) -> UInt16 {
        let base = packet.baseAddress!
        var sum = isIPv6 ? InternetChecksum.add(UnsafeRawBufferPointer(start: base + 8, count: 32))
                         : InternetChecksum.add(UnsafeRawBufferPointer(start: base + 12, count: 8))
        sum = InternetChecksum.addCarrying(sum, UInt64(UInt16(proto).bigEndian))
        sum = InternetChecksum.addCarrying(sum, UInt64(UInt32(truncatingIfNeeded: length).bigEndian))
        return InternetChecksum.fold(sum)
    }

    /// Packet `i` alone: TCP and UDP marked NEEDS_CSUM (their checksum field replaced by the
    /// pseudo-header's sum), anything else with a GSO_NONE header.
    private func writeSingle(_ i: Int, of batch: PacketBatch, _ grouping: Grouping, to io: any PacketIO) -> Bool {
        let packet = batch.packet(i)
        let shape = grouping.shapes[i]
        var header = VirtioNetHeader()
        if shape.kind != .other {
            let isTCP = shape.kind == .tcp
            let field = shape.transportOffset + (isTCP ? 16 : 6)
            let sum = Self.pseudoHeaderSum(UnsafeRawBufferPointer(packet), isIPv6: shape.isIPv6, proto: isTCP ? 6 : 17,
                                           length: packet.count - shape.transportOffset)
            packet.storeBytes(of: sum, toByteOffset: field, as: UInt16.self)
            header = VirtioNetHeader(flags: VirtioNetHeader.needsChecksum, checksumStart: UInt16(shape.transportOffset),
                                     checksumOffset: isTCP ? 16 : 6)
        }
        vectors.removeAll()
        vectors.append(UnsafeRawBufferPointer(packet))
        return io.write(vectors, header: header)
    }

    /// Group `g` as one super-packet: its head's headers, merged, in scratch space, then every
    /// member's payload where it lies.
    private func writeGroup(_ g: Int, of batch: PacketBatch, _ grouping: Grouping, to io: any PacketIO) -> Bool {
        let group = grouping.groups[g], shapes = grouping.shapes, next = grouping.next
        let shape = shapes[group.head]
        let head = UnsafeRawBufferPointer(batch.packet(group.head))
        let headers = scratch + g * Self.scratchSize + VirtioNetHeader.size
        let headerLength = shape.payloadOffset
        headers.copyMemory(from: head.baseAddress!, byteCount: headerLength)
        let total = headerLength + group.payloadLength
        let t = shape.transportOffset
        if shape.isIPv6 {
            headers.storeBytes(of: UInt16(truncatingIfNeeded: total - 40).bigEndian, toByteOffset: 4, as: UInt16.self)
        } else {
            headers.storeBytes(of: UInt16(truncatingIfNeeded: total).bigEndian, toByteOffset: 2, as: UInt16.self)
            headers.storeBytes(of: 0 as UInt16, toByteOffset: 10, as: UInt16.self)
            let sum = InternetChecksum.add(UnsafeRawBufferPointer(start: headers, count: 20))
            headers.storeBytes(of: InternetChecksum.checksum(sum), toByteOffset: 10, as: UInt16.self)
        }
        let isTCP = shape.kind == .tcp
        if isTCP {
            // PSH of the last segment (only a last segment can have it).
            let flags = headers.load(fromByteOffset: t + 13, as: UInt8.self) | (shapes[group.last].flags & Self.psh)
            headers.storeBytes(of: flags, toByteOffset: t + 13, as: UInt8.self)
        } else {
            headers.storeBytes(of: UInt16(truncatingIfNeeded: total - t).bigEndian, toByteOffset: t + 4, as: UInt16.self)
        }
        let sum = Self.pseudoHeaderSum(UnsafeRawBufferPointer(start: headers, count: headerLength), isIPv6: shape.isIPv6,
                                       proto: isTCP ? 6 : 17, length: total - t)
        headers.storeBytes(of: sum, toByteOffset: t + (isTCP ? 16 : 6), as: UInt16.self)
        let gso: VirtioNetHeader.GSOType = isTCP ? (shape.isIPv6 ? .tcpv6 : .tcpv4) : .udpL4
        let header = VirtioNetHeader(flags: VirtioNetHeader.needsChecksum, gsoType: gso.rawValue,
                                     headerLength: UInt16(headerLength), gsoSize: UInt16(group.segmentSize),
                                     checksumStart: UInt16(t), checksumOffset: isTCP ? 16 : 6)
        vectors.removeAll()
        vectors.append(UnsafeRawBufferPointer(start: headers, count: headerLength))
        var i = group.head
        while i >= 0 {
            let packet = batch.packet(i)
            let offset = shapes[i].payloadOffset
            vectors.append(UnsafeRawBufferPointer(start: packet.baseAddress! + offset, count: packet.count - offset))
            i = next[i]
        }
        return io.write(vectors, header: header)
    }
}

// MARK: Grouping

extension PacketCoalescer.Grouping {
    typealias Shape = PacketCoalescer.Shape
    typealias Group = PacketCoalescer.Group

    /// Sorts the batch's packets into groups (`groups`, `next`).
    mutating func group(_ batch: PacketBatch, coalescesUDP: Bool) {
        groupCount = 0
        openCount = 0
        for i in 0..<batch.count {
            next[i] = -1
            let packet = UnsafeRawBufferPointer(batch.packet(i))
            let shape = PacketCoalescer.shape(of: packet)
            shapes[i] = shape
            if shape.kind == .other || (shape.kind == .udp && !coalescesUDP) || shape.payloadLength == 0 {
                startGroup(i, payloadLength: shape.payloadLength, open: false)
                continue
            }
            var joined = false
            var k = openCount - 1
            while k >= 0 {
                let g = open[k]
                let head = groups[g].head
                if PacketCoalescer.sameFlow(packet, UnsafeRawBufferPointer(batch.packet(head)), shape, shapes[head]) {
                    if canJoin(i, packet, group: g, batch) {
                        join(i, group: g)
                        joined = true
                    } else {
                        closeOpen(at: k)
                    }
                    break
                }
                k -= 1
            }
            if !joined {
                let closesAtOnce = shape.kind == .tcp && shape.flags & PacketCoalescer.psh != 0
                startGroup(i, payloadLength: shape.payloadLength, open: !closesAtOnce)
            }
        }
    }

    private mutating func startGroup(_ i: Int, payloadLength: Int, open isOpen: Bool) {
        groups[groupCount] = Group(head: i, last: i, members: 1, payloadLength: payloadLength,
                                   segmentSize: payloadLength, closed: !isOpen)
        if isOpen {
            if openCount == PacketCoalescer.openLimit { closeOpen(at: 0) }
            open[openCount] = groupCount
            openCount += 1
        }
        groupCount += 1
    }

    private mutating func closeOpen(at k: Int) {
        groups[open[k]].closed = true
        for j in k..<(openCount - 1) { open[j] = open[j + 1] }
        openCount -= 1
    }

    private mutating func join(_ i: Int, group g: Int) {
        next[groups[g].last] = i
        groups[g].last = i
        groups[g].members += 1
        groups[g].payloadLength += shapes[i].payloadLength
        let shape = shapes[i]
        if shape.payloadLength < groups[g].segmentSize || groups[g].members == PacketCoalescer.groupLimit
            || (shape.kind == .tcp && shape.flags & PacketCoalescer.psh != 0) {
            if let k = open[0..<openCount].firstIndex(of: g) { closeOpen(at: k) }
        }
    }

    /// Whether packet `i` (of the group's flow) may join open group `g` as its next segment.
    private func canJoin(_ i: Int, _ packet: UnsafeRawBufferPointer, group g: Int, _ batch: PacketBatch) -> Bool {
        let group = groups[g]
        let shape = shapes[i], headShape = shapes[group.head]
        guard !group.closed, group.members < PacketCoalescer.groupLimit, shape.payloadLength <= group.segmentSize else { return false }
        let total = headShape.payloadOffset - (headShape.isIPv6 ? 40 : 0) + group.payloadLength + shape.payloadLength
        guard total <= 65_535 else { return false }
        guard shape.kind == .tcp else { return true }
        // TCP: the next byte of the stream, and the same acknowledgment, window and options.
        let head = UnsafeRawBufferPointer(batch.packet(group.head))
        let t = shape.transportOffset
        guard shape.payloadOffset == headShape.payloadOffset else { return false }
        let sequence = UInt32(bigEndian: packet.loadUnaligned(fromByteOffset: t + 4, as: UInt32.self))
        let headSequence = UInt32(bigEndian: head.loadUnaligned(fromByteOffset: t + 4, as: UInt32.self))
        guard sequence == headSequence &+ UInt32(truncatingIfNeeded: group.payloadLength) else { return false }
        // Acknowledgment (8..<12), then data offset, flags and window (12..<16) but PSH, then options.
        guard packet.loadUnaligned(fromByteOffset: t + 8, as: UInt32.self) == head.loadUnaligned(fromByteOffset: t + 8, as: UInt32.self),
              packet[t + 12] == head[t + 12], packet[t + 13] & ~PacketCoalescer.psh == head[t + 13] & ~PacketCoalescer.psh,
              packet.loadUnaligned(fromByteOffset: t + 14, as: UInt16.self) == head.loadUnaligned(fromByteOffset: t + 14, as: UInt16.self)
        else { return false }
        var o = t + 20
        while o < shape.payloadOffset {
            guard packet[o] == head[o] else { return false }
            o += 1
        }
        return true
    }
}
