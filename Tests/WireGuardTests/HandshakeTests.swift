import WireGuard
import XCTest
import TunnelgateSettings

final class HandshakeTests: XCTestCase {
    let initiatorStatic = PrivateKey.generate()
    let responderStatic = PrivateKey.generate()
    let timestamp = WireGuardCrypto.tai64n(unixSeconds: 1_700_000_000, nanoseconds: 0)

    struct Outcome {
        var initiation: [UInt8]
        var received: ReceivedInitiation
        var response: [UInt8]
        var initiator: Keypair
        var responder: Keypair
    }

    func handshake(initiatorPSK: [UInt8]?, responderPSK: [UInt8]?) throws -> Outcome {
        let initiatorPSK = initiatorPSK.flatMap { SecretKey(bytes: $0) }
        let responderPSK = responderPSK.flatMap { SecretKey(bytes: $0) }
        let (initiation, state) = try Handshake.createInitiation(
            localStatic: initiatorStatic, remoteStatic: responderStatic.publicKey, presharedKey: initiatorPSK,
            senderIndex: 0x1111_2222, timestamp: timestamp, cookie: nil)
        let received = try Handshake.consumeInitiation(initiation, localStatic: responderStatic)
        let (response, responder) = try Handshake.createResponse(to: received, presharedKey: responderPSK,
                                                                 senderIndex: 0x3333_4444, cookie: nil)
        let initiator = try Handshake.consumeResponse(response, state: state, localStatic: initiatorStatic,
                                                      presharedKey: initiatorPSK)
        return Outcome(initiation: initiation, received: received, response: response, initiator: initiator,
                       responder: responder)
    }

    func testHandshakeWithoutPSKYieldsMatchingKeypairs() throws {
        try checkMatchingKeypairs(try handshake(initiatorPSK: nil, responderPSK: nil))
    }

    func testHandshakeWithPSKYieldsMatchingKeypairs() throws {
        let psk = WireGuardCrypto.generatePrivateKey()
        let withPSK = try handshake(initiatorPSK: psk, responderPSK: psk)
        try checkMatchingKeypairs(withPSK)
        // The PSK changes the keys: a zero PSK is not the same as "none" by accident.
        let without = try handshake(initiatorPSK: nil, responderPSK: nil)
        XCTAssertNotEqual(withPSK.initiator.sendKey.bytes, without.initiator.sendKey.bytes)
        let explicitZero = try handshake(initiatorPSK: [UInt8](repeating: 0, count: 32),
                                         responderPSK: nil)
        try checkMatchingKeypairs(explicitZero)
    }

    func checkMatchingKeypairs(_ o: Outcome, file: StaticString = #filePath, line: UInt = #line) throws {
        XCTAssertEqual(o.initiation.count, 148, file: file, line: line)
        XCTAssertEqual(o.response.count, 92, file: file, line: line)
        XCTAssertEqual(MessageType.classify(o.initiation), .initiation, file: file, line: line)
        XCTAssertEqual(MessageType.classify(o.response), .response, file: file, line: line)
        XCTAssertEqual(o.received.remoteStatic, initiatorStatic.publicKey, file: file, line: line)
        XCTAssertEqual(o.received.timestamp, timestamp, file: file, line: line)
        XCTAssertEqual(o.received.senderIndex, 0x1111_2222, file: file, line: line)

        XCTAssertEqual(o.initiator.sendKey.bytes, o.responder.receiveKey.bytes, file: file, line: line)
        XCTAssertEqual(o.initiator.receiveKey.bytes, o.responder.sendKey.bytes, file: file, line: line)
        XCTAssertNotEqual(o.initiator.sendKey.bytes, o.initiator.receiveKey.bytes, file: file, line: line)
        XCTAssertTrue(o.initiator.isInitiator, file: file, line: line)
        XCTAssertFalse(o.responder.isInitiator, file: file, line: line)
        XCTAssertEqual(o.initiator.localIndex, 0x1111_2222, file: file, line: line)
        XCTAssertEqual(o.initiator.remoteIndex, 0x3333_4444, file: file, line: line)
        XCTAssertEqual(o.responder.localIndex, 0x3333_4444, file: file, line: line)
        XCTAssertEqual(o.responder.remoteIndex, 0x1111_2222, file: file, line: line)

        // Transport both ways.
        try XCTAssertEqual(roundTrip(Array("ping".utf8), from: o.initiator, to: o.responder), Array("ping".utf8),
                           file: file, line: line)
        try XCTAssertEqual(roundTrip(Array("pong!".utf8), from: o.responder, to: o.initiator), Array("pong!".utf8),
                           file: file, line: line)
    }

