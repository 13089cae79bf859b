import Glibc
import TunnelgateSettings
@testable import WireGuard
import XCTest

/// A datagram train (messages back to back, one sendmsg with UDP_SEGMENT) arrives as the
/// datagrams it was made of, over loopback; and the same when it falls back to one send each.
final class DatagramTrainTests: XCTestCase {
    var receiver: Int32 = -1
    var sender: Int32 = -1
    var destination = Endpoint(address: .v4(IPv4Address(0x7F00_0001)), port: 0)

    override func setUpWithError() throws {
        receiver = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
        sender = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
        XCTAssertGreaterThanOrEqual(receiver, 0)
        XCTAssertGreaterThanOrEqual(sender, 0)
        let rc = destination.withSockaddr { bind(receiver, $0, $1) }
        XCTAssertEqual(rc, 0, "bind: \(errno)")
        var bound = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &bound) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(receiver, $0, &length) } }
        destination.port = UInt16(bigEndian: bound.sin_port)
        var timeout = timeval(tv_sec: 2, tv_usec: 0)
        setsockopt(receiver, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    }

    override func tearDown() {
        close(receiver)
        close(sender)
    }

    /// Fills the train with messages of `sizes` bytes, message i all bytes i + 1.
    func load(_ train: DatagramTrain, _ sizes: [Int]) {
        for (i, size) in sizes.enumerated() {
            XCTAssertTrue(train.hasRoom)
            let slot = train.nextSlot
            slot.baseAddress!.initializeMemory(as: UInt8.self, repeating: UInt8(i + 1), count: size)
            train.commit(length: size)
        }
    }

    func receiveAll(_ expected: Int) -> [[UInt8]] {
        var datagrams: [[UInt8]] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        while datagrams.count < expected {
            let n = buffer.withUnsafeMutableBytes { recv(receiver, $0.baseAddress, $0.count, 0) }
            if n < 0 { break }
            datagrams.append(Array(buffer[0..<n]))
        }
        return datagrams
    }

    func check(_ train: DatagramTrain, _ sizes: [Int], segmented: Bool, file: StaticString = #filePath, line: UInt = #line) {
        load(train, sizes)
        let before = train.segmentedSends
        let (failed, refused) = train.flush(sender, to: destination)
        XCTAssertEqual(failed, 0, file: file, line: line)
        XCTAssertFalse(refused, "loopback takes UDP_SEGMENT", file: file, line: line)
        XCTAssertEqual(train.segmentedSends - before, segmented ? 1 : 0, file: file, line: line)
        XCTAssertTrue(train.isEmpty, file: file, line: line)
        let datagrams = receiveAll(sizes.count)
        XCTAssertEqual(datagrams.map(\.count), sizes, "one datagram per message, in order", file: file, line: line)
        for (i, datagram) in datagrams.enumerated() {
            XCTAssertTrue(datagram.allSatisfy { $0 == UInt8(i + 1) }, "datagram \(i) holds message \(i)", file: file, line: line)
        }
    }

    func testTrainArrivesAsItsDatagrams() {
        let train = DatagramTrain(messageCapacity: 1452)
        check(train, [1452, 1452, 1452, 700], segmented: true)
        check(train, [1452, 1452], segmented: true)
        check(train, [333], segmented: false)
    }

    func testTrainIsFullAtItsLimits() {
        let train = DatagramTrain(messageCapacity: 1000)
        var n = 0
        while train.hasRoom {
            train.commit(length: 1000)
            n += 1
        }
        XCTAssertEqual(n, min(DatagramTrain.maximumSegments, DatagramTrain.maximumLength / 1000))
        train.discard()
        XCTAssertTrue(train.isEmpty)
        train.commit(length: 1000)
        train.commit(length: 10)
        XCTAssertFalse(train.hasRoom, "a shorter message ends the train")
        train.discard()
    }

    func testRefusedSegmentationFallsBackToOneSendEach() {
        // A socket without UDP checksums (SO_NO_CHECK) cannot segment: sendmsg(UDP_SEGMENT) fails
        // with EINVAL while plain sends work. The train then goes one by one, and so do later ones.
        var one: Int32 = 1
        XCTAssertEqual(setsockopt(sender, SOL_SOCKET, SO_NO_CHECK, &one, socklen_t(MemoryLayout<Int32>.size)), 0)
        let train = DatagramTrain(messageCapacity: 1452)
        load(train, [1452, 1452, 100])
        let (failed, refused) = train.flush(sender, to: destination)
        XCTAssertTrue(refused)
        XCTAssertEqual(failed, 0)
        XCTAssertFalse(train.segmentationWorks)
        XCTAssertEqual(train.segmentedSends, 0)
        XCTAssertEqual(receiveAll(3).map(\.count), [1452, 1452, 100])
        check(train, [1000, 1000, 500], segmented: false)
    }
}
