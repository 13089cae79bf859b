import TUN
import TunnelgateTestSupport
import XCTest

/// TUN offloads: TCP super-packets (virtio_net_hdr GSO TCPV4/TCPV6) cut into segments, partial
/// checksums completed, and bad headers dropped. Every checksum is verified with `TestPackets.rfc1071`,
/// written independently of `InternetChecksum`: bytes taken pairwise, big-endian, folded at the end.
final class TunOffloadTests: XCTestCase {
    /// Runs `prepare` on header + packet as one TUN read would hold them; returns the outcome and
    /// the packet as prepare left it.
    static func prepare(_ header: VirtioNetHeader, _ packet: [UInt8], mtu: Int = 1420) -> (VirtioNetHeader.Offload, [UInt8]) {
        var read = [UInt8](repeating: 0, count: VirtioNetHeader.size) + packet
        read.withUnsafeMutableBytes { header.store(to: $0.baseAddress!) }
        let outcome = read.withUnsafeMutableBytes { bytes in
            VirtioNetHeader(loadingFrom: bytes.baseAddress!)
                .prepare(UnsafeMutableRawBufferPointer(rebasing: bytes[VirtioNetHeader.size...]), maxSegmentLength: mtu)
        }
        return (outcome, Array(read[VirtioNetHeader.size...]))
    }

    /// The segments of `packet` per `plan`, each written into its own exactly sized buffer.
    static func segments(_ plan: TCPSegmentation, _ packet: [UInt8]) -> [[UInt8]] {
        (0..<plan.count).map { i in
            var out = [UInt8](repeating: 0xEE, count: plan.length(ofSegment: i))
            let written = packet.withUnsafeBytes { p in out.withUnsafeMutableBytes { plan.writeSegment(i, of: p, to: $0.baseAddress!) } }
            XCTAssertEqual(written, out.count)
            return out
        }
    }

    func gsoHeader(v6: Bool, gsoSize: UInt16, headerLength: UInt16 = 52) -> VirtioNetHeader {
        VirtioNetHeader(flags: VirtioNetHeader.needsChecksum,
                        gsoType: (v6 ? VirtioNetHeader.GSOType.tcpv6 : .tcpv4).rawValue,
                        headerLength: headerLength, gsoSize: gsoSize, checksumStart: v6 ? 40 : 20, checksumOffset: 16)
    }

    // MARK: Segmentation

    func checkSegmentation(v6: Bool) throws {
        let ipLength = v6 ? 40 : 20, headers = ipLength + 32
        let mss = v6 ? 1348 : 1368
        let data = TestPackets.payload(5000)
        let packet = TestPackets.tcpPacket(v6: v6, payload: data, flags: TestPackets.cwr | TestPackets.ack | TestPackets.psh | TestPackets.fin)
        // hdr_len as a TUN reports it: the whole linear part, longer than the headers.
        let header = gsoHeader(v6: v6, gsoSize: UInt16(mss), headerLength: 200)
        let (outcome, _) = Self.prepare(header, packet)
        guard case .segments(let plan) = outcome else { return XCTFail("not segmented: \(outcome)") }
        XCTAssertEqual(plan.headerLength, headers)
        XCTAssertEqual(plan.count, 4)
        let segments = Self.segments(plan, packet)
        XCTAssertEqual(segments.count, 4)
        var reassembled: [UInt8] = []
        for (i, segment) in segments.enumerated() {
            let payloadLength = i < 3 ? mss : 5000 - 3 * mss
            XCTAssertEqual(segment.count, headers + payloadLength, "segment \(i) length")
            XCTAssertLessThanOrEqual(segment.count, 1420)
            if v6 {
                XCTAssertEqual(TestPackets.be16(segment, 4), segment.count - 40, "segment \(i): IPv6 payload length")
                XCTAssertEqual(Array(segment[0..<4]) + Array(segment[6..<40]), Array(packet[0..<4]) + Array(packet[6..<40]))
            } else {
                XCTAssertEqual(TestPackets.be16(segment, 2), segment.count, "segment \(i): IPv4 total length")
                XCTAssertEqual(TestPackets.be16(segment, 4), (0xFFFE + i) & 0xFFFF, "segment \(i): IPv4 identification")
                XCTAssertTrue(TestPackets.ipv4HeaderChecksumVerifies(segment), "segment \(i): IPv4 header checksum")
                XCTAssertEqual(Array(segment[12..<20]), Array(packet[12..<20]))
            }
            XCTAssertTrue(TestPackets.transportChecksumVerifies(segment), "segment \(i): TCP checksum")
            XCTAssertEqual(TestPackets.be32(segment, ipLength + 4), 0xFFFF_F000 &+ UInt32(i * mss), "segment \(i): sequence")
            let flags = segment[ipLength + 13]
            XCTAssertEqual(flags & TestPackets.ack, TestPackets.ack, "segment \(i): ACK on every segment")
            XCTAssertEqual(flags & TestPackets.cwr != 0, i == 0, "segment \(i): CWR only on the first")
            XCTAssertEqual(flags & TestPackets.fin != 0, i == 3, "segment \(i): FIN only on the last")
            XCTAssertEqual(flags & TestPackets.psh != 0, i == 3, "segment \(i): PSH only on the last")
            // Ports, acknowledgement, window and options are copied unchanged.
            XCTAssertEqual(Array(segment[ipLength..<ipLength + 4]), Array(packet[ipLength..<ipLength + 4]))
            XCTAssertEqual(Array(segment[ipLength + 8..<ipLength + 13]), Array(packet[ipLength + 8..<ipLength + 13]))
            XCTAssertEqual(Array(segment[ipLength + 14..<ipLength + 16]), Array(packet[ipLength + 14..<ipLength + 16]))
            XCTAssertEqual(Array(segment[ipLength + 18..<headers]), Array(packet[ipLength + 18..<headers]))
            reassembled += segment[headers...]
        }
        XCTAssertEqual(reassembled, data, "the payload, in order, nothing lost or repeated")
    }

