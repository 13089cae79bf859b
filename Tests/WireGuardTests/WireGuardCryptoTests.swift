import WireGuard
import XCTest

final class WireGuardCryptoTests: XCTestCase {
    let key = [UInt8](0..<32)

    /// Expected values from Python:
    ///   hmac.new(key, msg, hashlib.blake2s).digest()
    /// and the whitepaper's KDF written over it:
    ///   t0 = HMAC(key, input); t1 = HMAC(t0, b"\x01"); t2 = HMAC(t0, t1 + b"\x02"); t3 = HMAC(t0, t2 + b"\x03")
    func testHMACAgainstPython() {
        XCTAssertEqual(hexString(WireGuardCrypto.hmac(key: key, Array("WireGuard".utf8))),
                       "5415924543576b3f5ee867c94e1aab70586d33b32fae3fccd2c635b3e1d7198d")
        XCTAssertEqual(hexString(WireGuardCrypto.hmac(key: key, [])),
                       "e2641d24dfa8dd89e8cb77f1cdc77d8c006e5bebdfc4d6a3a3a6f8d5b7586fb0")
        // A key longer than the block is hashed first (RFC 2104).
        XCTAssertEqual(hexString(WireGuardCrypto.hmac(key: [UInt8](repeating: 0xAA, count: 70),
                                                      (0..<200).map { UInt8($0 % 251) })),
                       "393d5e31a37978084e352e42bb7fe91348a5901b176e9cdb184fd93c50b3bb2a")
    }

    func testKDFAgainstPython() {
        let input = [UInt8](100..<132)
        let t1 = "e3b7e038799447459d13f6cc03b71555c0b32ee93354ebe4526ec98bc53b20a4"
        let t2 = "ca06d8e46b509266c7c0594805ffb9c256348a33c642381348f047e452d239e2"
        let t3 = "5ee952936bec1473c13db1cc92b8d8ba5ad2df7c77f07478731d48aa5530a000"
        XCTAssertEqual(hexString(WireGuardCrypto.kdf1(key: key, input: input)), t1)
        let (a, b) = WireGuardCrypto.kdf2(key: key, input: input)
        XCTAssertEqual([hexString(a), hexString(b)], [t1, t2])
        let (x, y, z) = WireGuardCrypto.kdf3(key: key, input: input)
        XCTAssertEqual([hexString(x), hexString(y), hexString(z)], [t1, t2, t3])
        // KDF2(C, ε), the transport key derivation.
        let (s, r) = WireGuardCrypto.kdf2(key: key, input: [])
        XCTAssertEqual(hexString(s), "7a38c34bf2b8738d7374ca77c44ecb309a11d2b2528304fa86052c365e722624")
        XCTAssertEqual(hexString(r), "1a17621f346abdc520746a9fb64d8eb03231d674fc15687537b0780fd9c060fd")
    }

    /// The handshake's fixed start: C = HASH(CONSTRUCTION), H = HASH(C ‖ IDENTIFIER) (hashlib).
    func testInitialChainingKeyAndHash() {
        let c = WireGuardCrypto.hash(WireGuardProtocol.construction)
        XCTAssertEqual(hexString(c), "60e26daef327efc02ec335e2a025d2d016eb4206f87277f52d38d1988b78cd36")
        XCTAssertEqual(hexString(WireGuardCrypto.hash(c, WireGuardProtocol.identifier)),
                       "2211b361081ac566691243db458ad5322d9c6c662293e8b70ee19c65ba079ef3")
        XCTAssertEqual(WireGuardCrypto.mac(key: Array(0..<16), Array("abc".utf8)), hex("75296c2d2c0f51210b383f386bc8b1ff"))
    }

    /// RFC 7748 section 6.1.
    func testX25519RFC7748() throws {
        let alice = hex("77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a")
        let bobPublic = hex("de9edb7d7b7dc1b4d35b61c2ece435373f8343c85b78674dadfc7e146f882b4f")
        XCTAssertEqual(hexString(WireGuardCrypto.publicKey(for: alice)),
                       "8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a")
        XCTAssertEqual(hexString(try WireGuardCrypto.x25519(privateKey: alice, publicKey: bobPublic)),
                       "4a5d9d5ba4ce2de1728e3bf480350f25e07e21c947d19e3376f09b3c1e161742")
    }

    /// A low-order point gives the all-zero shared secret, which must be refused.
    func testX25519RefusesAllZeroResult() {
        let alice = hex("77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a")
        for lowOrder in [[UInt8](repeating: 0, count: 32), [1] + [UInt8](repeating: 0, count: 31)] {
            XCTAssertThrowsError(try WireGuardCrypto.x25519(privateKey: alice, publicKey: lowOrder)) { error in
                XCTAssertEqual(error as? WireGuardProtocolError, .weakPublicKey)
            }
        }
        XCTAssertThrowsError(try WireGuardCrypto.x25519(privateKey: alice, publicKey: [1, 2, 3]))
    }

    func testGeneratedPrivateKeyIsClamped() {
        for _ in 0..<16 {
            let k = WireGuardCrypto.generatePrivateKey()
            XCTAssertEqual(k.count, 32)
            XCTAssertEqual(k[0] & 7, 0)
            XCTAssertEqual(k[31] & 0xC0, 0x40)
        }
        XCTAssertNotEqual(WireGuardCrypto.generatePrivateKey(), WireGuardCrypto.generatePrivateKey())
    }

