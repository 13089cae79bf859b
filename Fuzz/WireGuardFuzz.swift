// The libFuzzer target for the WireGuard parsers that read bytes from the network or the UAPI socket.
// Scripts/fuzz-wireguard.sh compiles it in one module with Sources/WireGuard/Protocol/*.swift and the
// pure Device files (UAPI, AllowedIPs, Endpoint) over a TunnelgateSettings module and LinuxSystem's
// IPSocketAddress (Endpoint's sockaddr_in/in6 form), with
// -sanitize=fuzzer,address; it is not part of the SwiftPM package.
//
// An input's first byte picks a target (modulo the number of targets), the rest is that target's data.
// Every target checks invariants against a model or a round trip, not only that nothing traps; a
// broken invariant prints what broke and aborts, so libFuzzer saves the input as a reproducer.
//
//   0 raw datagram   classify, sender/receiver index, mac1, counter, verifyMAC1/2, consumeInitiation,
//                    consumeResponse (fixed initiator state), consumeCookieReply, CookieGenerator
//                    verifyMAC2/createReply, decodeTransport (fixed keypair) on the bytes as given
//   1 initiation     the bytes overlaid on a valid initiation with mac1 (and mac2) recomputed, so
//                    consumeInitiation reaches its X25519s and AEADs
//   2 response       the same for consumeResponse
//   3 transport      encode then decode a packet; any one-bit change must not decode
//   4 cookie         createReply -> consumeCookieReply -> mac2 verifies for that source only
//   5 replay window  ReplayWindow against a set-based model
//   6 UAPI text      UAPI.parse; a parsed set re-formats and re-parses equal; errors carry no key bytes
//   7 endpoint       Endpoint from text and from sockaddr_in/sockaddr_in6 bytes, and back
//   8 AllowedIPs     a table built from the bytes against a longest-prefix model, lookups from packets

import Glibc
import TunnelgateSettings

// MARK: - Entry points

@_cdecl("LLVMFuzzerInitialize")
public func fuzzInitialize(_ argc: UnsafeMutablePointer<CInt>,
                           _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>) -> CInt {
    // Build the fixed handshake once, before the first input is timed.
    _ = FuzzWorld.initiatorKeypair
    if let dir = getenv("WG_FUZZ_SEED_DIR") {
        FuzzSeeds.write(to: String(cString: dir))
    }
    return 0
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ start: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    guard let start, count >= 1 else { return 0 }
    let data = Array(UnsafeBufferPointer(start: start, count: count))
    let payload = Array(data[1...])
    switch data[0] % 9 {
    case 0: FuzzTargets.rawDatagram(payload)
    case 1: FuzzTargets.initiationWithValidMAC(payload)
    case 2: FuzzTargets.responseWithValidMAC(payload)
    case 3: FuzzTargets.transportRoundTrip(payload)
    case 4: FuzzTargets.cookieRoundTrip(payload)
    case 5: FuzzTargets.replayWindow(payload)
    case 6: FuzzTargets.uapi(payload)
    case 7: FuzzTargets.endpoint(payload)
    default: FuzzTargets.allowedIPs(payload)
    }
    return 0
}

/// Reports a broken invariant and aborts: libFuzzer's SIGABRT handler writes the reproducer.
func check(_ condition: Bool, _ message: @autoclosure () -> String, file: StaticString = #fileID, line: UInt = #line) {
    guard !condition else { return }
    printError("INVARIANT BROKEN (\(file):\(line)): \(message())")
    abort()
}

// MARK: - The fixed world: two static keys, one handshake, its keypairs and messages

enum FuzzWorld {
    static func key(_ seed: UInt8) -> PrivateKey {
        PrivateKey(bytes: (0..<32).map { UInt8(truncatingIfNeeded: Int(seed) &* 31 &+ $0 &* 7) })!
    }

    static let responderStatic = key(0x11)
    static let initiatorStatic = key(0x22)
    static let presharedKeyBytes = (0..<32).map { UInt8(truncatingIfNeeded: 0x55 &+ $0) }
    static let presharedKey = SecretKey.sodium(presharedKeyBytes)!
    static let timestamp = WireGuardCrypto.tai64n(unixSeconds: 1_700_000_000, nanoseconds: 0)
    static let initiatorIndex: UInt32 = 0x0A0A_0A0A
    static let responderIndex: UInt32 = 0x0B0B_0B0B

    static let initiation = try! Handshake.createInitiation(
        localStatic: initiatorStatic, remoteStatic: responderStatic.publicKey, presharedKey: presharedKey,
        senderIndex: initiatorIndex, timestamp: timestamp, cookie: nil, ephemeral: key(0x33))
    static let received = try! Handshake.consumeInitiation(initiation.message, localStatic: responderStatic)
    static let response = try! Handshake.createResponse(
        to: received, presharedKey: presharedKey, senderIndex: responderIndex, cookie: nil, ephemeral: key(0x44))
    /// Sends to the responder: its send key is the responder's receive key.
    static let initiatorKeypair = try! Handshake.consumeResponse(
        response.message, state: initiation.state, localStatic: initiatorStatic, presharedKey: presharedKey)
    /// The fixed keypair transport datagrams are decoded with (local index `responderIndex`).
    static var responderKeypair: Keypair { response.keypair }

