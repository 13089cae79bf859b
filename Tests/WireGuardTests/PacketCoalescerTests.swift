import LinuxSystem
import TUN
import TunnelgateTestSupport
import XCTest

/// Receive-side GRO (`PacketCoalescer`): the segments of a super-packet, cut as the sending side cuts
/// them, come out of the coalescer as that super-packet again (cut once more, they are the same bytes),
/// and what must not be merged is not. Checksums are checked with `TestPackets`, written independently
/// of `InternetChecksum`.
final class PacketCoalescerTests: XCTestCase {
    /// The MSS of an MTU of 1420 with 12 bytes of TCP options.
    static func mss(_ v6: Bool) -> Int { v6 ? 1348 : 1368 }

    /// The segments a TSO super-packet of `payload` bytes is cut into (TCPSegmentation, MSS `mss`),
    /// as a sender's device sends them; `port` sets the source port (another flow).
    static func segments(v6: Bool, payload: Int, port: UInt16 = 40000, sequence: UInt32 = 0xFFFF_F000) -> [[UInt8]] {
        var packet = TestPackets.tcpPacket(v6: v6, payload: TestPackets.payload(payload), sequence: sequence,
                                           flags: TestPackets.ack | TestPackets.psh)
        let ip = v6 ? 40 : 20
        packet[ip] = UInt8(port >> 8)
        packet[ip + 1] = UInt8(port & 0xFF)
        let header = VirtioNetHeader(flags: VirtioNetHeader.needsChecksum, gsoType: (v6 ? VirtioNetHeader.GSOType.tcpv6 : .tcpv4).rawValue,
                                     headerLength: UInt16(ip + 32), gsoSize: UInt16(mss(v6)), checksumStart: UInt16(ip), checksumOffset: 16)
        // The port changed after the pseudo-header sum was taken; the pseudo-header does not cover ports.
        let plan = packet.withUnsafeBytes { TCPSegmentation(header: header, packet: $0, maxSegmentLength: 1420) }!
        return TunOffloadTests.segments(plan, packet)
    }

    /// A UDP datagram of `payload` bytes (IPv4 or IPv6), checksum complete.
    static func udpPacket(v6: Bool, payload: [UInt8], port: UInt16 = 40001) -> [UInt8] {
        let length = 8 + payload.count
        var udp: [UInt8] = [UInt8(port >> 8), UInt8(port & 0xFF), 0x14, 0x51, UInt8(length >> 8), UInt8(length & 0xFF), 0, 0] + payload
        let source: [UInt8] = v6 ? [0xFD, 0x70] + [UInt8](repeating: 0, count: 13) + [1] : [10, 70, 0, 1]
        let destination: [UInt8] = v6 ? [0xFD, 0x70] + [UInt8](repeating: 0, count: 13) + [2] : [10, 70, 0, 2]
        let sum = ~TestPackets.rfc1071(udp, initial: TestPackets.pseudo(source: source, destination: destination, protocol: 17, length: length))
        udp[6] = UInt8(sum >> 8)
        udp[7] = UInt8(sum & 0xFF)
        var ip: [UInt8]
        if v6 {
            ip = [0x60, 0, 0, 0, UInt8(length >> 8), UInt8(length & 0xFF), 17, 64] + source + destination
        } else {
            let total = 20 + length
            ip = [0x45, 0, UInt8(total >> 8), UInt8(total & 0xFF), 0x12, 0x34, 0x40, 0, 64, 17, 0, 0] + source + destination
            let c = ~TestPackets.rfc1071(ip)
            ip[10] = UInt8(c >> 8); ip[11] = UInt8(c & 0xFF)
        }
        return ip + udp
    }

    /// Writes `packets` through a coalescer to a virtio-header channel; what the other end reads.
    static func coalesce(_ packets: [[UInt8]], coalescer: PacketCoalescer? = nil) throws -> [(packet: [UInt8], header: VirtioNetHeader)] {
        let channel = try PacketChannel(mtu: 1420, capacity: 4096, virtioHeader: true)
        let stride = 16 + 1500
        let memory = UnsafeMutableRawPointer.allocate(byteCount: stride * max(1, packets.count), alignment: 16)
        defer { memory.deallocate() }
        let batch = PacketBatch(references: max(1, packets.count), headroom: VirtioNetHeader.size)
        for (i, p) in packets.enumerated() {
            let start = memory + i * stride + 16
            p.withUnsafeBytes { start.copyMemory(from: $0.baseAddress!, byteCount: p.count) }
            batch.append(UnsafeMutableRawBufferPointer(start: start, count: p.count))
        }
        let c = coalescer ?? PacketCoalescer(capacity: max(1, packets.count))
        let written = c.write(batch, to: channel.tunnel)
        XCTAssertEqual(written.packets, packets.count, "every packet was written")
        XCTAssertEqual(written.bytes, packets.reduce(0) { $0 + $1.count })
        return channel.host.readPackets()
    }