    func testIPv4SuperPacketBecomesSegments() throws { try checkSegmentation(v6: false) }
    func testIPv6SuperPacketBecomesSegments() throws { try checkSegmentation(v6: true) }

    /// An IPv6 TCP super-packet with extension headers before TCP (hop-by-hop options, destination
    /// options, a routing header with no segments left) is cut like any other: every segment carries
    /// them unchanged, its payload length and TCP checksum are its own. A fragment header, or a routing
    /// header still to be processed (the pseudo-header's destination would be another), is not cut.
    func testIPv6SuperPacketWithExtensionHeadersIsSegmented() throws {
        let data = TestPackets.payload(4000)
        let plain = TestPackets.tcpPacket(v6: true, payload: data, flags: TestPackets.ack | TestPackets.psh)
        // Insert after the fixed header: hop-by-hop (8 bytes, PadN), destination options (16), routing
        // type 4 with segments left 0 (8); the chain ends in TCP (6).
        func withExtensions(_ routingSegmentsLeft: UInt8, fragment: Bool = false) -> [UInt8] {
            var ext: [UInt8] = [60, 0, 1, 4, 0, 0, 0, 0]                            // hop-by-hop → dest opts
            ext += [43, 1, 1, 12] + [UInt8](repeating: 0, count: 12)               // dest opts (16) → routing
            ext += fragment ? [44, 0, 4, routingSegmentsLeft, 0, 0, 0, 0] + [6, 0, 0, 0, 0, 0, 0, 0]
                            : [6, 0, 4, routingSegmentsLeft, 0, 0, 0, 0]           // routing (8) → TCP / fragment
            var p = Array(plain[0..<40]) + ext + Array(plain[40...])
            p[6] = 0  // next header: hop-by-hop
            let payloadLength = p.count - 40
            p[4] = UInt8(payloadLength >> 8); p[5] = UInt8(payloadLength & 0xFF)
            return p
        }
        let packet = withExtensions(0)
        let tcpOffset = 40 + 32
        let headers = tcpOffset + 32
        let header = VirtioNetHeader(flags: VirtioNetHeader.needsChecksum, gsoType: VirtioNetHeader.GSOType.tcpv6.rawValue,
                                     headerLength: UInt16(headers), gsoSize: 1316, checksumStart: UInt16(tcpOffset), checksumOffset: 16)
        guard case .segments(let plan) = Self.prepare(header, packet).0 else { return XCTFail("not segmented") }
        XCTAssertEqual(plan.tcpOffset, tcpOffset)
        let segments = Self.segments(plan, packet)
        XCTAssertEqual(segments.count, 4)
        var reassembled: [UInt8] = []
        for (i, segment) in segments.enumerated() {
            XCTAssertLessThanOrEqual(segment.count, 1420)
            XCTAssertEqual(Array(segment[40..<tcpOffset]), Array(packet[40..<tcpOffset]), "segment \(i): the extension headers")
            XCTAssertEqual(TestPackets.be16(segment, 4), segment.count - 40, "segment \(i): payload length")
            XCTAssertTrue(Self.tcpChecksumVerifies(segment, tcpOffset: tcpOffset), "segment \(i): TCP checksum")
            reassembled += segment[headers...]
        }
        XCTAssertEqual(reassembled, data)
        for (why, bad) in [("a routing header with a segment left", withExtensions(1)), ("a fragment header", withExtensions(0, fragment: true))] {
            let fragHeader = VirtioNetHeader(flags: VirtioNetHeader.needsChecksum, gsoType: VirtioNetHeader.GSOType.tcpv6.rawValue,
                                             headerLength: 0, gsoSize: 1316, checksumStart: UInt16(bad.count > packet.count ? tcpOffset + 8 : tcpOffset),
                                             checksumOffset: 16)
            XCTAssertEqual(Self.prepare(fragHeader, bad).0, .malformed, why)
        }
    }