    /// The responder's cookie generator, its secret made at time 0 (valid until 120).
    static let cookies = CookieGenerator(localPublic: responderStatic.publicKey, now: 0)
    static let source = CookieGenerator.endpointBytes(address: [192, 0, 2, 7], port: 51820)
    /// A cookie reply to `initiation`, built here from whitepaper 5.4.7 with a fixed nonce and
    /// cookie (the generator's secret and nonces are random per process, and a reproducer must
    /// behave the same in every process): type 3, receiver, nonce, XAEAD(HASH(LABEL_COOKIE ‖
    /// S_pub_responder), nonce, cookie, mac1 of the initiation).
    static let replyCookie = (0..<16).map { UInt8(0xC0 | $0) }
    static let cookieReply: [UInt8] = {
        let nonce = (0..<24).map { UInt8(0x60 &+ $0) }
        var reply: [UInt8] = [3, 0, 0, 0] + le32Bytes(initiatorIndex) + nonce
        reply += WireGuardCrypto.xseal(key: Handshake.cookieKey(for: responderStatic.publicKey), nonce: nonce,
                                       plaintext: replyCookie, additionalData: initiation.state.mac1)
        return reply
    }()
    static let cookie: [UInt8] = {
        var generator = cookies
        return generator.cookie(for: source, now: 1)
    }()

    /// How many leading bytes of a valid initiation/response MAC1 covers.
    static let initiationMAC1Offset = MessageType.initiationLength - 32
    static let responseMAC1Offset = MessageType.responseLength - 32
}

// MARK: - Targets

enum FuzzTargets {
    // MARK: 0: the header parsers and every consumer, on the bytes as they came

    static func rawDatagram(_ d: [UInt8]) {
        d.withUnsafeBytes { raw in
            let type = MessageType.classify(raw)
            check(type == classifyModel(d), "classify disagrees with the model for \(d.count) bytes: \(String(describing: type))")

            let sender = MessageType.senderIndex(in: raw)
            let receiver = MessageType.receiverIndex(in: raw)
            let mac1 = MessageType.mac1(of: raw)
            let counter = Transport.counter(of: raw)
            switch type {
            case .initiation, .response:
                check(sender == le32(d, 4), "senderIndex")
                check(receiver == (type == .response ? le32(d, 8) : nil), "receiverIndex of a handshake message")
                check(mac1 == Array(d[(d.count - 32)..<(d.count - 16)]), "mac1 is not the 16 bytes before mac2")
                check(counter == nil, "a handshake message has no counter")
            case .cookieReply, .transport:
                check(sender == nil && mac1 == nil, "a cookie reply or transport message has no sender or mac1")
                check(receiver == le32(d, 4), "receiverIndex")
                check(counter == (type == .transport ? le64(d, 8) : nil), "counter")
            case nil:
                check(sender == nil && receiver == nil && mac1 == nil && counter == nil, "an unclassified datagram yielded a field")
            }

            let isHandshake = type == .initiation || type == .response
            for key in [FuzzWorld.responderStatic.publicKey, FuzzWorld.initiatorStatic.publicKey] {
                check(!Handshake.verifyMAC1(raw, localPublic: key) || isHandshake, "verifyMAC1 accepted a non-handshake message")
            }
            let mac2 = Handshake.verifyMAC2(raw, cookie: FuzzWorld.cookie)
            check(!mac2 || isHandshake, "verifyMAC2 accepted a non-handshake message")
            check(FuzzWorld.cookies.verifyMAC2(raw, endpoint: FuzzWorld.source, now: 1) == mac2,
                  "CookieGenerator.verifyMAC2 disagrees with Handshake.verifyMAC2 under the same cookie")
            check(!Handshake.verifyMAC2(raw, cookie: [1, 2, 3]), "verifyMAC2 accepted a cookie of the wrong length")

            // consumeInitiation: only the seed's authenticated bytes can pass (mac2 is not checked here).
            if let got = try? Handshake.consumeInitiation(raw, localStatic: FuzzWorld.responderStatic) {
                let signed = FuzzWorld.initiationMAC1Offset + 16
                check(Array(d.prefix(signed)) == Array(FuzzWorld.initiation.message.prefix(signed)),
                      "consumeInitiation accepted an initiation that differs from the only valid one in its MAC1-covered bytes")
                check(got.remoteStatic == FuzzWorld.initiatorStatic.publicKey && got.timestamp == FuzzWorld.timestamp,
                      "consumeInitiation returned the wrong static key or timestamp")
                check(got.senderIndex == sender && got.mac1 == mac1, "consumeInitiation's index or mac1 differs from the header's")
            }
            if let keys = try? Handshake.consumeResponse(raw, state: FuzzWorld.initiation.state,
                                                         localStatic: FuzzWorld.initiatorStatic,
                                                         presharedKey: FuzzWorld.presharedKey) {
                let signed = FuzzWorld.responseMAC1Offset + 16
                check(Array(d.prefix(signed)) == Array(FuzzWorld.response.message.prefix(signed)),
                      "consumeResponse accepted a response that differs from the only valid one")
                check(sameKeys(keys, FuzzWorld.initiatorKeypair), "consumeResponse derived other keys")
            }
            if let cookie = try? Handshake.consumeCookieReply(raw, remotePublic: FuzzWorld.responderStatic.publicKey,
                                                              lastMAC1: FuzzWorld.initiation.state.mac1) {
                // Anyone who knows the responder's public key can make a reply, so any well-formed one
                // may open; what opened must re-seal to the same bytes under the reply's nonce.
                check(type == .cookieReply && cookie.count == 16, "consumeCookieReply opened a malformed reply")
                let nonce = Array(d[8..<32])
                let sealed = WireGuardCrypto.xseal(key: Handshake.cookieKey(for: FuzzWorld.responderStatic.publicKey), nonce: nonce,
                                                   plaintext: cookie, additionalData: FuzzWorld.initiation.state.mac1)
                check(Array(d[32...]) == sealed, "the opened cookie does not re-seal to the reply")
                if Array(d[8...]) == Array(FuzzWorld.cookieReply[8...]) {
                    check(cookie == FuzzWorld.replyCookie, "consumeCookieReply decrypted another cookie from the seed reply")
                }
            }

            var generator = FuzzWorld.cookies
            let reply = generator.createReply(to: raw, endpoint: FuzzWorld.source, now: 1)
            check((reply != nil) == isHandshake, "createReply answered a non-handshake message or refused a handshake one")
            if let reply, let mac1 {
                check(MessageType.classify(reply) == .cookieReply, "createReply made a malformed reply")
                check(reply.withUnsafeBytes { MessageType.receiverIndex(in: $0) } == sender, "the reply is not addressed to the sender")
                let cookie = try? Handshake.consumeCookieReply(reply, remotePublic: FuzzWorld.responderStatic.publicKey, lastMAC1: mac1)
                check(cookie == FuzzWorld.cookie, "the reply does not decrypt to the cookie for the source")
            }
        }

        // decodeTransport on a copy (it decrypts in place).
        var copy = d
        let decoded = copy.withUnsafeMutableBytes { Transport.decodeTransport(keypair: FuzzWorld.responderKeypair, datagram: $0) }
        if case let (counter, range)? = decoded {
            check(MessageType.classify(d) == .transport && le32(d, 4) == FuzzWorld.responderIndex, "decoded a datagram not for this keypair")
            check(counter == le64(d, 8) && counter < WireGuardProtocol.rejectAfterMessages, "decoded counter")
            check(range.lowerBound == 16 && range.upperBound == d.count - 16, "plaintext range \(range) outside the datagram of \(d.count)")
            // Re-encoding the plaintext with the sender's keypair and the same counter gives the same bytes.
            let again = encode(Array(copy[range]), counter: counter, capacity: d.count)
            check(again == d, "a decoded datagram does not re-encode identically")
        }
    }

