import Glibc
import LinuxSystem
import TUN
import XCTest

/// The TUN module's packet I/O without root: the in-memory channel (both ends, bounded, its
/// readiness, the virtio_net_hdr carried through), and the real `TunPacketIO` over a
/// SOCK_SEQPACKET socket pair, which keeps packet boundaries as a TUN does: where the header goes
/// on a write (into the headroom, one write per packet), and what a read makes of header and packet.
final class PacketIOTests: XCTestCase {
    static func packet(_ n: Int, length: Int = 60) -> [UInt8] {
        // An IPv4 header's first bytes so it looks like one; the rest says which packet it is.
        [0x45, 0, UInt8(length >> 8), UInt8(length & 0xFF)] + [UInt8](repeating: UInt8(truncatingIfNeeded: n), count: length - 4)
    }

    func readable(_ io: some PacketIO) throws -> Bool {
        try Poll.readable(io.readiness, timeoutMilliseconds: 0)
    }

    // MARK: The channel

    func testChannelCarriesPacketsBothWaysInOrder() throws {
        let channel = try PacketChannel(mtu: 1420)
        let batch = PacketBatch(references: 8, headroom: 0)
        var packets = (0..<5).map { Self.packet($0) }
        for i in packets.indices { packets[i].withUnsafeMutableBytes { batch.append($0) } }
        // The batch refers to `packets`' storage: written while it is alive.
        let written = channel.host.write(batch)
        XCTAssertEqual(written, PacketBatch.Written(packets: 5, bytes: 300))
        XCTAssertTrue(try readable(channel.tunnel), "the tunnel end polls readable while packets wait")
        XCTAssertFalse(try readable(channel.host), "nothing waits at the host end")

        let reads = channel.tunnel.makeReadBatch(capacity: 3)
        XCTAssertEqual(try channel.tunnel.read(into: reads), 3, "a read takes at most the batch's capacity")
        XCTAssertEqual((0..<3).map { Array(reads.packet($0)) }, Array(packets[0..<3]))
        XCTAssertTrue(try readable(channel.tunnel), "two are still waiting")
        XCTAssertEqual(try channel.tunnel.read(into: reads), 2)
        XCTAssertEqual((0..<2).map { Array(reads.packet($0)) }, Array(packets[3..<5]))
        XCTAssertFalse(try readable(channel.tunnel), "drained: no longer readable")
        XCTAssertEqual(try channel.tunnel.read(into: reads), 0, "nothing waiting is 0, not an error")

        // The other way, one packet without headroom.
        let reply = Self.packet(9, length: 40)
        XCTAssertEqual(reply.withUnsafeBytes { (try? channel.tunnel.write($0)) ?? -1 }, 40)
        XCTAssertEqual(channel.host.readPackets().map(\.packet), [reply])
    }

    func testChannelIsBoundedAndCountsWhatItDropped() throws {
        let channel = try PacketChannel(mtu: 1420, capacity: 4)
        for n in 0..<6 { channel.host.write(Self.packet(n)) }
        XCTAssertEqual(channel.host.overflowDrops, 2, "a full direction drops and counts, as a TUN's queue does")
        XCTAssertEqual(channel.tunnel.waiting, 4)
        XCTAssertEqual(channel.tunnel.readPackets().map { $0.packet[10] }, [0, 1, 2, 3], "the first four, in order")
        XCTAssertTrue(channel.host.write(Self.packet(7)), "room again once read")
    }

    func testChannelDropsAPacketLargerThanTheReadersSlot() throws {
        let channel = try PacketChannel(mtu: 1280)
        channel.host.write(Self.packet(1, length: 1400))   // over the MTU the reader's slots are sized for
        channel.host.write(Self.packet(2))
        let reads = channel.tunnel.makeReadBatch(capacity: 4)
        XCTAssertEqual(try channel.tunnel.read(into: reads), 1)
        XCTAssertEqual(reads.droppedReads, 1)
        XCTAssertEqual(Array(reads.packet(0)), Self.packet(2))
    }

