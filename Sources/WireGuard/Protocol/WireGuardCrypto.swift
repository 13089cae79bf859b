import CSodium

/// The cryptographic functions of whitepaper section 5.4 under the names the whitepaper uses:
/// HASH, MAC, HMAC, KDF1..3, DH (X25519), AEAD (ChaCha20-Poly1305), XAEAD (XChaCha20-Poly1305)
/// and TAI64N. BLAKE2s is `BLAKE2s`; the rest is libsodium.
///
/// The array functions serve the handshake. The packet path uses the pointer-based
/// `seal(key:counter:plaintext:additionalData:into:)` and `open(key:counter:ciphertext:additionalData:into:)`,
/// which allocate nothing.
public enum WireGuardCrypto {
    /// X25519 keys, symmetric keys, HASH outputs and chaining keys are 32 bytes.
    public static let keyLength = 32
    /// HASH output length.
    public static let hashLength = 32
    /// MAC output length (keyed BLAKE2s-128); also the cookie length.
    public static let macLength = 16
    /// The Poly1305 tag appended by every AEAD.
    public static let tagLength = 16
    /// TAI64N timestamps.
    public static let timestampLength = 12
    /// XChaCha20-Poly1305 nonces (cookie replies).
    public static let extendedNonceLength = 24

    // MARK: Hashes

    /// HASH(parts): BLAKE2s-256 of the concatenation of `parts`.
    public static func hash(_ parts: [UInt8]...) -> [UInt8] {
        var hasher = BLAKE2s()
        for part in parts { hasher.update(part) }
        return hasher.finalize()
    }

    /// MAC(key, input): keyed BLAKE2s with a 16-byte output.
    public static func mac(key: [UInt8], _ input: [UInt8]) -> [UInt8] {
        input.withUnsafeBytes { mac(key: key, $0) }
    }

    /// MAC(key, input) over bytes in place (mac1 and mac2 are computed over a prefix of a message).
    public static func mac(key: [UInt8], _ input: UnsafeRawBufferPointer) -> [UInt8] {
        var hasher = BLAKE2s(outputLength: macLength, key: key)
        hasher.update(input)
        return hasher.finalize()
    }

    /// HMAC(key, input): RFC 2104 over BLAKE2s-256 with its 64-byte block.
    public static func hmac(key: [UInt8], _ input: [UInt8]) -> [UInt8] {
        input.withUnsafeBytes { hmac(key: key, $0) }
    }

    /// HMAC over bytes in place (a preshared key in secret memory enters the KDF this way: the hash's
    /// buffer that absorbed it is wiped by `finalize`).
    public static func hmac(key: [UInt8], _ input: UnsafeRawBufferPointer) -> [UInt8] {
        var paddedKey = key.count > BLAKE2s.blockLength ? BLAKE2s.hash(key) : key
        paddedKey += [UInt8](repeating: 0, count: BLAKE2s.blockLength - paddedKey.count)
        var inner = BLAKE2s()
        var innerPad = paddedKey.map { $0 ^ 0x36 }
        inner.update(innerPad)
        inner.update(input)
        var outer = BLAKE2s()
        var outerPad = paddedKey.map { $0 ^ 0x5C }
        outer.update(outerPad)
        var innerHash = inner.finalize()
        outer.update(innerHash)
        Sodium.wipe(&paddedKey)
        Sodium.wipe(&innerPad)
        Sodium.wipe(&outerPad)
        Sodium.wipe(&innerHash)
        return outer.finalize()
    }

    /// KDF1(key, input) = τ1, with τ0 = HMAC(key, input) and τ1 = HMAC(τ0, 0x1).
    public static func kdf1(key: [UInt8], input: [UInt8]) -> [UInt8] {
        input.withUnsafeBytes { kdf(key: key, input: $0, count: 1)[0] }
    }

    /// KDF2(key, input) = (τ1, τ2), with τ2 = HMAC(τ0, τ1 ‖ 0x2).
    public static func kdf2(key: [UInt8], input: [UInt8]) -> ([UInt8], [UInt8]) {
        let out = input.withUnsafeBytes { kdf(key: key, input: $0, count: 2) }
        return (out[0], out[1])
    }

    /// KDF3(key, input) = (τ1, τ2, τ3), with τ3 = HMAC(τ0, τ2 ‖ 0x3).
    public static func kdf3(key: [UInt8], input: [UInt8]) -> ([UInt8], [UInt8], [UInt8]) {
        input.withUnsafeBytes { kdf3(key: key, input: $0) }
    }

    /// KDF3 over input bytes in place (the preshared key, from its secret memory).
    public static func kdf3(key: [UInt8], input: UnsafeRawBufferPointer) -> ([UInt8], [UInt8], [UInt8]) {
        let out = kdf(key: key, input: input, count: 3)
        return (out[0], out[1], out[2])
    }