    /// Cuts a super-packet the coalescer wrote as the kernel would (TSO), to compare with what went in.
    static func recut(_ packet: [UInt8], _ header: VirtioNetHeader) -> [[UInt8]] {
        let plan = packet.withUnsafeBytes { TCPSegmentation(header: header, packet: $0, maxSegmentLength: 1420) }
        XCTAssertNotNil(plan, "the super-packet's header describes it")
        return plan.map { TunOffloadTests.segments($0, packet) } ?? []
    }

    func checkOneFlow(v6: Bool) throws {
        let ip = v6 ? 40 : 20
        let mss = Self.mss(v6)
        let segments = Self.segments(v6: v6, payload: 20 * mss + 100)
        XCTAssertEqual(segments.count, 21)
        let out = try Self.coalesce(segments)
        XCTAssertEqual(out.count, 1, "21 in-order segments of one flow: one super-packet")
        let (packet, header) = out[0]
        XCTAssertEqual(header.gsoType, (v6 ? VirtioNetHeader.GSOType.tcpv6 : .tcpv4).rawValue)
        XCTAssertEqual(header.flags, VirtioNetHeader.needsChecksum)
        XCTAssertEqual(Int(header.gsoSize), mss)
        XCTAssertEqual(Int(header.checksumStart), ip)
        XCTAssertEqual(header.checksumOffset, 16)
        XCTAssertEqual(Int(header.headerLength), ip + 32)
        XCTAssertEqual(packet.count, ip + 32 + 20 * mss + 100)
        if v6 {
            XCTAssertEqual(TestPackets.be16(packet, 4), packet.count - 40)
        } else {
            XCTAssertEqual(TestPackets.be16(packet, 2), packet.count)
            XCTAssertTrue(TestPackets.ipv4HeaderChecksumVerifies(packet), "the merged IPv4 header's checksum")
        }
        // The checksum field holds the pseudo-header's sum for the whole TCP length (CHECKSUM_PARTIAL).
        let source = v6 ? Array(packet[8..<24]) : Array(packet[12..<16])
        let destination = v6 ? Array(packet[24..<40]) : Array(packet[16..<20])
        let pseudo = TestPackets.pseudo(source: source, destination: destination, protocol: 6, length: packet.count - ip)
        XCTAssertEqual(TestPackets.be16(packet, ip + 16), Int(pseudo))
        XCTAssertEqual(packet[ip + 13], TestPackets.ack | TestPackets.psh, "the last segment's PSH")
        XCTAssertEqual(Self.recut(packet, header), segments, "cut again, the super-packet is the segments that went in")
    }

    func testSegmentsOfOneFlowBecomeOneSuperPacketIPv4() throws { try checkOneFlow(v6: false) }
    func testSegmentsOfOneFlowBecomeOneSuperPacketIPv6() throws { try checkOneFlow(v6: true) }

    func testInterleavedFlowsEachBecomeOneAndKeepTheirOrder() throws {
        let a = Self.segments(v6: false, payload: 6 * Self.mss(false), port: 40000)
        let b = Self.segments(v6: false, payload: 6 * Self.mss(false), port: 40002)
        var mixed: [[UInt8]] = []
        for i in 0..<6 { mixed += [a[i], b[i]] }
        let out = try Self.coalesce(mixed)
        XCTAssertEqual(out.count, 2)
        XCTAssertEqual(Self.recut(out[0].packet, out[0].header), a)
        XCTAssertEqual(Self.recut(out[1].packet, out[1].header), b)
    }

    func testAGapInTheSequenceStartsANewSuperPacketAfterTheFirst() throws {
        var segments = Self.segments(v6: false, payload: 8 * Self.mss(false))
        let missing = segments.remove(at: 3)
        XCTAssertEqual(missing.count, 20 + 32 + Self.mss(false))
        let out = try Self.coalesce(segments)
        XCTAssertEqual(out.count, 2, "segments 0-2, then 4-7")
        XCTAssertEqual(Self.recut(out[0].packet, out[0].header), Array(segments[0..<3]))
        XCTAssertEqual(Self.recut(out[1].packet, out[1].header), Array(segments[3...]))
    }