    /// classify as the whitepaper defines it: a known type, three zero bytes, the exact length.
    static func classifyModel(_ d: [UInt8]) -> MessageType? {
        guard d.count >= 4, d[1] == 0, d[2] == 0, d[3] == 0 else { return nil }
        switch d[0] {
        case 1 where d.count == 148: return .initiation
        case 2 where d.count == 92: return .response
        case 3 where d.count == 64: return .cookieReply
        case 4 where d.count >= 32: return .transport
        default: return nil
        }
    }

    // MARK: 1, 2: handshake messages whose MACs are right, so the expensive checks run

    static func initiationWithValidMAC(_ data: [UInt8]) {
        // The bytes replace sender index, ephemeral, static and timestamp (4..<116); the first data
        // byte says whether mac2 is written too.
        var message = FuzzWorld.initiation.message
        let body = 4..<FuzzWorld.initiationMAC1Offset
        let withCookie = data.first.map { $0 & 1 == 1 } ?? false
        for (i, b) in data.dropFirst().prefix(body.count).enumerated() { message[body.lowerBound + i] = b }
        Handshake.writeMACs(into: &message, receiverStatic: FuzzWorld.responderStatic.publicKey,
                            cookie: withCookie ? FuzzWorld.cookie : nil)
        message.withUnsafeBytes { raw in
            check(Handshake.verifyMAC1(raw, localPublic: FuzzWorld.responderStatic.publicKey), "a freshly written mac1 does not verify")
            check(FuzzWorld.cookies.verifyMAC2(raw, endpoint: FuzzWorld.source, now: 1) == withCookie, "mac2")
        }
        let authenticated = 8..<FuzzWorld.initiationMAC1Offset
        let unchanged = message[authenticated] == FuzzWorld.initiation.message[authenticated]
        let got = try? Handshake.consumeInitiation(message, localStatic: FuzzWorld.responderStatic)
        check((got != nil) == unchanged,
              unchanged ? "the valid initiation with another sender index was refused" : "a changed ephemeral/static/timestamp authenticated")
        if let got {
            check(got.senderIndex == le32(message, 4) && got.remoteStatic == FuzzWorld.initiatorStatic.publicKey, "fields")
        }
    }