    /// The whitepaper's HKDF: τ0 = HMAC(key, input), τi = HMAC(τ0, τ(i-1) ‖ i), τ(0) empty for i = 1.
    private static func kdf(key: [UInt8], input: UnsafeRawBufferPointer, count: Int) -> [[UInt8]] {
        var secret = hmac(key: key, input)
        defer { Sodium.wipe(&secret) }
        var outputs: [[UInt8]] = []
        var previous: [UInt8] = []
        for i in 1...count {
            var message = previous + [UInt8(i)]
            previous = hmac(key: secret, message)
            Sodium.wipe(&message)
            outputs.append(previous)
        }
        return outputs
    }

    // MARK: X25519

    /// DH(private, public): X25519 (`crypto_scalarmult`). Throws `weakPublicKey` for the all-zero
    /// result, which a low-order public key produces.
    public static func x25519(privateKey: [UInt8], publicKey: [UInt8]) throws(WireGuardProtocolError) -> [UInt8] {
        let result: Result<[UInt8], WireGuardProtocolError> = privateKey.withUnsafeBytes { key in
            do throws(WireGuardProtocolError) { return .success(try x25519(privateKey: key, publicKey: publicKey)) }
            catch { return .failure(error) }
        }
        return try result.get()
    }

    /// X25519 with the private key read in place (from its secret memory: no copy is made here;
    /// libsodium clamps it in the output buffer, which the result then overwrites).
    public static func x25519(privateKey: UnsafeRawBufferPointer, publicKey: [UInt8]) throws(WireGuardProtocolError) -> [UInt8] {
        guard privateKey.count == keyLength, let key = privateKey.baseAddress else {
            throw .invalidLength(what: "private key", expected: keyLength, actual: privateKey.count)
        }
        guard publicKey.count == keyLength else {
            throw .invalidLength(what: "public key", expected: keyLength, actual: publicKey.count)
        }
        Sodium.ensureInitialized()
        var shared = [UInt8](repeating: 0, count: keyLength)
        let rc = shared.withUnsafeMutableBufferPointer { out in
            crypto_scalarmult(out.baseAddress!, key.assumingMemoryBound(to: UInt8.self), publicKey)
        }
        // libsodium already fails on the all-zero result; check again rather than depend on it.
        let allZero = shared.withUnsafeBytes { sodium_is_zero($0.baseAddress!.assumingMemoryBound(to: UInt8.self), keyLength) == 1 }
        guard rc == 0, !allZero else {
            Sodium.wipe(&shared)
            throw .weakPublicKey
        }
        return shared
    }

    /// The X25519 public key of a 32-byte private key (`crypto_scalarmult_base`; the scalar is clamped).
    public static func publicKey(for privateKey: [UInt8]) -> [UInt8] {
        privateKey.withUnsafeBytes { publicKey(for: $0) }
    }

    /// The public key of a private key read in place.
    public static func publicKey(for privateKey: UnsafeRawBufferPointer) -> [UInt8] {
        precondition(privateKey.count == keyLength, "a private key is 32 bytes")
        Sodium.ensureInitialized()
        var out = [UInt8](repeating: 0, count: keyLength)
        _ = out.withUnsafeMutableBufferPointer {
            crypto_scalarmult_base($0.baseAddress!, privateKey.baseAddress!.assumingMemoryBound(to: UInt8.self))
        }
        return out
    }

    /// 32 random bytes, clamped as an X25519 scalar (as `wg genkey` does). An array: for tests.
    public static func generatePrivateKey() -> [UInt8] {
        var key = [UInt8](repeating: 0, count: keyLength)
        key.withUnsafeMutableBytes { generatePrivateKey(into: $0) }
        return key
    }

    /// Fills `out` (32 bytes, secret memory) with a random, clamped X25519 scalar.
    static func generatePrivateKey(into out: UnsafeMutableRawBufferPointer) {
        precondition(out.count == keyLength, "a private key is 32 bytes")
        Sodium.ensureInitialized()
        randombytes_buf(out.baseAddress!, keyLength)
        out[0] &= 248
        out[31] &= 127
        out[31] |= 64
    }

    // MARK: AEAD

    /// AEAD(key, counter, plaintext, additionalData): ChaCha20-Poly1305 (IETF, 96-bit nonce = 32 zero
    /// bits ‖ the 64-bit little-endian counter). Returns the ciphertext followed by the 16-byte tag.
    public static func seal(key: [UInt8], counter: UInt64, plaintext: [UInt8], additionalData: [UInt8] = []) -> [UInt8] {
        precondition(key.count == keyLength, "an AEAD key is 32 bytes")
        var out = [UInt8](repeating: 0, count: plaintext.count + tagLength)
        key.withUnsafeBufferPointer { k in
            plaintext.withUnsafeBytes { p in
                additionalData.withUnsafeBytes { ad in
                    out.withUnsafeMutableBytes { o in
                        _ = seal(key: k.baseAddress!, counter: counter, plaintext: p, additionalData: ad, into: o.baseAddress!)
                    }
                }
            }
        }
        return out
    }