    /// Expected value from Python's cryptography: ChaCha20Poly1305(key).encrypt(nonce, pt, ad) with
    /// nonce = 4 zero bytes ‖ counter little-endian, checking the nonce layout.
    func testAEADAgainstPython() throws {
        let counter: UInt64 = 0x0102_0304_0506_0708
        let sealed = WireGuardCrypto.seal(key: key, counter: counter, plaintext: Array("hello, wireguard".utf8),
                                          additionalData: Array("ad".utf8))
        XCTAssertEqual(hexString(sealed), "982cc188c415ca6f0dd94fab061913dcf924db1fa7d220afbe209b9c66c07dbf")
        XCTAssertEqual(try WireGuardCrypto.open(key: key, counter: counter, ciphertext: sealed,
                                                additionalData: Array("ad".utf8)),
                       Array("hello, wireguard".utf8))
        // AEAD(κ, 0, ε, ε): the tag alone.
        XCTAssertEqual(hexString(WireGuardCrypto.seal(key: key, counter: 0, plaintext: [])), "10324f800a160bd9a1794255be7ec29d")
        XCTAssertEqual(try WireGuardCrypto.open(key: key, counter: 0, ciphertext: hex("10324f800a160bd9a1794255be7ec29d")), [])

        // Wrong counter, wrong additional data, any flipped bit: refused.
        XCTAssertThrowsError(try WireGuardCrypto.open(key: key, counter: counter + 1, ciphertext: sealed,
                                                      additionalData: Array("ad".utf8)))
        XCTAssertThrowsError(try WireGuardCrypto.open(key: key, counter: counter, ciphertext: sealed, additionalData: []))
        for i in sealed.indices {
            var bad = sealed
            bad[i] ^= 0x01
            XCTAssertThrowsError(try WireGuardCrypto.open(key: key, counter: counter, ciphertext: bad,
                                                          additionalData: Array("ad".utf8)))
        }
        XCTAssertThrowsError(try WireGuardCrypto.open(key: key, counter: 0, ciphertext: [1, 2, 3]))
    }

    func testPointerAEADInPlace() {
        var buffer = [UInt8](repeating: 0, count: 64 + 16)
        for i in 0..<64 { buffer[i] = UInt8(i) }
        let expected = WireGuardCrypto.seal(key: key, counter: 7, plaintext: Array(buffer[0..<64]))
        key.withUnsafeBufferPointer { k in
            buffer.withUnsafeMutableBytes { raw in
                let written = WireGuardCrypto.seal(key: k.baseAddress!, counter: 7,
                                                   plaintext: UnsafeRawBufferPointer(rebasing: raw[0..<64]), into: raw.baseAddress!)
                XCTAssertEqual(written, 80)
            }
        }
        XCTAssertEqual(buffer, expected)
        key.withUnsafeBufferPointer { k in
            buffer.withUnsafeMutableBytes { raw in
                XCTAssertEqual(WireGuardCrypto.open(key: k.baseAddress!, counter: 7, ciphertext: UnsafeRawBufferPointer(raw),
                                                    into: raw.baseAddress!), 64)
            }
        }
        XCTAssertEqual(Array(buffer[0..<64]), (0..<64).map { UInt8($0) })
    }

    func testXAEADRoundTripAndTamper() throws {
        let nonce = [UInt8](repeating: 0x24, count: 24)
        let sealed = WireGuardCrypto.xseal(key: key, nonce: nonce, plaintext: Array(0..<16), additionalData: Array(16..<32))
        XCTAssertEqual(sealed.count, 32)
        XCTAssertEqual(try WireGuardCrypto.xopen(key: key, nonce: nonce, ciphertext: sealed, additionalData: Array(16..<32)),
                       Array(0..<16))
        var otherNonce = nonce
        otherNonce[23] ^= 1
        XCTAssertThrowsError(try WireGuardCrypto.xopen(key: key, nonce: otherNonce, ciphertext: sealed,
                                                       additionalData: Array(16..<32)))
        XCTAssertThrowsError(try WireGuardCrypto.xopen(key: key, nonce: nonce, ciphertext: sealed, additionalData: []))
        XCTAssertThrowsError(try WireGuardCrypto.xopen(key: key, nonce: [1], ciphertext: sealed, additionalData: []))
    }

    func testTAI64N() {
        // 2^62 + 10 + 1_700_000_000 = 0x400000006553f10a; 123456789 ns = 0x075bcd15.
        XCTAssertEqual(hexString(WireGuardCrypto.tai64n(unixSeconds: 1_700_000_000, nanoseconds: 123_456_789)),
                       "400000006553f10a075bcd15")
        let earlier = WireGuardCrypto.tai64n(unixSeconds: 1_700_000_000, nanoseconds: 999_999_999)
        let later = WireGuardCrypto.tai64n(unixSeconds: 1_700_000_001, nanoseconds: 0)
        XCTAssertTrue(WireGuardCrypto.tai64n(later, isAfter: earlier))
        XCTAssertFalse(WireGuardCrypto.tai64n(earlier, isAfter: later))
        XCTAssertFalse(WireGuardCrypto.tai64n(later, isAfter: later))
        XCTAssertFalse(WireGuardCrypto.tai64n([1, 2], isAfter: earlier))
    }
}