    static func responseWithValidMAC(_ data: [UInt8]) {
        // The bytes replace sender, receiver, ephemeral and the empty AEAD (4..<60).
        var message = FuzzWorld.response.message
        let body = 4..<FuzzWorld.responseMAC1Offset
        for (i, b) in data.prefix(body.count).enumerated() { message[body.lowerBound + i] = b }
        Handshake.writeMACs(into: &message, receiverStatic: FuzzWorld.initiatorStatic.publicKey, cookie: nil)
        let authenticated = 12..<FuzzWorld.responseMAC1Offset
        let valid = message[authenticated] == FuzzWorld.response.message[authenticated]
            && le32(message, 8) == FuzzWorld.initiatorIndex
        let keys = try? Handshake.consumeResponse(message, state: FuzzWorld.initiation.state,
                                                  localStatic: FuzzWorld.initiatorStatic, presharedKey: FuzzWorld.presharedKey)
        check((keys != nil) == valid, valid ? "the valid response was refused" : "a changed response authenticated")
        if let keys {
            // The sender index is not authenticated (only mac1 covers it): the keys are the same.
            check(sameKeys(keys, FuzzWorld.initiatorKeypair, remoteIndex: le32(message, 4)), "response keys or index")
        }
        // A wrong pre-shared key never authenticates.
        check((try? Handshake.consumeResponse(message, state: FuzzWorld.initiation.state, localStatic: FuzzWorld.initiatorStatic,
                                              presharedKey: nil)) == nil, "a response authenticated without its pre-shared key")
    }

    // MARK: 3: transport round trip and tamper detection

    static func transportRoundTrip(_ data: [UInt8]) {
        guard data.count >= 11 else { return }
        // Counter (8 bytes; the top byte's high bits are often set so the reject limit is reached),
        // then a bit to flip (2 bytes), extra capacity (1 byte), then the packet.
        let counter = le64(data, 0)
        let flip = Int(data[8]) | Int(data[9]) << 8
        let spare = Int(data[10] % 48)
        let packet = Array(data[11...])
        let capacity = packet.count + Transport.overhead + spare
        guard let datagram = encode(packet, counter: counter, capacity: capacity) else {
            check(counter >= WireGuardProtocol.rejectAfterMessages, "encodeTransport refused counter \(counter) with room to spare")
            return
        }
        check(counter < WireGuardProtocol.rejectAfterMessages, "encodeTransport used counter \(counter) past the limit")
        let padded = min((packet.count + 15) / 16 * 16, capacity - Transport.overhead)
        check(datagram.count == padded + Transport.overhead && datagram.count <= capacity, "datagram length \(datagram.count)")

        var copy = datagram
        let decoded = copy.withUnsafeMutableBytes { Transport.decodeTransport(keypair: FuzzWorld.responderKeypair, datagram: $0) }
        check(decoded?.counter == counter, "an encoded datagram does not decode with the peer's keypair")
        if case let (_, range)? = decoded {
            let plain = Array(copy[range])
            check(plain.count == padded && Array(plain.prefix(packet.count)) == packet
                  && plain.dropFirst(packet.count).allSatisfy { $0 == 0 }, "plaintext is not the packet with zero padding")
        }
        // The encoder's own keypair does not decode it (the directions have different keys).
        var mine = datagram
        check(mine.withUnsafeMutableBytes { Transport.decodeTransport(keypair: FuzzWorld.initiatorKeypair, datagram: $0) } == nil,
              "a datagram decoded with the sender's own keypair")
        // Any single flipped bit makes it fail: header fields by classify/index, the rest by the tag.
        var tampered = datagram
        let bit = flip % (tampered.count * 8)
        tampered[bit / 8] ^= 1 << UInt8(bit % 8)
        check(tampered.withUnsafeMutableBytes { Transport.decodeTransport(keypair: FuzzWorld.responderKeypair, datagram: $0) } == nil,
              "a datagram with bit \(bit) flipped still decoded")
    }

    // MARK: 4: cookie reply round trip