    func testSegmentsWithOtherOptionsOrFlagsAreNotMerged() throws {
        var segments = Self.segments(v6: true, payload: 4 * Self.mss(true))
        // Segments 2 and 3 carry another timestamp (TSval), as a later burst would.
        segments[2][40 + 20 + 4] ^= 0xFF
        segments[3][40 + 20 + 4] ^= 0xFF
        // Segment 0 is a FIN: written alone.
        var fin = Self.segments(v6: true, payload: 100, sequence: 0x1000)[0]
        fin[40 + 13] |= TestPackets.fin
        let out = try Self.coalesce([fin] + segments)
        XCTAssertEqual(out.map(\.packet.count), [40 + 32 + 100, 40 + 32 + 2 * Self.mss(true), 40 + 32 + 2 * Self.mss(true)],
                       "the FIN alone, segments 0-1, then 2-3 (another TSval)")
        XCTAssertEqual(out[0].header.gsoType, VirtioNetHeader.GSOType.none.rawValue)
    }

    func testAPacketAloneIsMarkedForTheKernelToTrustAndCompletesToTheSameChecksum() throws {
        let original = Self.segments(v6: false, payload: 500)[0]
        XCTAssertTrue(TestPackets.transportChecksumVerifies(original))
        let out = try Self.coalesce([original])
        XCTAssertEqual(out.count, 1)
        var (packet, header) = out[0]
        XCTAssertEqual(header.flags, VirtioNetHeader.needsChecksum)
        XCTAssertEqual(header.gsoType, VirtioNetHeader.GSOType.none.rawValue)
        XCTAssertEqual(header.checksumStart, 20)
        // Completed as the kernel completes a CHECKSUM_PARTIAL packet it forwards: the original again.
        let sum = ~TestPackets.rfc1071(Array(packet[20...]))
        packet[36] = UInt8(sum >> 8)
        packet[37] = UInt8(sum & 0xFF)
        XCTAssertEqual(packet, original)
    }

    func testARunOfUDPDatagramsBecomesOneUDPSuperPacket() throws {
        for v6 in [false, true] {
            let ip = v6 ? 40 : 20
            let datagrams = (0..<5).map { Self.udpPacket(v6: v6, payload: TestPackets.payload($0 == 4 ? 300 : 1200)) }
            let out = try Self.coalesce(datagrams)
            XCTAssertEqual(out.count, 1)
            let (packet, header) = out[0]
            XCTAssertEqual(header.gsoType, VirtioNetHeader.GSOType.udpL4.rawValue)
            XCTAssertEqual(header.gsoSize, 1200)
            XCTAssertEqual(Int(header.checksumStart), ip)
            XCTAssertEqual(header.checksumOffset, 6)
            XCTAssertEqual(packet.count, ip + 8 + 4 * 1200 + 300)
            XCTAssertEqual(TestPackets.be16(packet, ip + 4), packet.count - ip, "the UDP length covers every segment")
            XCTAssertEqual(Array(packet[(ip + 8)...]), (0..<5).flatMap { Array(datagrams[$0][(ip + 8)...]) })
        }
        // A shorter datagram ends the run: the next one starts another.
        let uneven = [1200, 300, 1200].map { Self.udpPacket(v6: false, payload: TestPackets.payload($0)) }
        XCTAssertEqual(try Self.coalesce(uneven).count, 2)
    }

    func testOtherPacketsPassUnchanged() throws {
        // An ICMP echo request and a TCP SYN.
        var icmp: [UInt8] = [0x45, 0, 0, 28, 0, 1, 0x40, 0, 64, 1, 0, 0, 10, 70, 0, 1, 10, 70, 0, 2, 8, 0, 0xF7, 0xFF, 0, 0, 0, 0]
        let c = ~TestPackets.rfc1071(Array(icmp[0..<20]))
        icmp[10] = UInt8(c >> 8); icmp[11] = UInt8(c & 0xFF)
        var syn = Self.segments(v6: false, payload: 0)[0]
        syn[33] = 0x02
        let out = try Self.coalesce([icmp, syn])
        XCTAssertEqual(out.map(\.packet), [icmp, syn])
        XCTAssertEqual(out.map(\.header), [VirtioNetHeader(), VirtioNetHeader()])
    }
}
