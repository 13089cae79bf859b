import WireGuard
import XCTest

final class CookieTests: XCTestCase {
    let initiatorStatic = PrivateKey.generate()
    let responderStatic = PrivateKey.generate()
    let endpoint = CookieGenerator.endpointBytes(address: [192, 0, 2, 1], port: 51_820)
    let timestamp = WireGuardCrypto.tai64n(unixSeconds: 1_700_000_000, nanoseconds: 0)

    func initiation(cookie: [UInt8]?) throws -> (message: [UInt8], state: InitiatorState) {
        try Handshake.createInitiation(localStatic: initiatorStatic, remoteStatic: responderStatic.publicKey,
                                       presharedKey: nil, senderIndex: 0xABCD_0001, timestamp: timestamp, cookie: cookie)
    }

    /// The whole exchange under load: no mac2 → cookie reply → initiator retries with mac2 → accepted.
    func testCookieReplyRoundTripAndMAC2() throws {
        var generator = CookieGenerator(localPublic: responderStatic.publicKey, now: 1_000)
        let (first, state) = try initiation(cookie: nil)
        first.withUnsafeBytes { XCTAssertTrue(generator.verifyMAC1($0)) }
        first.withUnsafeBytes { XCTAssertFalse(generator.verifyMAC2($0, endpoint: endpoint, now: 1_001)) }

        let reply = try XCTUnwrap(generator.createReply(to: first, endpoint: endpoint, now: 1_001))
        XCTAssertEqual(reply.count, 64)
        XCTAssertEqual(MessageType.classify(reply), .cookieReply)
        XCTAssertEqual(reply.withUnsafeBytes { MessageType.receiverIndex(in: $0) }, state.senderIndex)

        let cookie = try Handshake.consumeCookieReply(reply, remotePublic: responderStatic.publicKey, lastMAC1: state.mac1)
        XCTAssertEqual(cookie.count, 16)
        XCTAssertEqual(cookie, generator.cookie(for: endpoint, now: 1_002))

        let (second, _) = try initiation(cookie: cookie)
        second.withUnsafeBytes { XCTAssertTrue(generator.verifyMAC2($0, endpoint: endpoint, now: 1_003)) }
        second.withUnsafeBytes { XCTAssertTrue(Handshake.verifyMAC2($0, cookie: cookie)) }
        // From another address, or with a flipped byte, mac2 does not verify.
        let elsewhere = CookieGenerator.endpointBytes(address: [192, 0, 2, 1], port: 51_821)
        second.withUnsafeBytes { XCTAssertFalse(generator.verifyMAC2($0, endpoint: elsewhere, now: 1_003)) }
        var altered = second
        altered[20] ^= 1
        altered.withUnsafeBytes { XCTAssertFalse(generator.verifyMAC2($0, endpoint: endpoint, now: 1_003)) }
        // mac2 does not disturb the handshake.
        XCTAssertNoThrow(try Handshake.consumeInitiation(second, localStatic: responderStatic))
    }

    func testCookieReplyToAResponse() throws {
        // The initiator under load answers a response with a cookie reply; the responder consumes it
        // with the response's mac1.
        let (first, _) = try initiation(cookie: nil)
        let received = try Handshake.consumeInitiation(first, localStatic: responderStatic)
        let (response, _) = try Handshake.createResponse(to: received, presharedKey: nil, senderIndex: 77, cookie: nil)
        var generator = CookieGenerator(localPublic: initiatorStatic.publicKey, now: 0)
        let reply = try XCTUnwrap(generator.createReply(to: response, endpoint: endpoint, now: 0))
        XCTAssertEqual(reply.withUnsafeBytes { MessageType.receiverIndex(in: $0) }, 77)
        let mac1 = try XCTUnwrap(response.withUnsafeBytes { MessageType.mac1(of: $0) })
        XCTAssertEqual(try Handshake.consumeCookieReply(reply, remotePublic: initiatorStatic.publicKey, lastMAC1: mac1),
                       generator.cookie(for: endpoint, now: 0))
    }

    func testCookieReplyIsBoundToItsMessageAndSender() throws {
        var generator = CookieGenerator(localPublic: responderStatic.publicKey, now: 0)
        let (first, state) = try initiation(cookie: nil)
        let reply = try XCTUnwrap(generator.createReply(to: first, endpoint: endpoint, now: 0))
        // Another message's mac1, another responder's key, or any flipped byte: refused.
        var otherMAC1 = state.mac1
        otherMAC1[0] ^= 1
        XCTAssertThrowsError(try Handshake.consumeCookieReply(reply, remotePublic: responderStatic.publicKey,
                                                              lastMAC1: otherMAC1)) { error in
            XCTAssertEqual(error as? WireGuardProtocolError, .authenticationFailed(field: "cookie"))
        }
        XCTAssertThrowsError(try Handshake.consumeCookieReply(reply, remotePublic: initiatorStatic.publicKey,
                                                              lastMAC1: state.mac1))
        for byte in 0..<reply.count {
            var bad = reply
            bad[byte] ^= 0x04
            if byte >= 4 && byte < 8 { continue } // the receiver index is the device's to match
            XCTAssertThrowsError(try Handshake.consumeCookieReply(bad, remotePublic: responderStatic.publicKey,
                                                                  lastMAC1: state.mac1), "byte \(byte)")
        }
        XCTAssertThrowsError(try Handshake.consumeCookieReply(Array(reply.dropLast()), remotePublic: responderStatic.publicKey,
                                                              lastMAC1: state.mac1))
        XCTAssertNil(generator.createReply(to: Array(first.dropLast()), endpoint: endpoint, now: 0))
        // Nonces are random: two replies differ.
        XCTAssertNotEqual(generator.createReply(to: first, endpoint: endpoint, now: 0), reply)
    }

    func testSecretRotatesEveryCookieRefreshTime() throws {
        var generator = CookieGenerator(localPublic: responderStatic.publicKey, now: 500)
        let early = generator.cookie(for: endpoint, now: 500)
        XCTAssertEqual(generator.cookie(for: endpoint, now: 500 + WireGuardProtocol.cookieRefreshTime - 1), early)
        XCTAssertNotEqual(generator.cookie(for: endpoint, now: 500), generator.cookie(for: [1, 2, 3], now: 500))

        let (withEarly, _) = try initiation(cookie: early)
        withEarly.withUnsafeBytes { XCTAssertTrue(generator.verifyMAC2($0, endpoint: endpoint, now: 600)) }
        // Once the secret is cookieRefreshTime old, cookies made from it no longer verify...
        withEarly.withUnsafeBytes { XCTAssertFalse(generator.verifyMAC2($0, endpoint: endpoint, now: 620)) }
        // ...and the next cookie comes from a new secret.
        let late = generator.cookie(for: endpoint, now: 620)
        XCTAssertNotEqual(late, early)
        withEarly.withUnsafeBytes { XCTAssertFalse(generator.verifyMAC2($0, endpoint: endpoint, now: 621)) }
        let (withLate, _) = try initiation(cookie: late)
        withLate.withUnsafeBytes { XCTAssertTrue(generator.verifyMAC2($0, endpoint: endpoint, now: 621)) }
        XCTAssertFalse("\(generator)".contains(hexString(late)))
    }
}