    static func cookieRoundTrip(_ data: [UInt8]) {
        guard data.count >= 22 else { return }
        // now (1 byte, -8...247 s, so the secret expires), family (1), address (16), port (2), bit to flip (2).
        let now = Double(Int(data[0]) - 8)
        let address = data[1] & 1 == 0 ? Array(data[2..<6]) : Array(data[2..<18])
        let endpoint = CookieGenerator.endpointBytes(address: address, port: UInt16(data[18]) << 8 | UInt16(data[19]))
        let flip = Int(data[20]) | Int(data[21]) << 8
        let initiation = FuzzWorld.initiation.message

        var generator = FuzzWorld.cookies
        guard let reply = generator.createReply(to: initiation, endpoint: endpoint, now: now) else {
            check(false, "createReply refused a valid initiation")
            return
        }
        let cookie = generator.cookie(for: endpoint, now: now)
        let opened = try? Handshake.consumeCookieReply(reply, remotePublic: FuzzWorld.responderStatic.publicKey,
                                                       lastMAC1: FuzzWorld.initiation.state.mac1)
        check(opened == cookie, "the cookie reply does not carry the cookie for its source")
        // Bound to the initiation's mac1 and to the responder's key.
        check((try? Handshake.consumeCookieReply(reply, remotePublic: FuzzWorld.initiatorStatic.publicKey,
                                                 lastMAC1: FuzzWorld.initiation.state.mac1)) == nil, "opened under another key")
        check((try? Handshake.consumeCookieReply(reply, remotePublic: FuzzWorld.responderStatic.publicKey,
                                                 lastMAC1: [UInt8](repeating: 0, count: 16))) == nil, "opened under another mac1")
        // Any flipped bit after the (unauthenticated) receiver index breaks it.
        var tampered = reply
        let bit = 64 + flip % ((reply.count - 8) * 8)
        tampered[bit / 8] ^= 1 << UInt8(bit % 8)
        check((try? Handshake.consumeCookieReply(tampered, remotePublic: FuzzWorld.responderStatic.publicKey,
                                                 lastMAC1: FuzzWorld.initiation.state.mac1)) == nil, "a tampered cookie reply opened")

        // The initiator retries with mac2 under that cookie: it verifies from that source only.
        var retry = initiation
        Handshake.writeMACs(into: &retry, receiverStatic: FuzzWorld.responderStatic.publicKey, cookie: opened ?? cookie)
        var elsewhere = endpoint
        elsewhere[elsewhere.count - 1] ^= 1
        retry.withUnsafeBytes { raw in
            check(generator.verifyMAC2(raw, endpoint: endpoint, now: now), "mac2 made with the cookie does not verify")
            check(!generator.verifyMAC2(raw, endpoint: elsewhere, now: now), "mac2 verified for another source port")
            check(!generator.verifyMAC2(raw, endpoint: endpoint, now: now + WireGuardProtocol.cookieRefreshTime + 1),
                  "mac2 verified after the secret expired")
        }
    }

    // MARK: 5: the replay window against a model

    static func replayWindow(_ data: [UInt8]) {
        var window = ReplayWindow()
        var seen = Set<UInt64>()
        var greatest: UInt64?
        let limit = WireGuardProtocol.rejectAfterMessages
        var i = 0
        while i + 3 <= data.count {
            let kind = data[i], delta = UInt64(data[i + 1]) << 8 | UInt64(data[i + 2])
            i += 3
            let top = greatest ?? 0
            let counter: UInt64
            switch kind % 6 {
            case 0: counter = top &+ delta                                   // ahead (or equal)
            case 1: counter = top &- delta                                   // behind, wraps when small
            case 2: counter = top &- (ReplayWindow.windowSize - 64 + delta % 256) // around the window's edge
            case 3: counter = top &+ delta &* 64                             // jumps of whole words
            case 4: counter = limit &- 1 &- (delta % 4)                      // at the reject limit
            default:
                guard i + 8 <= data.count else { return }
                counter = le64(data, i)
                i += 8
            }
            let expected = counter < limit
                && (greatest.map { counter > $0 || ($0 - counter < ReplayWindow.windowSize && !seen.contains(counter)) } ?? true)
            check(window.wouldAccept(counter) == expected,
                  "wouldAccept(\(counter)) with greatest \(String(describing: greatest)): model says \(expected)")
            check(window.accept(counter) == expected, "accept(\(counter)) disagrees with wouldAccept")
            if expected {
                seen.insert(counter)
                greatest = max(greatest ?? 0, counter)
            }
            check(window.greatestAccepted == greatest, "greatestAccepted \(String(describing: window.greatestAccepted)) != \(String(describing: greatest))")
            check(!window.wouldAccept(counter), "a counter just seen would be accepted again")
        }
    }

    // MARK: 6: the UAPI text protocol