    /// Encodes with `sender`, decodes with `receiver`, returns the plaintext trimmed to the packet's length.
    func roundTrip(_ packet: [UInt8], from sender: Keypair, to receiver: Keypair) throws -> [UInt8] {
        var buffer = [UInt8](repeating: 0, count: 1420 + Transport.overhead)
        let length = try XCTUnwrap(packet.withUnsafeBytes { p in
            buffer.withUnsafeMutableBytes { Transport.encodeTransport(keypair: sender, counter: 0, packet: p, into: $0) }
        })
        var datagram = Array(buffer[..<length])
        XCTAssertEqual(datagram.withUnsafeBytes { MessageType.receiverIndex(in: $0) }, receiver.localIndex)
        let decoded = try XCTUnwrap(datagram.withUnsafeMutableBytes { Transport.decodeTransport(keypair: receiver, datagram: $0) })
        XCTAssertEqual(decoded.counter, 0)
        return Array(datagram[decoded.plaintext].prefix(packet.count))
    }

    func testIndicesAndMAC1AreWhereTheWhitepaperPutsThem() throws {
        let o = try handshake(initiatorPSK: nil, responderPSK: nil)
        XCTAssertEqual(Array(o.initiation[0..<8]), [1, 0, 0, 0, 0x22, 0x22, 0x11, 0x11]) // little-endian sender
        XCTAssertEqual(Array(o.response[0..<12]), [2, 0, 0, 0, 0x44, 0x44, 0x33, 0x33, 0x22, 0x22, 0x11, 0x11])
        XCTAssertEqual(Array(o.initiation[132..<148]), [UInt8](repeating: 0, count: 16), "no cookie: zero mac2")
        // mac1 = MAC(HASH("mac1----" ‖ S_pub_r), everything before mac1).
        let key = WireGuardCrypto.hash(Array("mac1----".utf8), responderStatic.publicKey.bytes)
        XCTAssertEqual(WireGuardCrypto.mac(key: key, Array(o.initiation[..<116])), Array(o.initiation[116..<132]))
        let responseKey = WireGuardCrypto.hash(Array("mac1----".utf8), initiatorStatic.publicKey.bytes)
        XCTAssertEqual(WireGuardCrypto.mac(key: responseKey, Array(o.response[..<60])), Array(o.response[60..<76]))
        XCTAssertEqual(o.received.mac1, Array(o.initiation[116..<132]))
        XCTAssertEqual(o.initiation.withUnsafeBytes { MessageType.mac1(of: $0) }, o.received.mac1)
        XCTAssertEqual(o.initiation.withUnsafeBytes { MessageType.senderIndex(in: $0) }, 0x1111_2222)
        XCTAssertEqual(o.response.withUnsafeBytes { MessageType.receiverIndex(in: $0) }, 0x1111_2222)
    }

    func testEveryFlippedBitOfTheInitiationIsRefused() throws {
        let (initiation, _) = try Handshake.createInitiation(
            localStatic: initiatorStatic, remoteStatic: responderStatic.publicKey, presharedKey: nil,
            senderIndex: 1, timestamp: timestamp, cookie: nil)
        XCTAssertNoThrow(try Handshake.consumeInitiation(initiation, localStatic: responderStatic))
        for byte in 0..<132 { // mac2 is the device's to check, not consumeInitiation's
            for bit in [0, 7] {
                var bad = initiation
                bad[byte] ^= 1 << bit
                XCTAssertThrowsError(try Handshake.consumeInitiation(bad, localStatic: responderStatic),
                                     "byte \(byte) bit \(bit)")
            }
        }
        // Altered fields with a recomputed mac1 get past mac1 and fail in the AEAD named for them.
        let mac1Key = Handshake.mac1Key(for: responderStatic.publicKey)
        for (offset, field) in [(45, "static"), (100, "timestamp")] {
            var bad = initiation
            bad[offset] ^= 0x80
            bad.replaceSubrange(116..<132, with: WireGuardCrypto.mac(key: mac1Key, Array(bad[..<116])))
            XCTAssertThrowsError(try Handshake.consumeInitiation(bad, localStatic: responderStatic)) { error in
                XCTAssertEqual(error as? WireGuardProtocolError, .authenticationFailed(field: field))
            }
        }
    }