    /// The TCP checksum of an IPv6 packet whose TCP starts at `tcpOffset` (after extension headers).
    static func tcpChecksumVerifies(_ packet: [UInt8], tcpOffset: Int) -> Bool {
        let segment = Array(packet[tcpOffset...])
        let initial = TestPackets.pseudo(source: Array(packet[8..<24]), destination: Array(packet[24..<40]), protocol: 6,
                                         length: segment.count)
        return TestPackets.rfc1071(segment, initial: initial) == 0xFFFF
    }

    func testSuperPacketOfExactMultipleAndOfOneSegment() {
        for (length, expected) in [(1368 * 2, 2), (1368, 1), (100, 1)] {
            let packet = TestPackets.tcpPacket(v6: false, payload: TestPackets.payload(length), flags: TestPackets.ack | TestPackets.psh)
            guard case .segments(let plan) = Self.prepare(gsoHeader(v6: false, gsoSize: 1368), packet).0 else {
                return XCTFail("\(length): not segmented")
            }
            XCTAssertEqual(plan.count, expected, "\(length) bytes")
            let segments = Self.segments(plan, packet)
            XCTAssertEqual(segments.map { $0.count - 52 }.reduce(0, +), length)
            XCTAssertTrue(segments.allSatisfy(TestPackets.transportChecksumVerifies))
            XCTAssertEqual(segments.last.map { $0[33] & TestPackets.psh }, TestPackets.psh)
        }
    }

    // MARK: Partial checksums

    func testNeedsChecksumSinglePacketIsCompleted() {
        // TCP over IPv6, no GSO: the field holds the pseudo-header's sum.
        let tcp = TestPackets.tcpPacket(v6: true, payload: TestPackets.payload(777), flags: TestPackets.ack)
        XCTAssertFalse(TestPackets.transportChecksumVerifies(tcp), "the test packet starts with a partial checksum")
        let header = VirtioNetHeader(flags: VirtioNetHeader.needsChecksum, headerLength: 0, checksumStart: 40, checksumOffset: 16)
        let (outcome, prepared) = Self.prepare(header, tcp)
        XCTAssertEqual(outcome, .packet)
        XCTAssertTrue(TestPackets.transportChecksumVerifies(prepared))
        XCTAssertEqual(prepared[0..<56], tcp[0..<56], "only the checksum changes")
        XCTAssertEqual(prepared[58...], tcp[58...])

        // UDP over IPv4, odd length: the checksum is at offset 6 of the UDP header.
        let body = TestPackets.payload(333)
        let udpLength = 8 + body.count
        var udp: [UInt8] = [0x45, 0, UInt8((20 + udpLength) >> 8), UInt8((20 + udpLength) & 0xFF), 0, 1, 0x40, 0, 64, 17, 0, 0,
                            10, 70, 0, 1, 10, 70, 0, 2]
        let partial = UInt16(TestPackets.pseudo(source: [10, 70, 0, 1], destination: [10, 70, 0, 2], protocol: 17, length: udpLength))
        udp += [0x30, 0x39, 0x00, 0x35, UInt8(udpLength >> 8), UInt8(udpLength & 0xFF), UInt8(partial >> 8), UInt8(partial & 0xFF)]
        udp += body
        let (udpOutcome, udpPrepared) = Self.prepare(
            VirtioNetHeader(flags: VirtioNetHeader.needsChecksum, checksumStart: 20, checksumOffset: 6), udp)
        XCTAssertEqual(udpOutcome, .packet)
        XCTAssertTrue(TestPackets.transportChecksumVerifies(udpPrepared))
        XCTAssertNotEqual(TestPackets.be16(udpPrepared, 26), 0, "a UDP checksum is never sent as 0")
    }

