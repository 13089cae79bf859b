import CTransportAEAD
import WireGuard
import XCTest

final class TransportTests: XCTestCase {
    var initiator: Keypair!
    var responder: Keypair!

    override func setUpWithError() throws {
        let a = PrivateKey.generate(), b = PrivateKey.generate()
        let (initiation, state) = try Handshake.createInitiation(
            localStatic: a, remoteStatic: b.publicKey, presharedKey: nil, senderIndex: 5,
            timestamp: WireGuardCrypto.tai64n(unixSeconds: 1, nanoseconds: 0), cookie: nil)
        let received = try Handshake.consumeInitiation(initiation, localStatic: b)
        let (response, keys) = try Handshake.createResponse(to: received, presharedKey: nil, senderIndex: 6, cookie: nil)
        responder = keys
        initiator = try Handshake.consumeResponse(response, state: state, localStatic: a, presharedKey: nil)
    }

    func encode(_ packet: [UInt8], counter: UInt64 = 0, capacity: Int = 1420 + 32, keypair: Keypair? = nil) -> [UInt8]? {
        var buffer = [UInt8](repeating: 0xCC, count: capacity)
        let length = packet.withUnsafeBytes { p in
            buffer.withUnsafeMutableBytes { Transport.encodeTransport(keypair: keypair ?? initiator, counter: counter, packet: p, into: $0) }
        }
        return length.map { Array(buffer[..<$0]) }
    }

    func decode(_ datagram: [UInt8], keypair: Keypair? = nil) -> (counter: UInt64, plaintext: [UInt8])? {
        var copy = datagram
        guard let result = copy.withUnsafeMutableBytes({ Transport.decodeTransport(keypair: keypair ?? responder, datagram: $0) })
        else { return nil }
        return (result.counter, Array(copy[result.plaintext]))
    }

