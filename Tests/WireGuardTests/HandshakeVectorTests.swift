import WireGuard
import XCTest
import TunnelgateSettings

/// The handshake's exact bytes with fixed keys, compared with an independent transcription of
/// whitepaper 5.4 in Python (Scripts/wireguard-handshake-vectors.py, over hashlib, hmac and the
/// `cryptography` package), whose output is pasted here. A wrong MixHash/MixKey order, a wrong
/// offset or a wrong nonce changes every byte after it.
final class HandshakeVectorTests: XCTestCase {
    static func fixedKey(_ byte: UInt8) -> PrivateKey { PrivateKey(bytes: [UInt8](repeating: byte, count: 32))! }

    let initiatorStatic = fixedKey(0x11)
    let responderStatic = fixedKey(0x22)
    let initiatorEphemeral = fixedKey(0x33)
    let responderEphemeral = fixedKey(0x44)
    let psk = SecretKey(bytes: [UInt8](repeating: 0x55, count: 32))!
    let timestamp = hex("400000006553f10a00000000")

    let initiation = "01000000040302017b0d47d93427f8311160781c7c733fd89f88970aef490d8aa0ee19a4cb8a1b1481e498317da959fba46669572516a5e6c021bfa620bb6c56ca0082e1feae14988c2c64d024c617734a263f76a008df04d0f94bad8ee75ec8e1c26955d72d5dc0a3c87d5e6db7cf66723bf09dcbc0595bbe37451384922dda1f53280200000000000000000000000000000000"
    let response = "020000000d0c0b0a04030201ff2ee45601ec1b67310c7790404585ae697331eee1c1f8cf2419731c1fff3e6b198e29bc3985289f6641bb77a0f6d7d5a1eede03d7f1d7798b2df1619907827400000000000000000000000000000000"
    let initiatorSend = "a007faf842d83f5bd3be20a14e0ffcec34c84867b78b051980602713205922de"
    let initiatorReceive = "d982d5cd10d34a7802b6c19fa441cd9164d70e4f4d62007ab416879ee8bd1b99"
    let transport = "040000000d0c0b0a00000000000000007c3924f91f2defcdbd5d064c77112b4db2884e18ace56d18ace4022b79da7bc0"
    let initiationMAC2 = "c8212977034f0a316e80716543facc0d"

    func testHandshakeBytesMatchTheReference() throws {
        let (message, state) = try Handshake.createInitiation(
            localStatic: initiatorStatic, remoteStatic: responderStatic.publicKey, presharedKey: psk,
            senderIndex: 0x0102_0304, timestamp: timestamp, cookie: nil, ephemeral: initiatorEphemeral)
        XCTAssertEqual(hexString(message), initiation)

        let received = try Handshake.consumeInitiation(message, localStatic: responderStatic)
        let (reply, responderKeys) = try Handshake.createResponse(to: received, presharedKey: psk, senderIndex: 0x0A0B_0C0D,
                                                                  cookie: nil, ephemeral: responderEphemeral)
        XCTAssertEqual(hexString(reply), response)
        XCTAssertEqual(hexString(responderKeys.receiveKey.bytes), initiatorSend)
        XCTAssertEqual(hexString(responderKeys.sendKey.bytes), initiatorReceive)

        let initiatorKeys = try Handshake.consumeResponse(reply, state: state, localStatic: initiatorStatic, presharedKey: psk)
        XCTAssertEqual(hexString(initiatorKeys.sendKey.bytes), initiatorSend)
        XCTAssertEqual(hexString(initiatorKeys.receiveKey.bytes), initiatorReceive)

        var buffer = [UInt8](repeating: 0xEE, count: 100)
        let length = Array("ping".utf8).withUnsafeBytes { p in
            buffer.withUnsafeMutableBytes { Transport.encodeTransport(keypair: initiatorKeys, counter: 0, packet: p, into: $0) }
        }
        XCTAssertEqual(length, 48)
        XCTAssertEqual(hexString(Array(buffer[..<48])), transport)
    }

    func testMAC2MatchesTheReference() throws {
        let (message, _) = try Handshake.createInitiation(
            localStatic: initiatorStatic, remoteStatic: responderStatic.publicKey, presharedKey: psk,
            senderIndex: 0x0102_0304, timestamp: timestamp, cookie: [UInt8](repeating: 0x66, count: 16),
            ephemeral: initiatorEphemeral)
        XCTAssertEqual(hexString(Array(message[..<132])), String(initiation.prefix(264)))
        XCTAssertEqual(hexString(Array(message[132...])), initiationMAC2)
        message.withUnsafeBytes { XCTAssertTrue(Handshake.verifyMAC2($0, cookie: [UInt8](repeating: 0x66, count: 16))) }
        message.withUnsafeBytes { XCTAssertFalse(Handshake.verifyMAC2($0, cookie: [UInt8](repeating: 0x67, count: 16))) }
    }
}