    func testPacketWithoutNeedsChecksumIsLeftAlone() {
        let packet = TestPackets.tcpPacket(v6: false, payload: TestPackets.payload(64), flags: TestPackets.ack)
        let (outcome, prepared) = Self.prepare(VirtioNetHeader(flags: VirtioNetHeader.dataValid), packet)
        XCTAssertEqual(outcome, .packet)
        XCTAssertEqual(prepared, packet)
    }

    // MARK: What is dropped

    func testMalformedHeadersAreDropped() {
        let v4 = TestPackets.tcpPacket(v6: false, payload: TestPackets.payload(3000), flags: TestPackets.ack)
        let v6 = TestPackets.tcpPacket(v6: true, payload: TestPackets.payload(3000), flags: TestPackets.ack)
        var cases: [(String, VirtioNetHeader, [UInt8], Int)] = [
            ("hdr_len beyond the packet", gsoHeader(v6: false, gsoSize: 1368, headerLength: UInt16(v4.count + 1)), v4, 1420),
            ("gso_size 0", gsoHeader(v6: false, gsoSize: 0), v4, 1420),
            ("TCPV4 on an IPv6 packet", gsoHeader(v6: false, gsoSize: 1348), v6, 1420),
            ("TCPV6 on an IPv4 packet", gsoHeader(v6: true, gsoSize: 1368), v4, 1420),
            ("segments over the MTU", gsoHeader(v6: false, gsoSize: 1368), v4, 1400),
            ("csum_start not at TCP", VirtioNetHeader(flags: 1, gsoType: 1, gsoSize: 1368, checksumStart: 24, checksumOffset: 16), v4, 1420),
            ("csum_offset not TCP's", VirtioNetHeader(flags: 1, gsoType: 1, gsoSize: 1368, checksumStart: 20, checksumOffset: 6), v4, 1420),
            ("truncated TCP header", gsoHeader(v6: false, gsoSize: 1368, headerLength: 0), Array(v4[0..<30]), 1420),
            ("truncated TCP options", gsoHeader(v6: false, gsoSize: 1368, headerLength: 0), Array(v4[0..<48]), 1420),
            ("a packet shorter than an IP header", gsoHeader(v6: false, gsoSize: 1368, headerLength: 0), Array(v4[0..<12]), 1420),
            ("csum_start beyond the packet", VirtioNetHeader(flags: 1, checksumStart: UInt16(v4.count), checksumOffset: 0), v4, 1420),
            ("checksum field beyond the packet", VirtioNetHeader(flags: 1, checksumStart: 20, checksumOffset: UInt16(v4.count)), v4, 1420),
        ]
        var notTCP = v4
        notTCP[9] = 17
        cases.append(("TCPV4 on UDP", gsoHeader(v6: false, gsoSize: 1368), notTCP, 1420))
        var shortOffset = v4
        shortOffset[32] = 0x40 // data offset 4: 16 bytes, less than a TCP header
        cases.append(("TCP data offset below 5", gsoHeader(v6: false, gsoSize: 1368, headerLength: 0), shortOffset, 1420))
        for (name, header, packet, mtu) in cases {
            XCTAssertEqual(Self.prepare(header, packet, mtu: mtu).0, .malformed, name)
        }
    }

    func testUnsupportedGSOTypesAreDropped() {
        let v4 = TestPackets.tcpPacket(v6: false, payload: TestPackets.payload(3000), flags: TestPackets.ack)
        for (name, type) in [("UDP (UFO)", VirtioNetHeader.GSOType.udp.rawValue), ("UDP_L4 (USO)", VirtioNetHeader.GSOType.udpL4.rawValue),
                             ("TCPV4 with ECN", VirtioNetHeader.GSOType.tcpv4.rawValue | VirtioNetHeader.ecnBit),
                             ("an unknown type", 2)] {
            var header = gsoHeader(v6: false, gsoSize: 1368)
            header.gsoType = type
            XCTAssertEqual(Self.prepare(header, v4).0, .unsupported, name)
        }
    }