    static func uapi(_ data: [UInt8]) {
        // As the device reads a request: lines up to the first empty one.
        let text = String(decoding: data, as: UTF8.self)
        var lines: [Substring] = []
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.isEmpty { break }
            lines.append(line)
        }
        do throws(UAPI.Failure) {
            switch try UAPI.parse(lines) {
            case .get:
                check(lines == ["get=1"], "parsed as get: \(lines.count) lines")
            case .set(let change):
                check(lines.first == "set=1", "parsed as set without set=1")
                for peer in change.peers {
                    check(peer.publicKey.count == 32, "public key length")
                    for prefix in peer.allowedIPs { check(prefix.isCanonical, "allowed_ip \(prefix) has host bits set") }
                    if let endpoint = peer.endpoint { check(endpoint.port != 0, "endpoint with port 0") }
                }
                let formatted = UAPI.format(change)
                let again: UAPI.Request?
                do throws(UAPI.Failure) { again = try UAPI.parse(formatted.map { Substring($0) }) } catch {
                    check(false, "the formatted set does not parse: \(error.description)\n\(formatted.joined(separator: "\n"))")
                    again = nil
                }
                check(again == .set(change), "format/parse round trip differs:\n\(formatted.joined(separator: "\n"))")
            }
        } catch {
            check(error.errno == 22 || error.errno == 71, "errno \(error.errno)")
            check(error.description.utf8.count <= 160, "an error description of \(error.description.utf8.count) bytes")
            check(!containsKeyMaterial(error.description, from: lines),
                  "the error description repeats hex from the request: \(error.description)")
        }
    }

    /// True when `description` contains 12 consecutive characters of a request line's value that
    /// are hex digits with at least one decimal digit: the shape of key material.
    static func containsKeyMaterial(_ description: String, from lines: [Substring]) -> Bool {
        let text = Array(description.utf8)
        for line in lines {
            let bytes = Array(line.utf8)
            for start in 0..<max(0, bytes.count - 11) {
                let window = Array(bytes[start..<start + 12])
                guard window.allSatisfy(isHexDigit), window.contains(where: { $0 >= 0x30 && $0 <= 0x39 }) else { continue }
                if text.count >= 12, (0...(text.count - 12)).contains(where: { Array(text[$0..<$0 + 12]) == window }) { return true }
            }
        }
        return false
    }

    static func isHexDigit(_ c: UInt8) -> Bool {
        (c >= 0x30 && c <= 0x39) || (c >= 0x61 && c <= 0x66) || (c >= 0x41 && c <= 0x46)
    }

    // MARK: 7: endpoints

    static func endpoint(_ data: [UInt8]) {
        guard let mode = data.first else { return }
        if mode & 1 == 0 {
            let text = String(decoding: data.dropFirst(), as: UTF8.self)
            guard let e = Endpoint(text) else { return }
            check(e.port != 0, "port 0 parsed")
            check(Endpoint(e.description) == e, "\(e) does not re-parse to itself")
            check(viaSockaddr(e) == e, "\(e) does not survive sockaddr and back: \(String(describing: viaSockaddr(e)))")
            return
        }
        // sockaddr_in6 or sockaddr_in (or another family) from 16 address bytes and a port.
        guard data.count >= 20 else { return }
        let address = Array(data[1..<17]), port = UInt16(data[17]) << 8 | UInt16(data[18])
        var storage = sockaddr_storage()
        let family: Int32 = [AF_INET6, AF_INET, AF_UNIX, AF_PACKET][Int(data[19] % 4)]
        withUnsafeMutableBytes(of: &storage) { raw in
            switch family {
            case AF_INET6:
                var sin6 = sockaddr_in6()
                sin6.sin6_family = sa_family_t(AF_INET6)
                sin6.sin6_port = port.bigEndian
                withUnsafeMutableBytes(of: &sin6.sin6_addr) { $0.copyBytes(from: address) }
                raw.storeBytes(of: sin6, as: sockaddr_in6.self)
            case AF_INET:
                var sin = sockaddr_in()
                sin.sin_family = sa_family_t(AF_INET)
                sin.sin_port = port.bigEndian
                withUnsafeMutableBytes(of: &sin.sin_addr) { $0.copyBytes(from: address.prefix(4)) }
                raw.storeBytes(of: sin, as: sockaddr_in.self)
            default:
                raw.storeBytes(of: sa_family_t(family), as: sa_family_t.self)
            }
        }
        let e = withUnsafePointer(to: &storage) { Endpoint(socketAddress: $0) }
        let expected: Endpoint?
        switch family {
        case AF_INET6 where address.prefix(10).allSatisfy({ $0 == 0 }) && address[10] == 0xff && address[11] == 0xff:
            expected = Endpoint(address: .v4(IPv4Address(bytes: address[12...])), port: port)
        case AF_INET6: expected = Endpoint(address: .v6(IPv6Address(bytes: address)), port: port)
        case AF_INET: expected = Endpoint(address: .v4(IPv4Address(bytes: address.prefix(4))), port: port)
        default: expected = nil
        }
        check(e == expected, "sockaddr family \(family) gave \(String(describing: e)), expected \(String(describing: expected))")
        if let e { check(viaSockaddr(e) == e, "\(e) does not survive sockaddr and back") }
    }

    static func viaSockaddr(_ e: Endpoint) -> Endpoint? {
        var storage = sockaddr_storage()
        let length = withUnsafeMutableBytes(of: &storage) { e.store(to: $0.baseAddress!) }
        let expected = e.family == AF_INET ? MemoryLayout<sockaddr_in>.size : MemoryLayout<sockaddr_in6>.size
        check(length == expected && Int32(storage.ss_family) == e.family, "store(to:) gave the wrong length or family for \(e)")
        return withUnsafePointer(to: &storage) { Endpoint(socketAddress: $0) }
    }

    // MARK: 8: cryptokey routing

    static func allowedIPs(_ data: [UInt8]) {
        guard let first = data.first else { return }
        var table = AllowedIPs()
        var model: [IPPrefix: Int] = [:]
        var inserted: [IPPrefix] = []
        var i = 1
        for _ in 0..<Int(first % 12) {
            guard i + 19 <= data.count else { break }
            let kind = data[i], shape = data[i + 1], peer = Int(data[i + 2] % 4)
            let bytes = Array(data[(i + 3)..<(i + 19)])
            i += 19
            let address: IPAddress = shape & 0x80 == 0 ? .v4(IPv4Address(bytes: bytes.prefix(4))) : .v6(IPv6Address(bytes: bytes))
            let prefix = IPPrefix(address: address, length: Int(shape & 0x7f) % (address.family.bitWidth + 1))!
            switch kind % 8 {
            case 6:
                table.remove(prefix)
                model[prefix.network] = nil
            case 7:
                table.removeAll(peer: peer)
                model = model.filter { $0.value != peer }
            default:
                // Host bits may be set: the table keeps the network, as wireguard-go's trie does.
                table.insert(prefix, peer: peer)
                model[prefix.network] = peer
                inserted.append(prefix)
            }
        }
        let packet = Array(data[min(i, data.count)...])

        func expected(_ address: IPAddress) -> Int? {
            model.filter { $0.key.contains(address) }.max { $0.key.length < $1.key.length }?.value
        }
        check(table.isEmpty == model.isEmpty, "isEmpty")
        for peer in 0..<4 {
            let listed = table.prefixes(of: peer)
            check(Set(listed) == Set(model.filter { $0.value == peer }.keys) && listed.count == Set(listed).count,
                  "prefixes(of: \(peer)) = \(listed), model \(model.filter { $0.value == peer }.keys.sorted())")
        }
        for prefix in inserted {
            check(table.lookup(prefix.address) == expected(prefix.address), "lookup(\(prefix.address)) != longest-prefix model")
        }
        // The packet: version nibble, then source and destination where IPv4 or IPv6 put them.
        for source in [true, false] {
            let got = packet.withUnsafeBytes { table.lookup(packet: $0, source: source) }
            var address: IPAddress?
            switch packet.first.map({ $0 >> 4 }) {
            case 4 where packet.count >= 20:
                address = .v4(IPv4Address(bytes: packet[(source ? 12 : 16)..<(source ? 16 : 20)]))
            case 6 where packet.count >= 40:
                address = .v6(IPv6Address(bytes: packet[(source ? 8 : 24)..<(source ? 24 : 40)]))
            default:
                address = nil
            }
            check(got == address.flatMap(expected), "lookup(packet:source: \(source)) = \(String(describing: got)) for \(String(describing: address))")
        }
    }

    // MARK: Helpers

    static func encode(_ packet: [UInt8], counter: UInt64, capacity: Int) -> [UInt8]? {
        var buffer = [UInt8](repeating: 0xA5, count: capacity)
        let length = packet.withUnsafeBytes { p in
            buffer.withUnsafeMutableBytes { Transport.encodeTransport(keypair: FuzzWorld.initiatorKeypair, counter: counter, packet: p, into: $0) }
        }
        return length.map { Array(buffer[..<$0]) }
    }

    /// Same keys, role and indices (`remoteIndex` replacing `b`'s when given).
    static func sameKeys(_ a: Keypair, _ b: Keypair, remoteIndex: UInt32? = nil) -> Bool {
        a.sendKey.bytes == b.sendKey.bytes && a.receiveKey.bytes == b.receiveKey.bytes
            && a.localIndex == b.localIndex && a.remoteIndex == (remoteIndex ?? b.remoteIndex) && a.isInitiator == b.isInitiator
    }
}