    func testEveryFlippedBitOfTheResponseIsRefused() throws {
        let (initiation, state) = try Handshake.createInitiation(
            localStatic: initiatorStatic, remoteStatic: responderStatic.publicKey, presharedKey: nil,
            senderIndex: 1, timestamp: timestamp, cookie: nil)
        let received = try Handshake.consumeInitiation(initiation, localStatic: responderStatic)
        let (response, _) = try Handshake.createResponse(to: received, presharedKey: nil, senderIndex: 2, cookie: nil)
        XCTAssertNoThrow(try Handshake.consumeResponse(response, state: state, localStatic: initiatorStatic,
                                                       presharedKey: nil))
        for byte in 0..<76 {
            var bad = response
            bad[byte] ^= 0x10
            XCTAssertThrowsError(try Handshake.consumeResponse(bad, state: state, localStatic: initiatorStatic,
                                                               presharedKey: nil), "byte \(byte)")
        }
        var wrongReceiver = response
        wrongReceiver[8] ^= 1
        XCTAssertThrowsError(try Handshake.consumeResponse(wrongReceiver, state: state, localStatic: initiatorStatic,
                                                           presharedKey: nil)) { error in
            XCTAssertEqual(error as? WireGuardProtocolError, .receiverIndexMismatch(expected: 1, received: 0))
        }
    }

    func testWrongStaticKeysAreRefused() throws {
        // Sent to someone else: mac1 is keyed to the other responder, so it fails before any DH.
        let stranger = PrivateKey.generate()
        let (initiation, state) = try Handshake.createInitiation(
            localStatic: initiatorStatic, remoteStatic: stranger.publicKey, presharedKey: nil,
            senderIndex: 1, timestamp: timestamp, cookie: nil)
        XCTAssertThrowsError(try Handshake.consumeInitiation(initiation, localStatic: responderStatic)) { error in
            XCTAssertEqual(error as? WireGuardProtocolError, .invalidMAC1(.initiation))
        }
        // The initiator consumes the response with a different static key than it initiated with.
        let received = try Handshake.consumeInitiation(initiation, localStatic: stranger)
        let (response, _) = try Handshake.createResponse(to: received, presharedKey: nil, senderIndex: 2, cookie: nil)
        XCTAssertThrowsError(try Handshake.consumeResponse(response, state: state, localStatic: PrivateKey.generate(),
                                                           presharedKey: nil))
        XCTAssertNoThrow(try Handshake.consumeResponse(response, state: state, localStatic: initiatorStatic,
                                                       presharedKey: nil))
    }

    func testMismatchedPSKIsRefused() throws {
        let psk = WireGuardCrypto.generatePrivateKey()
        XCTAssertThrowsError(try handshake(initiatorPSK: psk, responderPSK: WireGuardCrypto.generatePrivateKey())) { error in
            XCTAssertEqual(error as? WireGuardProtocolError, .authenticationFailed(field: "empty"))
        }
        XCTAssertThrowsError(try handshake(initiatorPSK: psk, responderPSK: nil))
        XCTAssertThrowsError(try handshake(initiatorPSK: nil, responderPSK: psk))
        // A pre-shared key of the wrong length cannot reach the handshake: no SecretKey holds one.
        XCTAssertNil(SecretKey(bytes: [1, 2, 3]))
    }

