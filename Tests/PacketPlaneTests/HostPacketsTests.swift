@testable import PacketPlane
import RuntimeABI
import TUN
import TunnelgateTestSupport
import XCTest

/// The callback path's reads (`HostPackets`) over the in-memory TUN double: what the runtime is handed
/// is IP packets of at most the MTU, in order, whatever the TUN gave (plain packets, TCP super-packets
/// to cut, headers that cannot be cut), and every packet read is either handed in or counted dropped.
final class HostPacketsTests: XCTestCase {
    let mtu = 1400

    /// Everything `packets` hands out until the read is drained, fill by fill.
    func drain(_ packets: HostPackets, _ counters: inout PacketCounters) -> (packets: [[UInt8]], fills: [Int]) {
        var out: [[UInt8]] = [], fills: [Int] = []
        while true {
            packets.fill(counters: &counters)
            if packets.count == 0 { return (out, fills) }
            fills.append(packets.count)
            for i in 0..<packets.count { out.append(Array(UnsafeBufferPointer(start: packets.pointers[i], count: packets.lengths[i]))) }
        }
    }

    func superPacketHeader(v6: Bool, gsoSize: Int) -> VirtioNetHeader {
        VirtioNetHeader(flags: VirtioNetHeader.needsChecksum, gsoType: (v6 ? VirtioNetHeader.GSOType.tcpv6 : .tcpv4).rawValue,
                        headerLength: UInt16(v6 ? 72 : 52), gsoSize: UInt16(gsoSize), checksumStart: v6 ? 40 : 20, checksumOffset: 16)
    }

    /// A super-packet of 100 segments (more than one fill of 64) is cut over two fills into segments that
    /// carry its payload in order, each at most the MTU with a TCP checksum that verifies.
    func checkSuperPacketAcrossFills(v6: Bool) throws {
        let channel = try PacketChannel(mtu: mtu, virtioHeader: true)
        let segment = 600
        let data = TestPackets.payload(segment * 100)
        let superPacket = TestPackets.tcpPacket(v6: v6, payload: data, flags: TestPackets.ack | TestPackets.psh)
        XCTAssertTrue(channel.host.write(superPacket, header: superPacketHeader(v6: v6, gsoSize: segment)))
        let packets = HostPackets(io: channel.tunnel)
        var counters = PacketCounters()
        XCTAssertEqual(try packets.read(counters: &counters), 1)
        let (got, fills) = drain(packets, &counters)
        XCTAssertEqual(fills, [64, 36], "cut over two fills, the first full")
        XCTAssertEqual(got.count, 100)
        let headers = v6 ? 72 : 52
        XCTAssertEqual(got.flatMap { $0[headers...] }, data, "the payload, in order, nothing lost or repeated")
        XCTAssertTrue(got.allSatisfy { $0.count <= mtu && TestPackets.transportChecksumVerifies($0) })
        if !v6 { XCTAssertTrue(got.allSatisfy(TestPackets.ipv4HeaderChecksumVerifies)) }
        XCTAssertEqual(counters.superPacketsFromHost, 1)
        XCTAssertEqual(counters.packetsFromHost, 100)
        XCTAssertEqual(counters.bytesFromHost, UInt64(got.reduce(0) { $0 + $1.count }))
        XCTAssertTrue(packets.isDrained)
    }

    func testIPv4SuperPacketIsCutAcrossFills() throws { try checkSuperPacketAcrossFills(v6: false) }
    func testIPv6SuperPacketIsCutAcrossFills() throws { try checkSuperPacketAcrossFills(v6: true) }

    /// Plain packets, a super-packet between them, and what cannot be handed in: the order is kept,
    /// the partial checksum of a single packet completed, and each drop counted under its reason.
    func testMixedReadKeepsOrderAndCountsDrops() throws {
        let channel = try PacketChannel(mtu: mtu, virtioHeader: true)
        var single = TestPackets.tcpPacket(v6: false, payload: TestPackets.payload(100), flags: TestPackets.ack)
        // NEEDS_CSUM: the checksum field holds the pseudo-header's sum, to be completed.
        let partial = VirtioNetHeader(flags: VirtioNetHeader.needsChecksum, checksumStart: 20, checksumOffset: 16)
        XCTAssertTrue(channel.host.write(single, header: partial))
        let cut = TestPackets.tcpPacket(v6: false, payload: TestPackets.payload(3000), flags: TestPackets.ack)
        XCTAssertTrue(channel.host.write(cut, header: superPacketHeader(v6: false, gsoSize: 1000)))
        XCTAssertTrue(channel.host.write([0x20] + [UInt8](repeating: 0, count: 39)))  // IP version 2
        var udpGSO = superPacketHeader(v6: false, gsoSize: 1000)
        udpGSO.gsoType = 5  // UDP_L4: not asked for
        XCTAssertTrue(channel.host.write(cut, header: udpGSO))
        single[single.count - 1] ^= 0xFF  // another payload: a distinct last packet
        XCTAssertTrue(channel.host.write(single, header: partial))

        let packets = HostPackets(io: channel.tunnel)
        var counters = PacketCounters()
        XCTAssertEqual(try packets.read(counters: &counters), 5)
        let (got, _) = drain(packets, &counters)
        XCTAssertEqual(got.map(\.count), [single.count, 1052, 1052, 1052, single.count])
        XCTAssertTrue(got.allSatisfy(TestPackets.transportChecksumVerifies), "the single packets' checksums were completed")
        XCTAssertEqual(got.last?.last, single.last)
        XCTAssertEqual(counters.droppedNotIP, 1)
        XCTAssertEqual(counters.droppedOffload, 1)
        XCTAssertEqual(counters.superPacketsFromHost, 1)
        XCTAssertEqual(counters.packetsFromHost, 7, "5 handed in, 2 dropped: every packet read is accounted for")
    }

    /// Without a virtio_net_hdr: up to 64 packets per read, handed in where they were read; a packet over
    /// the MTU is dropped and counted apart from the rest.
    func testPlainTunHandsPacketsInAsRead() throws {
        let channel = try PacketChannel(mtu: mtu, virtioHeader: false)
        for i in 0..<70 { XCTAssertTrue(channel.host.write(TestPackets.tcpPacket(v6: i % 2 == 1, payload: TestPackets.payload(i), flags: TestPackets.ack))) }
        let packets = HostPackets(io: channel.tunnel)
        var counters = PacketCounters()
        XCTAssertEqual(try packets.read(counters: &counters), 64, "one read batch is 64 packets")
        var (got, fills) = drain(packets, &counters)
        XCTAssertEqual(fills, [64])
        XCTAssertEqual(try packets.read(counters: &counters), 6)
        let rest = drain(packets, &counters)
        got += rest.packets
        XCTAssertEqual(got.map(\.count), (0..<70).map { ($0 % 2 == 1 ? 72 : 52) + $0 })
        XCTAssertNil(counters.superPacketsFromHost)
        XCTAssertEqual(counters.packetsFromHost, 70)
        XCTAssertEqual(packets.overMTU, 0)
    }
}