/// Writes a line to standard error (fd 2; the C `stderr` global is not concurrency-safe in Swift 6).
func printError(_ text: String) {
    let bytes = Array((text + "\n").utf8)
    var offset = 0
    while offset < bytes.count {
        let n = bytes[offset...].withUnsafeBytes { write(2, $0.baseAddress, $0.count) }
        if n <= 0 { break }
        offset += n
    }
}

func le32(_ d: [UInt8], _ at: Int) -> UInt32 {
    (0..<4).reduce(0) { $0 | UInt32(d[at + $1]) << (8 * UInt32($1)) }
}

func le32Bytes(_ v: UInt32) -> [UInt8] { (0..<4).map { UInt8(truncatingIfNeeded: v >> (8 * UInt32($0))) } }

func le64(_ d: [UInt8], _ at: Int) -> UInt64 {
    (0..<8).reduce(0) { $0 | UInt64(d[at + $1]) << (8 * UInt64($1)) }
}

// MARK: - Seeds: valid inputs for each target, made by the protocol code itself

enum FuzzSeeds {
    static func all() -> [(name: String, bytes: [UInt8])] {
        let w = FuzzWorld.self
        var seeds: [(String, [UInt8])] = []
        let ping4: [UInt8] = [0x45, 0, 0, 28, 0, 1, 0, 0, 64, 1, 0, 0, 10, 0, 0, 2, 10, 0, 0, 1, 8, 0, 0, 0, 0, 1, 0, 1]
        var ping6: [UInt8] = [0x60, 0, 0, 0, 0, 8, 58, 64]
        ping6 += [0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2] + [0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]
        ping6 += [128, 0, 0, 0, 0, 1, 0, 1]

        // 0: the four message types as the protocol code makes them.
        seeds.append(("raw-initiation", [0] + w.initiation.message))
        seeds.append(("raw-response", [0] + w.response.message))
        seeds.append(("raw-cookie-reply", [0] + w.cookieReply))
        seeds.append(("raw-transport", [0] + FuzzTargets.encode(ping4, counter: 7, capacity: 1452)!))
        seeds.append(("raw-keepalive", [0] + FuzzTargets.encode([], counter: 8, capacity: 1452)!))
        // 1, 2: the authenticated bodies.
        seeds.append(("initiation-body", [1, 1] + Array(w.initiation.message[4..<w.initiationMAC1Offset])))
        seeds.append(("response-body", [2] + Array(w.response.message[4..<w.responseMAC1Offset])))
        // 3: counter, flip position, spare capacity, packet.
        seeds.append(("transport-v4", [3] + le(UInt64(5)) + [0x10, 0x01, 0] + ping4))
        seeds.append(("transport-v6", [3] + le(UInt64(1) << 40) + [0xff, 0x00, 20] + ping6))
        seeds.append(("transport-limit", [3] + le(WireGuardProtocol.rejectAfterMessages - 1) + [0, 0, 0]))
        // 4: now, family, address, port, flip.
        seeds.append(("cookie-v4", [4, 9, 0, 192, 0, 2, 7] + [UInt8](repeating: 0, count: 12) + [0xca, 0x6c, 3, 0]))
        seeds.append(("cookie-v6", [4, 200, 1, 0x20, 0x01, 0x0d, 0xb8] + [UInt8](repeating: 0, count: 11) + [1, 0xca, 0x6c, 9, 9]))
        // 5: replay operations (kind, delta).
        seeds.append(("replay", [5, 0, 0, 1, 0, 0, 5, 1, 0, 2, 1, 0, 2, 2, 0, 0, 3, 1, 0, 1, 0x1f, 0xc0, 4, 0, 0, 0, 0, 9]))
        // 6: UAPI requests as wg(8) sends them.
        let keyHex = w.responderStatic.hex, peerHex = UAPI.hex(w.initiatorStatic.publicKey.bytes)
        let set = """
            set=1
            private_key=\(keyHex)
            listen_port=51820
            fwmark=0
            replace_peers=true
            public_key=\(peerHex)
            preshared_key=\(UAPI.hex(w.presharedKeyBytes))
            endpoint=[2001:db8::1]:51820
            persistent_keepalive_interval=25
            replace_allowed_ips=true
            allowed_ip=10.0.0.0/8
            allowed_ip=fd00::/64
            protocol_version=1
            public_key=\(UAPI.hex(w.responderStatic.publicKey.bytes))
            update_only=true
            endpoint=192.0.2.1:4500
            public_key=\(String(repeating: "ab", count: 32))
            remove=true


            """
        seeds.append(("uapi-set", [6] + Array(set.utf8)))
        seeds.append(("uapi-get", [6] + Array("get=1\n\n".utf8)))
        seeds.append(("uapi-bad", [6] + Array("set=1\nlisten_port=70000\n\n".utf8)))
        // 7: endpoints as text and as sockaddrs.
        for (i, text) in ["1.2.3.4:51820", "[2001:db8::1]:51820", "[::ffff:192.0.2.1]:9"].enumerated() {
            seeds.append(("endpoint-text-\(i)", [7, 0] + Array(text.utf8)))
        }
        seeds.append(("endpoint-mapped", [7, 1] + [UInt8](repeating: 0, count: 10) + [0xff, 0xff, 192, 0, 2, 1] + [0xca, 0x6c, 0]))
        seeds.append(("endpoint-v4", [7, 1, 192, 0, 2, 1] + [UInt8](repeating: 0, count: 12) + [0, 53, 1]))
        // 8: a table (kind, shape, peer, 16 address bytes) and a packet.
        var table: [UInt8] = [8, 5]
        table += [0, 8, 1, 10] + [UInt8](repeating: 0, count: 15)                 // 10.0.0.0/8 -> 1
        table += [0, 24, 2, 10, 0, 0, 7] + [UInt8](repeating: 0, count: 12)       // 10.0.0.7/24 (host bits) -> 2
        table += [0, 0x80 | 64, 3, 0xfd] + [UInt8](repeating: 0, count: 15)        // fd00::/64 -> 3
        table += [0, 0, 0] + [UInt8](repeating: 0, count: 16)                      // 0.0.0.0/0 -> 0
        table += [6, 8, 0, 10] + [UInt8](repeating: 0, count: 15)                  // remove 10.0.0.0/8
        seeds.append(("allowed-v4", table + ping4))
        seeds.append(("allowed-v6", table + ping6))
        return seeds
    }

    static func le(_ v: UInt64) -> [UInt8] { (0..<8).map { UInt8(truncatingIfNeeded: v >> (8 * UInt64($0))) } }

    /// Writes each seed to `directory`/seed-NAME (the directory must exist).
    static func write(to directory: String) {
        for (name, bytes) in all() {
            let path = "\(directory)/seed-\(name)"
            guard let file = fopen(path, "wb") else {
                printError("cannot write \(path)")
                exit(2)
            }
            _ = bytes.withUnsafeBytes { fwrite($0.baseAddress, 1, $0.count, file) }
            fclose(file)
        }
    }
}