    func testChannelCarriesTheVirtioHeader() throws {
        let channel = try PacketChannel(mtu: 1420, virtioHeader: true)
        XCTAssertTrue(channel.tunnel.carriesVirtioHeader)
        XCTAssertEqual(channel.tunnel.largestRead, VirtioNetHeader.largestPacket, "a read may be a 64 KB super-packet")
        let header = VirtioNetHeader(flags: VirtioNetHeader.needsChecksum, gsoType: VirtioNetHeader.GSOType.tcpv4.rawValue,
                                     headerLength: 52, gsoSize: 1368, checksumStart: 20, checksumOffset: 16)
        let superPacket = Self.packet(3, length: 4000)
        channel.host.write(superPacket, header: header)
        let reads = channel.tunnel.makeReadBatch(capacity: 1)
        XCTAssertEqual(try channel.tunnel.read(into: reads), 1)
        XCTAssertEqual(reads.header(0), header)
        XCTAssertEqual(Array(reads.packet(0)), superPacket)
    }

    func testTunWriterWritesThroughPacketIO() throws {
        let channel = try PacketChannel(mtu: 100)
        let writer = TunWriter(io: channel.tunnel)
        var good = Self.packet(1, length: 60)
        XCTAssertTrue(good.withUnsafeMutableBufferPointer { writer.write($0.baseAddress!, 60) })
        var truncated = Array(good[0..<50])
        XCTAssertFalse(truncated.withUnsafeMutableBufferPointer { writer.write($0.baseAddress!, 50) }, "total length 60, 50 bytes")
        var big = Self.packet(2, length: 120)
        XCTAssertFalse(big.withUnsafeMutableBufferPointer { writer.write($0.baseAddress!, 120) }, "over the MTU")
        XCTAssertEqual(channel.host.readPackets().map(\.packet), [good])
        XCTAssertEqual(writer.packets.load(ordering: .relaxed), 1)
        XCTAssertEqual(writer.malformed.load(ordering: .relaxed), 1)
        XCTAssertEqual(writer.overMTU.load(ordering: .relaxed), 1)
    }

    // MARK: TunPacketIO, over a socket pair that keeps packet boundaries

    var pair: [Int32] = [-1, -1]