    /// The inverse of `seal`; throws `authenticationFailed(field:)` naming `field` when the tag does not verify.
    public static func open(key: [UInt8], counter: UInt64, ciphertext: [UInt8], additionalData: [UInt8] = [],
                            field: String = "data") throws(WireGuardProtocolError) -> [UInt8] {
        precondition(key.count == keyLength, "an AEAD key is 32 bytes")
        guard ciphertext.count >= tagLength else { throw .authenticationFailed(field: field) }
        var out = [UInt8](repeating: 0, count: ciphertext.count - tagLength)
        let length = key.withUnsafeBufferPointer { k in
            ciphertext.withUnsafeBytes { c in
                additionalData.withUnsafeBytes { ad in
                    out.withUnsafeMutableBytes { o in
                        // An empty plaintext still needs somewhere to point.
                        withUnsafeTemporaryAllocation(byteCount: 1, alignment: 1) { spare in
                            open(key: k.baseAddress!, counter: counter, ciphertext: c, additionalData: ad,
                                 into: o.baseAddress ?? spare.baseAddress!)
                        }
                    }
                }
            }
        }
        guard length != nil else { throw .authenticationFailed(field: field) }
        return out
    }

    /// Encrypts `plaintext` with ChaCha20-Poly1305 under the 32 bytes at `key` and the nonce made
    /// from `counter`, writing ciphertext ‖ tag (`plaintext.count + 16` bytes) to `out`. Returns the
    /// number of bytes written. `out` may be exactly `plaintext.baseAddress` (in place) but must
    /// not overlap it otherwise. Allocates nothing.
    @discardableResult
    public static func seal(key: UnsafePointer<UInt8>, counter: UInt64, plaintext: UnsafeRawBufferPointer,
                            additionalData: UnsafeRawBufferPointer = UnsafeRawBufferPointer(start: nil, count: 0),
                            into out: UnsafeMutableRawPointer) -> Int {
        Sodium.ensureInitialized()
        var nonce = nonceWords(counter)
        var written: UInt64 = 0
        let rc = withUnsafeBytes(of: &nonce) { n in
            withNonNullBase(plaintext) { m in
                withNonNullBase(additionalData) { ad in
                    crypto_aead_chacha20poly1305_ietf_encrypt(
                        out.assumingMemoryBound(to: UInt8.self), &written,
                        m, UInt64(plaintext.count), ad, UInt64(additionalData.count),
                        nil, n.baseAddress!.assumingMemoryBound(to: UInt8.self), key)
                }
            }
        }
        precondition(rc == 0, "crypto_aead_chacha20poly1305_ietf_encrypt cannot fail")
        return Int(written)
    }

    /// Authenticates and decrypts `ciphertext` (ciphertext ‖ 16-byte tag) under the 32 bytes at `key`
    /// and the nonce made from `counter`, writing `ciphertext.count - 16` bytes of plaintext to `out`.
    /// Returns the plaintext length, or nil when the input is shorter than a tag or does not
    /// authenticate (then nothing useful is in `out`). `out` may be exactly `ciphertext.baseAddress`
    /// (in place) but must not overlap it otherwise. Allocates nothing.
    public static func open(key: UnsafePointer<UInt8>, counter: UInt64, ciphertext: UnsafeRawBufferPointer,
                            additionalData: UnsafeRawBufferPointer = UnsafeRawBufferPointer(start: nil, count: 0),
                            into out: UnsafeMutableRawPointer) -> Int? {
        guard ciphertext.count >= tagLength, let c = ciphertext.baseAddress else { return nil }
        Sodium.ensureInitialized()
        var nonce = nonceWords(counter)
        var length: UInt64 = 0
        let rc = withUnsafeBytes(of: &nonce) { n in
            withNonNullBase(additionalData) { ad in
                crypto_aead_chacha20poly1305_ietf_decrypt(
                    out.assumingMemoryBound(to: UInt8.self), &length, nil,
                    c.assumingMemoryBound(to: UInt8.self), UInt64(ciphertext.count),
                    ad, UInt64(additionalData.count),
                    n.baseAddress!.assumingMemoryBound(to: UInt8.self), key)
            }
        }
        return rc == 0 ? Int(length) : nil
    }

