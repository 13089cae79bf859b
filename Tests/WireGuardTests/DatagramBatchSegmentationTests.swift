import Glibc
import LinuxSystem
import TunnelgateSettings
@testable import WireGuard
import XCTest

/// UDP GSO in the send batch, over loopback: runs of same-size datagrams to one address go as one
/// message with UDP_SEGMENT and arrive as the datagrams they were made of, in order; runs break
/// where the address or the size changes; and a socket that cannot segment gets one send each.
final class DatagramBatchSegmentationTests: XCTestCase {
    var receivers: [Int32] = []
    var destinations: [Endpoint] = []
    var sender: Int32 = -1

    override func setUpWithError() throws {
        sender = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
        XCTAssertGreaterThanOrEqual(sender, 0)
        for _ in 0..<2 {
            let fd = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
            XCTAssertGreaterThanOrEqual(fd, 0)
            var endpoint = Endpoint(address: .v4(IPv4Address(0x7F00_0001)), port: 0)
            var address = sockaddr_storage()
            let addressLength = withUnsafeMutableBytes(of: &address) { endpoint.store(to: $0.baseAddress!) }
            let rc = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(addressLength)) } }
            XCTAssertEqual(rc, 0, "bind: \(errno)")
            var bound = sockaddr_in()
            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            _ = withUnsafeMutablePointer(to: &bound) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }
            endpoint.port = UInt16(bigEndian: bound.sin_port)
            var timeout = timeval(tv_sec: 2, tv_usec: 0)
            XCTAssertEqual(setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size)), 0, "SO_RCVTIMEO: \(errno)")
            var size: Int32 = 4 << 20
            XCTAssertEqual(setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &size, socklen_t(MemoryLayout<Int32>.size)), 0, "SO_RCVBUFFORCE: \(errno)")
            receivers.append(fd)
            destinations.append(endpoint)
        }
    }

    override func tearDown() {
        for fd in receivers { close(fd) }
        close(sender)
    }

    /// Queues datagram i (`sizes[i]` bytes, every byte i + 1) to destination `to[i]`.
    func load(_ batch: DatagramBatch, _ sizes: [Int], to: [Int]) {
        for (i, size) in sizes.enumerated() {
            batch.nextSlot.baseAddress!.initializeMemory(as: UInt8.self, repeating: UInt8(i + 1), count: size)
            batch.commit(length: size, to: destinations[to[i]])
        }
    }

    /// What receiver `r` got: (first byte, length) per datagram, in order.
    func received(_ r: Int, _ expected: Int) -> [[Int]] {
        var out: [[Int]] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        while out.count < expected {
            let n = buffer.withUnsafeMutableBytes { recv(receivers[r], $0.baseAddress, $0.count, 0) }
            if n < 0 { break }
            XCTAssertTrue(buffer[0..<n].allSatisfy { $0 == buffer[0] }, "a datagram holds exactly one message")
            out.append([Int(buffer[0]), n])
        }
        return out
    }

    func testRunsGoAsOneSegmentedSendEach() {
        let batch = DatagramBatch(slotSize: 1500, segmentation: true)
        // Same size but another address breaks a run; so does a datagram longer than the run's.
        let sizes = [1452, 1452, 1452, 1452, 700, 1000, 1000, 1000, 500, 900]
        let to = [0, 0, 1, 0, 0, 0, 0, 0, 0, 0]
        load(batch, sizes, to: to)
        XCTAssertEqual(batch.flush(FileDescriptor(rawValue: sender)), 0)
        XCTAssertTrue(batch.segmentation)
        // Runs: [0 1] to 0, [2] to 1, [3 4] to 0 (the last shorter), [5-8] to 0, [9] alone.
        XCTAssertEqual(batch.segmentedSends, 3)
        XCTAssertEqual(received(0, 9), [[1, 1452], [2, 1452], [4, 1452], [5, 700], [6, 1000], [7, 1000], [8, 1000], [9, 500], [10, 900]])
        XCTAssertEqual(received(1, 1), [[3, 1452]])
    }

    func testWithoutSegmentationEveryDatagramIsItsOwnMessage() {
        let batch = DatagramBatch(slotSize: 1500)
        load(batch, [1000, 1000, 1000], to: [0, 0, 0])
        XCTAssertEqual(batch.flush(FileDescriptor(rawValue: sender)), 0)
        XCTAssertEqual(batch.segmentedSends, 0)
        XCTAssertEqual(received(0, 3), [[1, 1000], [2, 1000], [3, 1000]])
    }

    func testRunsAreCutAtTheKernelsLimits() {
        let batch = DatagramBatch(slotSize: 1500, segmentation: true)
        // 64 datagrams of 1,452 bytes are 92,928 bytes: more than one UDP payload may hold.
        load(batch, [Int](repeating: 1452, count: DatagramBatch.capacity), to: [Int](repeating: 0, count: DatagramBatch.capacity))
        XCTAssertEqual(batch.flush(FileDescriptor(rawValue: sender)), 0)
        XCTAssertEqual(batch.segmentedSends, 2)
        XCTAssertEqual(received(0, DatagramBatch.capacity).map { $0[1] }, [Int](repeating: 1452, count: DatagramBatch.capacity))
    }

    func testRefusedSegmentationFallsBackToOneSendEach() {
        // A socket without UDP checksums (SO_NO_CHECK) cannot segment: UDP_SEGMENT fails with EINVAL
        // while plain sends work. That run goes one datagram at a time, and so does every later batch.
        var one: Int32 = 1
        XCTAssertEqual(setsockopt(sender, SOL_SOCKET, SO_NO_CHECK, &one, socklen_t(MemoryLayout<Int32>.size)), 0)
        let batch = DatagramBatch(slotSize: 1500, segmentation: true)
        load(batch, [1452, 1452, 100, 1452], to: [0, 0, 0, 1])
        XCTAssertEqual(batch.flush(FileDescriptor(rawValue: sender)), 0, "nothing lost")
        XCTAssertFalse(batch.segmentation)
        XCTAssertEqual(batch.segmentedSends, 0)
        XCTAssertEqual(received(0, 3), [[1, 1452], [2, 1452], [3, 100]])
        XCTAssertEqual(received(1, 1), [[4, 1452]])
        load(batch, [800, 800], to: [0, 0])
        XCTAssertEqual(batch.flush(FileDescriptor(rawValue: sender)), 0)
        XCTAssertEqual(batch.segmentedSends, 0)
        XCTAssertEqual(received(0, 2), [[1, 800], [2, 800]])
    }
}
