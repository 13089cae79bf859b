import WireGuard
import XCTest

final class MessageTypeTests: XCTestCase {
    func testExactSizesAndReservedBytes() {
        func message(_ type: UInt8, _ length: Int) -> [UInt8] {
            var m = [UInt8](repeating: 0xAB, count: length)
            if length > 0 { m[0] = type }
            for i in 1..<min(4, length) { m[i] = 0 }
            return m
        }
        XCTAssertEqual(MessageType.classify(message(1, 148)), .initiation)
        XCTAssertEqual(MessageType.classify(message(2, 92)), .response)
        XCTAssertEqual(MessageType.classify(message(3, 64)), .cookieReply)
        XCTAssertEqual(MessageType.classify(message(4, 32)), .transport)
        XCTAssertEqual(MessageType.classify(message(4, 1_500)), .transport)
        for (type, length) in [(1, 148), (2, 92), (3, 64)] {
            XCTAssertNil(MessageType.classify(message(UInt8(type), length - 1)))
            XCTAssertNil(MessageType.classify(message(UInt8(type), length + 1)))
        }
        XCTAssertNil(MessageType.classify(message(4, 31)))
        for type: UInt8 in [0, 5, 255] { XCTAssertNil(MessageType.classify(message(type, 148))) }
        for reserved in 1..<4 {
            var m = message(1, 148)
            m[reserved] = 1
            XCTAssertNil(MessageType.classify(m))
        }
        XCTAssertNil(MessageType.classify([]))
        XCTAssertNil(MessageType.classify([1]))
        XCTAssertNil(MessageType.classify([1, 0, 0]))
        XCTAssertNil(MessageType.classify(UnsafeRawBufferPointer(start: nil, count: 0)))
    }

    /// Random datagrams of random lengths, half of them with a plausible header, through every
    /// parser: nothing traps, and nothing authenticates.
    func testGarbageNeverTrapsOrAuthenticates() throws {
        var generator = SeededGenerator(state: 7)
        let local = PrivateKey.generate()
        let peer = PrivateKey.generate()
        let (_, state) = try Handshake.createInitiation(localStatic: local, remoteStatic: peer.publicKey, presharedKey: nil,
                                                        senderIndex: 1, timestamp: WireGuardCrypto.tai64n(unixSeconds: 0, nanoseconds: 0),
                                                        cookie: nil)
        var cookies = CookieGenerator(localPublic: local.publicKey, now: 0)
        let keypair = try TransportKeypair.make()
        var classified = [MessageType: Int]()
        for round in 0..<10_000 {
            let lengths = [0, 1, 3, 4, 31, 32, 63, 64, 65, 91, 92, 93, 147, 148, 149]
            let length = round % 2 == 0 ? lengths.randomElement(using: &generator)! : Int.random(in: 0...2_000, using: &generator)
            var datagram = (0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) }
            if round % 2 == 0 && length >= 4 {
                datagram[0] = UInt8.random(in: 0...5, using: &generator)
                datagram[1] = 0; datagram[2] = 0; datagram[3] = 0
            }
            if let type = MessageType.classify(datagram) { classified[type, default: 0] += 1 }
            datagram.withUnsafeBytes { raw in
                XCTAssertFalse(Handshake.verifyMAC1(raw, localPublic: local.publicKey))
                XCTAssertFalse(Handshake.verifyMAC2(raw, cookie: [UInt8](repeating: 0, count: 16)))
                XCTAssertFalse(cookies.verifyMAC2(raw, endpoint: [1], now: 1))
                _ = MessageType.senderIndex(in: raw)
                _ = MessageType.receiverIndex(in: raw)
                _ = MessageType.mac1(of: raw)
                _ = Transport.counter(of: raw)
            }
            XCTAssertThrowsError(try Handshake.consumeInitiation(datagram, localStatic: local))
            XCTAssertThrowsError(try Handshake.consumeResponse(datagram, state: state, localStatic: local, presharedKey: nil))
            XCTAssertThrowsError(try Handshake.consumeCookieReply(datagram, remotePublic: peer.publicKey, lastMAC1: state.mac1))
            _ = cookies.createReply(to: datagram, endpoint: [1], now: 0)
            var copy = datagram
            XCTAssertNil(copy.withUnsafeMutableBytes { Transport.decodeTransport(keypair: keypair, datagram: $0) })
        }
        // The plausible headers did reach every type, so the parsers behind classify() ran.
        for type in [MessageType.initiation, .response, .cookieReply, .transport] {
            XCTAssertGreaterThan(classified[type, default: 0], 0, "\(type)")
        }
    }
}

/// A keypair from a real handshake, for tests that only need one.
enum TransportKeypair {
    static func make() throws -> Keypair {
        let a = PrivateKey.generate(), b = PrivateKey.generate()
        let (initiation, state) = try Handshake.createInitiation(
            localStatic: a, remoteStatic: b.publicKey, presharedKey: nil, senderIndex: 1,
            timestamp: WireGuardCrypto.tai64n(unixSeconds: 1, nanoseconds: 0), cookie: nil)
        let received = try Handshake.consumeInitiation(initiation, localStatic: b)
        let (response, _) = try Handshake.createResponse(to: received, presharedKey: nil, senderIndex: 2, cookie: nil)
        return try Handshake.consumeResponse(response, state: state, localStatic: a, presharedKey: nil)
    }
}