    override func setUpWithError() throws {
        pair = [-1, -1]
        XCTAssertEqual(socketpair(AF_UNIX, Int32(SOCK_SEQPACKET.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &pair), 0)
        try FileDescriptor(rawValue: pair[0]).setNonBlocking(true)
        try FileDescriptor(rawValue: pair[1]).setNonBlocking(true)
    }

    override func tearDown() {
        for fd in pair where fd >= 0 { close(fd) }
    }

    /// What the far end of the pair received, one message each.
    func farEndMessages() -> [[UInt8]] {
        var out: [[UInt8]] = []
        var buffer = [UInt8](repeating: 0, count: 70_000)
        while true {
            let n = buffer.withUnsafeMutableBytes { recv(pair[1], $0.baseAddress, $0.count, 0) }
            if n <= 0 { return out }
            out.append(Array(buffer[0..<n]))
        }
    }

    func testTunPacketIOWritesTheHeaderIntoTheHeadroom() throws {
        let io = TunPacketIO(descriptor: FileDescriptor(rawValue: pair[0]), mtu: 1420, virtioHeader: true)
        // Two packets in one buffer, each after 16 bytes of headroom that hold something else.
        var memory = [UInt8](repeating: 0xAA, count: 16) + Self.packet(1) + [UInt8](repeating: 0xBB, count: 16) + Self.packet(2, length: 40)
        let batch = PacketBatch(references: 4, headroom: VirtioNetHeader.size)
        let valid = VirtioNetHeader(flags: VirtioNetHeader.dataValid)
        let written = memory.withUnsafeMutableBytes { raw in
            batch.append(UnsafeMutableRawBufferPointer(rebasing: raw[16..<76]))
            batch.append(UnsafeMutableRawBufferPointer(rebasing: raw[92..<132]), header: valid)
            return io.write(batch)
        }
        XCTAssertEqual(written, PacketBatch.Written(packets: 2, bytes: 100), "the bytes counted are the packets', not the headers'")
        var zero = [UInt8](repeating: 0, count: VirtioNetHeader.size)
        var second = zero
        second.withUnsafeMutableBytes { valid.store(to: $0.baseAddress!) }
        XCTAssertEqual(farEndMessages(), [zero + Self.packet(1), second + Self.packet(2, length: 40)],
                       "one write each: its header, then the packet")
        XCTAssertEqual(Array(memory[0..<6]), [UInt8](repeating: 0xAA, count: 6), "only the header's 10 bytes of headroom are used")

        // One packet without headroom gets a GSO_NONE header too.
        let lone = Self.packet(3, length: 28)
        XCTAssertEqual(try lone.withUnsafeBytes { try io.write($0) }, 28)
        zero = [UInt8](repeating: 0, count: VirtioNetHeader.size)
        XCTAssertEqual(farEndMessages(), [zero + lone])
    }

    func testTunPacketIOReadsHeaderAndPacketAndDropsWhatIsNoPacket() throws {
        let io = TunPacketIO(descriptor: FileDescriptor(rawValue: pair[0]), mtu: 1420, virtioHeader: true)
        let header = VirtioNetHeader(flags: VirtioNetHeader.needsChecksum, checksumStart: 20, checksumOffset: 6)
        var message = [UInt8](repeating: 0, count: VirtioNetHeader.size) + Self.packet(5)
        message.withUnsafeMutableBytes { header.store(to: $0.baseAddress!) }
        XCTAssertEqual(message.withUnsafeBytes { send(pair[1], $0.baseAddress, $0.count, 0) }, message.count)
        let short = [UInt8](repeating: 1, count: 6)  // less than a header
        XCTAssertEqual(short.withUnsafeBytes { send(pair[1], $0.baseAddress, $0.count, 0) }, 6)
        XCTAssertEqual(message.withUnsafeBytes { send(pair[1], $0.baseAddress, $0.count, 0) }, message.count)

        let reads = io.makeReadBatch(capacity: 8)
        XCTAssertEqual(try io.read(into: reads), 2)
        XCTAssertEqual(reads.droppedReads, 1)
        for i in 0..<2 {
            XCTAssertEqual(reads.header(i), header)
            XCTAssertEqual(Array(reads.packet(i)), Self.packet(5))
        }
        XCTAssertEqual(try io.read(into: reads), 0, "EAGAIN is an empty batch")

        // Without IFF_VNET_HDR the whole message is the packet.
        let plain = TunPacketIO(descriptor: FileDescriptor(rawValue: pair[0]), mtu: 1420, virtioHeader: false)
        XCTAssertEqual(message.withUnsafeBytes { send(pair[1], $0.baseAddress, $0.count, 0) }, message.count)
        let plainReads = plain.makeReadBatch(capacity: 8)
        XCTAssertEqual(try plain.read(into: plainReads), 1)
        XCTAssertEqual(Array(plainReads.packet(0)), message)
    }

    func testTunPacketIOCountsRefusedWritesAndStopsAtTheEnd() throws {
        let io = TunPacketIO(descriptor: FileDescriptor(rawValue: pair[0]), mtu: 1420, virtioHeader: false)
        // Fill the far end's queue until the kernel refuses (EAGAIN on a non-blocking socket), as a
        // TUN refuses a packet: bounded, it is a few hundred packets.
        let packet = Self.packet(1)
        var accepted = 0
        while accepted < 100_000, (try? packet.withUnsafeBytes { try io.write($0) }) == packet.count { accepted += 1 }
        XCTAssertLessThan(accepted, 100_000, "the queue filled")
        XCTAssertThrowsError(try packet.withUnsafeBytes { try io.write($0) }) { error in
            XCTAssertEqual("\(error)", "write failed: \(Errno.wouldBlock)", "the failed call and its errno")
        }
        // A batch whose packets are all refused is counted as written: none.
        var copies = Self.packet(2) + Self.packet(3)
        let batch = PacketBatch(references: 2, headroom: 0)
        let written = copies.withUnsafeMutableBytes { raw in
            batch.append(UnsafeMutableRawBufferPointer(rebasing: raw[0..<60]))
            batch.append(UnsafeMutableRawBufferPointer(rebasing: raw[60..<120]))
            return io.write(batch)
        }
        XCTAssertEqual(written, PacketBatch.Written(packets: 0, bytes: 0))

        // The far end shut for writing: a read there is EOF, which is an empty batch.
        shutdown(pair[1], Int32(SHUT_WR))
        XCTAssertEqual(try io.read(into: io.makeReadBatch(capacity: 2)), 0)
    }
}