    /// Arbitrary headers over arbitrary and damaged packets: never a crash, and whatever is
    /// accepted for segmentation is written within its segments' lengths and below the MTU.
    func testArbitraryHeadersNeverCrash() {
        var random = SeededGenerator(state: 0x7450)
        let packets = [TestPackets.tcpPacket(v6: false, payload: TestPackets.payload(4000), flags: TestPackets.ack),
                       TestPackets.tcpPacket(v6: true, payload: TestPackets.payload(4000), flags: TestPackets.ack)]
        var segmented = 0
        for round in 0..<20_000 {
            var packet = packets[round % 2]
            packet = Array(packet[0..<Int.random(in: 0...packet.count, using: &random)])
            for _ in 0..<Int.random(in: 0...3, using: &random) where !packet.isEmpty {
                packet[Int.random(in: 0..<min(packet.count, 80), using: &random)] = UInt8.random(in: 0...255, using: &random)
            }
            let small = { (limit: UInt16) in UInt16.random(in: 0...limit, using: &random) }
            let header = VirtioNetHeader(flags: UInt8.random(in: 0...3, using: &random),
                                         gsoType: [0, 1, 3, 4, 5, 0x81, 9][Int.random(in: 0..<7, using: &random)],
                                         headerLength: small(round % 3 == 0 ? 0xFFFF : 128),
                                         gsoSize: round % 5 == 0 ? small(0xFFFF) : small(1500),
                                         checksumStart: round % 7 == 0 ? small(0xFFFF) : small(60),
                                         checksumOffset: round % 11 == 0 ? small(0xFFFF) : small(20))
            let mtu = 1420
            if case .segments(let plan) = Self.prepare(header, packet, mtu: mtu).0 {
                segmented += 1
                XCTAssertLessThanOrEqual((0..<plan.count).map(plan.length(ofSegment:)).max() ?? 0, mtu)
                if plan.count <= 64 { _ = Self.segments(plan, packet) }
            }
        }
        XCTAssertGreaterThan(segmented, 0, "some arbitrary headers still describe a super-packet")
    }

    // MARK: The checksum itself

    func testInternetChecksumMatchesTheIndependentOneAtEveryLengthAndAlignment() {
        var random = SeededGenerator(state: 1071)
        let bytes = (0..<300).map { _ in UInt8.random(in: 0...255, using: &random) }
        for start in 0..<8 {
            for length in 0..<(300 - start) {
                let slice = Array(bytes[start..<start + length])
                let sum = bytes.withUnsafeBytes { InternetChecksum.add(UnsafeRawBufferPointer(rebasing: $0[start..<start + length])) }
                XCTAssertEqual(UInt16(bigEndian: InternetChecksum.fold(sum)), TestPackets.rfc1071(slice), "start \(start), length \(length)")
            }
        }
        // All ones: the end-around carries of the 64-bit sum must not be lost.
        let ones = [UInt8](repeating: 0xFF, count: 4096)
        XCTAssertEqual(ones.withUnsafeBytes { InternetChecksum.fold(InternetChecksum.add($0)) }, 0xFFFF)
    }

    func testChecksumCopyCopiesExactlyAndSumsAsAddDoes() {
        var random = SeededGenerator(state: 793)
        let bytes = (0..<300).map { _ in UInt8.random(in: 0...255, using: &random) }
        for start in 0..<8 {
            for length in 0..<(300 - start) {
                // A guard byte on each side: the copy writes exactly `length` bytes.
                var out = [UInt8](repeating: 0xA5, count: length + 2)
                let seed: UInt64 = UInt64(length) &* 0x9E37_79B9_7F4A_7C15
                let (copied, added) = bytes.withUnsafeBytes { source -> (UInt64, UInt64) in
                    let piece = UnsafeRawBufferPointer(rebasing: source[start..<start + length])
                    let copied = out.withUnsafeMutableBytes { InternetChecksum.copy(piece, to: $0.baseAddress! + 1, adding: seed) }
                    return (copied, InternetChecksum.add(piece, to: seed))
                }
                XCTAssertEqual(InternetChecksum.fold(copied), InternetChecksum.fold(added), "start \(start), length \(length)")
                XCTAssertEqual(Array(out[1..<length + 1]), Array(bytes[start..<start + length]), "start \(start), length \(length)")
                XCTAssertEqual(out.first, 0xA5)
                XCTAssertEqual(out.last, 0xA5)
            }
        }
        let ones = [UInt8](repeating: 0xFF, count: 4096)
        var sink = [UInt8](repeating: 0, count: 4096)
        let sum = ones.withUnsafeBytes { source in sink.withUnsafeMutableBytes { InternetChecksum.copy(source, to: $0.baseAddress!, adding: ~0) } }
        XCTAssertEqual(InternetChecksum.fold(sum), 0xFFFF)
    }
}