    func testPaddingToMultiplesOf16() throws {
        for length in [0, 1, 15, 16, 17, 20, 100, 1_399, 1_400, 1_404, 1_405, 1_419, 1_420] {
            let packet = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ 1) }
            let datagram = try XCTUnwrap(encode(packet, counter: UInt64(length)), "\(length)")
            let padded = min((length + 15) / 16 * 16, 1_420)
            XCTAssertEqual(datagram.count, 16 + padded + 16, "\(length)")
            XCTAssertEqual(Array(datagram[0..<4]), [4, 0, 0, 0])
            XCTAssertEqual(Array(datagram[4..<8]), [6, 0, 0, 0]) // the responder's index
            XCTAssertEqual(Array(datagram[8..<16]), withUnsafeBytes(of: UInt64(length).littleEndian) { Array($0) })
            let (counter, plaintext) = try XCTUnwrap(decode(datagram), "\(length)")
            XCTAssertEqual(counter, UInt64(length))
            XCTAssertEqual(plaintext.count, padded)
            XCTAssertEqual(Array(plaintext[..<length]), packet)
            XCTAssertEqual(Array(plaintext[length...]), [UInt8](repeating: 0, count: padded - length), "zero padding")
        }
    }

    func testKeepaliveIsAnEmptyPlaintext() throws {
        let keepalive = try XCTUnwrap(encode([], counter: 9))
        XCTAssertEqual(keepalive.count, 32)
        XCTAssertEqual(MessageType.classify(keepalive), .transport)
        let (counter, plaintext) = try XCTUnwrap(decode(keepalive))
        XCTAssertEqual(counter, 9)
        XCTAssertEqual(plaintext, [])
    }

    func testPaddingStopsAtTheCapacity() throws {
        // Capacity for 20 bytes of plaintext: a 17-byte packet pads to 20, not 32.
        XCTAssertEqual(Transport.paddedLength(packetLength: 17, capacity: 52), 20)
        XCTAssertEqual(try XCTUnwrap(encode(Array(repeating: 1, count: 17), capacity: 52)).count, 52)
        XCTAssertNil(encode(Array(repeating: 1, count: 21), capacity: 52), "does not fit")
        XCTAssertNil(encode([], capacity: 31))
        XCTAssertNil(Transport.paddedLength(packetLength: 0, capacity: 0))
    }

    func testPacketAlreadyInPlace() throws {
        // The device reads the TUN straight into buffer + 16.
        let packet = (0..<45).map { UInt8($0) }
        var buffer = [UInt8](repeating: 0xCC, count: 200)
        buffer.replaceSubrange(16..<61, with: packet)
        let length = try XCTUnwrap(buffer.withUnsafeMutableBytes { raw in
            Transport.encodeTransport(keypair: initiator, counter: 3,
                                      packet: UnsafeRawBufferPointer(rebasing: raw[16..<61]), into: raw)
        })
        XCTAssertEqual(length, 16 + 48 + 16)
        XCTAssertEqual(Array(buffer[..<length]), try XCTUnwrap(encode(packet, counter: 3)))
        // Overlapping but not in place: moved first.
        buffer = [UInt8](repeating: 0xCC, count: 200)
        buffer.replaceSubrange(5..<50, with: packet)
        let moved = try XCTUnwrap(buffer.withUnsafeMutableBytes { raw in
            Transport.encodeTransport(keypair: initiator, counter: 3,
                                      packet: UnsafeRawBufferPointer(rebasing: raw[5..<50]), into: raw)
        })
        XCTAssertEqual(Array(buffer[..<moved]), try XCTUnwrap(encode(packet, counter: 3)))
    }

    func testRefusals() throws {
        let datagram = try XCTUnwrap(encode(Array("hello".utf8), counter: 1))
        XCTAssertNil(decode(datagram, keypair: initiator), "wrong keypair (receiver index)")
        for byte in 0..<datagram.count {
            var bad = datagram
            bad[byte] ^= 0x20
            XCTAssertNil(decode(bad), "byte \(byte)")
        }
        XCTAssertNil(decode(Array(datagram.dropLast())))
        XCTAssertNil(decode(Array(datagram[..<31])))
        XCTAssertNil(encode([1], counter: WireGuardProtocol.rejectAfterMessages))
        // A well-formed message claiming a counter at the limit is refused before decrypting.
        var atLimit = datagram
        atLimit.withUnsafeMutableBytes { $0.storeBytes(of: WireGuardProtocol.rejectAfterMessages.littleEndian, toByteOffset: 8, as: UInt64.self) }
        XCTAssertNil(decode(atLimit))
        XCTAssertEqual(datagram.withUnsafeBytes { Transport.counter(of: $0) }, 1)
        // The responder's keys are the reverse direction.
        let back = try XCTUnwrap(encode(Array("back".utf8), counter: 0, keypair: responder))
        XCTAssertEqual(decode(back, keypair: initiator)?.plaintext.prefix(4), ArraySlice("back".utf8))
        // Zeroed keys no longer decrypt.
        XCTAssertNil(decode(datagram, keypair: responder.zeroed()))
    }

    /// The transport AEAD (libcrypto's primitives) is libsodium's ChaCha20-Poly1305 byte for byte: what one seals the
    /// other opens, at every padded length and at counters that use all eight nonce bytes; a flipped bit
    /// anywhere fails.
    func testTransportAEADMatchesLibsodium() throws {
        let key = initiator.sendKey.bytes
        for (i, length) in [0, 16, 32, 48, 64, 1_408, 1_424].enumerated() {
            let counter: UInt64 = i == 0 ? 0 : 0x0102_0304_0506_0708 &* UInt64(i)
            let packet = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 13 &+ i) }
            let datagram = try XCTUnwrap(encode(packet, counter: counter, capacity: 1_424 + 32), "\(length)")
            XCTAssertEqual(Array(datagram[16...]), WireGuardCrypto.seal(key: key, counter: counter, plaintext: packet),
                           "sealed as libsodium seals, \(length) bytes")
            var header = Array(datagram[0..<16])
            header.withUnsafeMutableBytes { $0.storeBytes(of: counter.littleEndian, toByteOffset: 8, as: UInt64.self) }
            let bySodium = header + WireGuardCrypto.seal(key: key, counter: counter, plaintext: packet)
            XCTAssertEqual(decode(bySodium)?.plaintext, packet, "opens what libsodium sealed, \(length) bytes")
            for bit in [16 * 8, (datagram.count - 1) * 8 + 7] where datagram.count > 32 || bit > 16 * 8 {
                var flipped = datagram
                flipped[bit / 8] ^= 1 << (bit % 8)
                XCTAssertNil(decode(flipped), "a flipped bit \(bit) fails, \(length) bytes")
            }
        }
    }
    /// A context seals as libsodium seals and opens what it sealed, at lengths around the cipher's 64-byte
    /// blocks and Poly1305's 16, with counters that use every nonce byte; a flipped bit of ciphertext or
    /// tag, the wrong counter, and a context of the other direction all fail, and a message that fails is
    /// left as it came (the tag is checked before anything is decrypted).
    func testTransportAEADMatchesLibsodiumAtEveryBoundary() throws {
        let key = (0..<32).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ 3) }
        let paths: [(String, (UnsafePointer<UInt8>, Int32) -> OpaquePointer?)] = [("context", { tg_transport_aead_new($0, $1) })]
        for (name, make) in paths {
            let sealing = try XCTUnwrap(key.withUnsafeBufferPointer { make($0.baseAddress!, 1) }, name)
            let opening = try XCTUnwrap(key.withUnsafeBufferPointer { make($0.baseAddress!, 0) }, name)
            defer {
                tg_transport_aead_free(sealing)
                tg_transport_aead_free(opening)
            }
            for (i, length) in [0, 1, 15, 16, 17, 63, 64, 65, 1_420, 1_424, 9_000].enumerated() {
                let counter: UInt64 = i == 0 ? 0 : 0xF1E2_D3C4_B5A6_9788 &+ UInt64(i)
                let plaintext = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ i) }
                var buffer = plaintext + [UInt8](repeating: 0, count: 16)
                let sealed = buffer.withUnsafeMutableBufferPointer { tg_transport_aead_seal(sealing, counter, $0.baseAddress!, length) }
                XCTAssertEqual(sealed, length + 16, "\(name): sealed \(length) bytes")
                XCTAssertEqual(buffer, WireGuardCrypto.seal(key: key, counter: counter, plaintext: plaintext),
                               "\(name): sealed as libsodium seals, \(length) bytes")
                func open(_ bytes: [UInt8], counter: UInt64, with context: OpaquePointer) -> [UInt8]? {
                    var copy = bytes
                    let n = copy.withUnsafeMutableBufferPointer { tg_transport_aead_open(context, counter, $0.baseAddress!, bytes.count) }
                    return n < 0 ? nil : Array(copy[..<n])
                }
                XCTAssertEqual(open(buffer, counter: counter, with: opening), plaintext, "\(name): opens it, \(length) bytes")
                XCTAssertNil(open(buffer, counter: counter &+ 1, with: opening), "\(name): another counter fails, \(length) bytes")
                XCTAssertNil(open(buffer, counter: counter, with: sealing), "\(name): a sealing context opens nothing")
                for bit in Set([0, buffer.count * 4 + 3, buffer.count * 8 - 1]) {
                    var flipped = buffer
                    flipped[bit / 8] ^= 1 << (bit % 8)
                    XCTAssertNil(open(flipped, counter: counter, with: opening), "\(name): bit \(bit) flipped fails, \(length) bytes")
                    var untouched = flipped
                    _ = untouched.withUnsafeMutableBufferPointer { tg_transport_aead_open(opening, counter, $0.baseAddress!, flipped.count) }
                    XCTAssertEqual(untouched, flipped, "\(name): a message that fails is not decrypted, \(length) bytes")
                }
            }
            var short = [UInt8](repeating: 0, count: 15)
            XCTAssertEqual(short.withUnsafeMutableBufferPointer { tg_transport_aead_open(opening, 0, $0.baseAddress!, 15) }, -1,
                           "\(name): shorter than a tag")
            XCTAssertEqual(short.withUnsafeMutableBufferPointer { tg_transport_aead_seal(opening, 0, $0.baseAddress!, 0) }, 0,
                           "\(name): an opening context seals nothing")
        }
    }
}