    /// XAEAD(key, nonce, plaintext, additionalData): XChaCha20-Poly1305 with a 24-byte nonce.
    public static func xseal(key: [UInt8], nonce: [UInt8], plaintext: [UInt8], additionalData: [UInt8]) -> [UInt8] {
        precondition(key.count == keyLength, "an XAEAD key is 32 bytes")
        precondition(nonce.count == extendedNonceLength, "an XAEAD nonce is 24 bytes")
        Sodium.ensureInitialized()
        var out = [UInt8](repeating: 0, count: plaintext.count + tagLength)
        var written: UInt64 = 0
        let rc = plaintext.withUnsafeBytes { p in
            additionalData.withUnsafeBytes { ad in
                withNonNullBase(p) { m in
                    withNonNullBase(ad) { a in
                        crypto_aead_xchacha20poly1305_ietf_encrypt(&out, &written, m, UInt64(p.count), a, UInt64(ad.count),
                                                                   nil, nonce, key)
                    }
                }
            }
        }
        precondition(rc == 0, "crypto_aead_xchacha20poly1305_ietf_encrypt cannot fail")
        return out
    }

    /// The inverse of `xseal`; throws `authenticationFailed(field:)` naming `field` when the tag does not verify.
    public static func xopen(key: [UInt8], nonce: [UInt8], ciphertext: [UInt8], additionalData: [UInt8],
                             field: String = "data") throws(WireGuardProtocolError) -> [UInt8] {
        precondition(key.count == keyLength, "an XAEAD key is 32 bytes")
        guard nonce.count == extendedNonceLength else {
            throw .invalidLength(what: "XAEAD nonce", expected: extendedNonceLength, actual: nonce.count)
        }
        guard ciphertext.count >= tagLength else { throw .authenticationFailed(field: field) }
        Sodium.ensureInitialized()
        var out = [UInt8](repeating: 0, count: ciphertext.count - tagLength + 1) // +1: never empty
        var length: UInt64 = 0
        let rc = additionalData.withUnsafeBytes { ad in
            withNonNullBase(ad) { a in
                crypto_aead_xchacha20poly1305_ietf_decrypt(&out, &length, nil, ciphertext, UInt64(ciphertext.count),
                                                           a, UInt64(ad.count), nonce, key)
            }
        }
        guard rc == 0 else { throw .authenticationFailed(field: field) }
        out.removeLast()
        return out
    }

    // MARK: TAI64N

    /// TAI64N (whitepaper 5.4.2, cr.yp.to/libtai/tai64.html): 8 bytes big-endian of
    /// `WireGuardProtocol.tai64nBase + unixSeconds`, then 4 bytes big-endian nanoseconds.
    ///
    /// The responder only compares a peer's timestamps with each other (bytewise, big-endian), so
    /// the value only has to grow. Pass nanoseconds rounded down (for example to a multiple of
    /// 2^24 ns, about 17 ms) so the timestamp does not reveal the precise clock.
    public static func tai64n(unixSeconds: UInt64, nanoseconds: UInt32) -> [UInt8] {
        let seconds = WireGuardProtocol.tai64nBase &+ unixSeconds
        var out = [UInt8](repeating: 0, count: timestampLength)
        for i in 0..<8 { out[i] = UInt8(truncatingIfNeeded: seconds >> (56 - 8 * UInt64(i))) }
        for i in 0..<4 { out[8 + i] = UInt8(truncatingIfNeeded: nanoseconds >> (24 - 8 * UInt32(i))) }
        return out
    }

    /// True when TAI64N timestamp `a` is strictly later than `b` (the responder's replay check on
    /// initiations). Both must be 12 bytes; anything else is never later.
    public static func tai64n(_ a: [UInt8], isAfter b: [UInt8]) -> Bool {
        guard a.count == timestampLength, b.count == timestampLength else { return false }
        for i in 0..<timestampLength where a[i] != b[i] { return a[i] > b[i] }
        return false
    }

    // MARK: Helpers

    /// The 96-bit AEAD nonce as three 32-bit words: zero, then the counter's low and high halves,
    /// each little-endian in memory.
    @inline(__always)
    private static func nonceWords(_ counter: UInt64) -> (UInt32, UInt32, UInt32) {
        (0, UInt32(truncatingIfNeeded: counter).littleEndian, UInt32(truncatingIfNeeded: counter >> 32).littleEndian)
    }

    /// Calls `body` with the buffer's start, or with a valid dummy byte when it has none (libsodium
    /// wants a pointer even for zero-length input).
    @inline(__always)
    private static func withNonNullBase<R>(_ buffer: UnsafeRawBufferPointer, _ body: (UnsafePointer<UInt8>) -> R) -> R {
        if let base = buffer.baseAddress { return body(base.assumingMemoryBound(to: UInt8.self)) }
        var spare: UInt8 = 0
        return withUnsafePointer(to: &spare) { body($0) }
    }
}