    func testMAC1IsCheckedBeforeAnyDH() throws {
        let (initiation, _) = try Handshake.createInitiation(
            localStatic: initiatorStatic, remoteStatic: responderStatic.publicKey, presharedKey: nil,
            senderIndex: 1, timestamp: timestamp, cookie: nil)
        initiation.withUnsafeBytes { XCTAssertTrue(Handshake.verifyMAC1($0, localPublic: responderStatic.publicKey)) }
        initiation.withUnsafeBytes { XCTAssertFalse(Handshake.verifyMAC1($0, localPublic: initiatorStatic.publicKey)) }
        // A low-order ephemeral would make the first DH fail with weakPublicKey; with a bad mac1
        // the error is invalidMAC1, so mac1 was checked first.
        var bad = initiation
        bad.replaceSubrange(8..<40, with: [UInt8](repeating: 0, count: 32))
        XCTAssertThrowsError(try Handshake.consumeInitiation(bad, localStatic: responderStatic)) { error in
            XCTAssertEqual(error as? WireGuardProtocolError, .invalidMAC1(.initiation))
        }
        let key = Handshake.mac1Key(for: responderStatic.publicKey)
        bad.replaceSubrange(116..<132, with: WireGuardCrypto.mac(key: key, Array(bad[..<116])))
        XCTAssertThrowsError(try Handshake.consumeInitiation(bad, localStatic: responderStatic)) { error in
            XCTAssertEqual(error as? WireGuardProtocolError, .weakPublicKey)
        }
    }

    func testReplayedInitiationCarriesTheSameTimestamp() throws {
        // The protocol core authenticates a replayed initiation again; refusing it is the
        // caller's timestamp comparison, which this documents.
        let o = try handshake(initiatorPSK: nil, responderPSK: nil)
        let again = try Handshake.consumeInitiation(o.initiation, localStatic: responderStatic)
        XCTAssertFalse(WireGuardCrypto.tai64n(again.timestamp, isAfter: o.received.timestamp))
    }

    func testRefusesBadArgumentsWithoutTrapping() {
        XCTAssertThrowsError(try Handshake.createInitiation(
            localStatic: initiatorStatic, remoteStatic: responderStatic.publicKey, presharedKey: nil,
            senderIndex: 1, timestamp: [1, 2, 3], cookie: nil))
        XCTAssertThrowsError(try Handshake.createInitiation(
            localStatic: initiatorStatic, remoteStatic: responderStatic.publicKey, presharedKey: nil,
            senderIndex: 1, timestamp: timestamp, cookie: [1]))
        XCTAssertThrowsError(try Handshake.createInitiation(
            localStatic: initiatorStatic, remoteStatic: WireGuardKey([UInt8](repeating: 0, count: 32))!,
            presharedKey: nil, senderIndex: 1, timestamp: timestamp, cookie: nil)) { error in
            XCTAssertEqual(error as? WireGuardProtocolError, .weakPublicKey)
        }
        XCTAssertThrowsError(try Handshake.consumeInitiation([1, 0, 0, 0], localStatic: responderStatic)) { error in
            XCTAssertEqual(error as? WireGuardProtocolError, .malformedMessage(expected: .initiation, length: 4))
        }
    }

    func testStatesAndErrorsDoNotPrintSecrets() throws {
        let o = try handshake(initiatorPSK: nil, responderPSK: nil)
        var dumped = ""
        dump(o.initiator, to: &dumped)
        dump(o.received, to: &dumped)
        dumped += "\(o.initiator) \(o.received) \(o.initiator.sendKey)"
        for secret in [o.initiator.sendKey.bytes, o.initiator.receiveKey.bytes] {
            XCTAssertFalse(dumped.contains(hexString(secret)))
            XCTAssertFalse(dumped.contains(secret.map(String.init).joined(separator: ", ")))
        }
    }

    func testKeypairZeroing() throws {
        var keypair = try handshake(initiatorPSK: nil, responderPSK: nil).initiator
        XCTAssertFalse(keypair.isZeroed)
        let wiped = keypair.zeroed()
        XCTAssertTrue(wiped.isZeroed)
        XCTAssertFalse(keypair.isZeroed)
        keypair.zero()
        XCTAssertTrue(keypair.isZeroed)
        XCTAssertEqual(keypair.sendKey.bytes, [UInt8](repeating: 0, count: 32))
    }
}
