import CSodium

/// BLAKE2s (RFC 7693): the hash under WireGuard's HASH, MAC, HMAC and KDF. libsodium only has
/// BLAKE2b, so it is written here from the RFC's description (section 3) and checked against the
/// RFC's Appendix B and Appendix E vectors.
///
/// A value type with fixed-size inline storage: hashing allocates nothing but the result array
/// (or nothing at all with `finalize(into:)`).
public struct BLAKE2s: Sendable {
    /// The compression function's block size in bytes.
    public static let blockLength = 64
    /// The largest digest and key size in bytes.
    public static let maximumOutputLength = 32

    /// The chained state h[0...7].
    private var state: (UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32)
    /// Input not yet compressed; a full block stays here until more input shows it is not the last.
    private var buffer: (UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64)
    private var bufferCount = 0
    /// Bytes compressed so far (the counter t of RFC 7693).
    private var compressedCount: UInt64 = 0
    /// Digest length in bytes, 1...32.
    public let outputLength: Int

    /// The initialisation vector (RFC 7693 section 2.6; the same words as SHA-256's).
    private static let iv: (UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32) =
        (0x6A09_E667, 0xBB67_AE85, 0x3C6E_F372, 0xA54F_F53A, 0x510E_527F, 0x9B05_688C, 0x1F83_D9AB, 0x5BE0_CD19)

    /// The message word schedule of the ten rounds (RFC 7693 section 2.7), row by row.
    private static let sigma: [UInt8] = [
        0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15,
        14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3,
        11, 8, 12, 0, 5, 2, 15, 13, 10, 14, 3, 6, 7, 1, 9, 4,
        7, 9, 3, 1, 13, 12, 11, 14, 2, 6, 5, 10, 4, 0, 15, 8,
        9, 0, 5, 7, 2, 4, 10, 15, 14, 1, 11, 12, 6, 8, 3, 13,
        2, 12, 6, 10, 0, 11, 8, 3, 4, 13, 7, 5, 15, 14, 1, 9,
        12, 5, 1, 15, 14, 13, 4, 10, 0, 7, 6, 3, 9, 2, 8, 11,
        13, 11, 7, 14, 12, 1, 3, 9, 5, 0, 15, 4, 8, 6, 2, 10,
        6, 15, 14, 9, 11, 3, 0, 8, 12, 2, 13, 7, 1, 4, 10, 5,
        10, 2, 8, 4, 7, 6, 1, 5, 15, 11, 9, 14, 3, 12, 13, 0,
    ]

    /// Starts a hash of `outputLength` bytes (1...32), keyed when `key` is not empty (at most 32 bytes).
    public init(outputLength: Int = 32, key: [UInt8] = []) {
        precondition((1...Self.maximumOutputLength).contains(outputLength), "BLAKE2s output length must be 1...32")
        precondition(key.count <= Self.maximumOutputLength, "BLAKE2s key must be at most 32 bytes")
        self.outputLength = outputLength
        state = Self.iv
        // Parameter block word 0: digest length, key length, fanout 1, depth 1.
        state.0 ^= 0x0101_0000 ^ (UInt32(key.count) << 8) ^ UInt32(outputLength)
        buffer = (0, 0, 0, 0, 0, 0, 0, 0)
        if !key.isEmpty {
            // The key, zero-padded to a full block, is the first block of input.
            withUnsafeMutableBytes(of: &buffer) { raw in
                key.withUnsafeBytes { raw.baseAddress!.copyMemory(from: $0.baseAddress!, byteCount: key.count) }
            }
            bufferCount = Self.blockLength
        }
    }

    /// Absorbs `bytes`.
    public mutating func update(_ bytes: UnsafeRawBufferPointer) {
        guard var input = bytes.baseAddress else { return }
        var remaining = bytes.count
        while remaining > 0 {
            if bufferCount == Self.blockLength {
                // More input follows, so the buffered block is not the last one.
                compressedCount &+= UInt64(Self.blockLength)
                compressBuffer(isLast: false)
                bufferCount = 0
            }
            if bufferCount == 0 && remaining > Self.blockLength {
                compressedCount &+= UInt64(Self.blockLength)
                compress(block: input, isLast: false)
                input += Self.blockLength
                remaining -= Self.blockLength
                continue
            }
            let take = min(Self.blockLength - bufferCount, remaining)
            let offset = bufferCount
            withUnsafeMutableBytes(of: &buffer) { raw in
                (raw.baseAddress! + offset).copyMemory(from: input, byteCount: take)
            }
            bufferCount += take
            input += take
            remaining -= take
        }
    }

    /// Absorbs `bytes`.
    public mutating func update(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { update($0) }
    }

    /// Finishes the hash and returns the `outputLength`-byte digest. The value must not be updated
    /// or finalised again afterwards.
    public mutating func finalize() -> [UInt8] {
        [UInt8](unsafeUninitializedCapacity: outputLength) { out, initialized in
            finalize(into: UnsafeMutableRawPointer(out.baseAddress!))
            initialized = outputLength
        }
    }

    /// Finishes the hash and writes the `outputLength`-byte digest to `out`, allocating nothing.
    public mutating func finalize(into out: UnsafeMutableRawPointer) {
        compressedCount &+= UInt64(bufferCount)
        let used = bufferCount
        withUnsafeMutableBytes(of: &buffer) { raw in
            _ = (raw.baseAddress! + used).initializeMemory(as: UInt8.self, repeating: 0, count: Self.blockLength - used)
        }
        compressBuffer(isLast: true)
        bufferCount = 0
        var words = state
        withUnsafeBytes(of: words) { raw in
            // The digest is h in little-endian byte order, truncated.
            for i in 0..<outputLength {
                let word = raw.load(fromByteOffset: (i / 4) * 4, as: UInt32.self)
                out.storeBytes(of: UInt8(truncatingIfNeeded: word >> (8 * UInt32(i % 4))), toByteOffset: i, as: UInt8.self)
            }
        }
        // The buffer held the last input (a key, a preshared key) and the state is a keyed hash's:
        // neither is left behind where the hasher lived (sodium_memzero, not optimised away).
        withUnsafeMutableBytes(of: &words) { sodium_memzero($0.baseAddress!, $0.count) }
        withUnsafeMutableBytes(of: &buffer) { sodium_memzero($0.baseAddress!, $0.count) }
        withUnsafeMutableBytes(of: &state) { sodium_memzero($0.baseAddress!, $0.count) }
    }

    /// One-shot hash of the concatenation of `parts`.
    public static func hash(_ parts: [UInt8]..., outputLength: Int = 32, key: [UInt8] = []) -> [UInt8] {
        var hasher = BLAKE2s(outputLength: outputLength, key: key)
        for part in parts { hasher.update(part) }
        return hasher.finalize()
    }

    private mutating func compressBuffer(isLast: Bool) {
        var copy = buffer
        withUnsafeBytes(of: copy) { compress(block: $0.baseAddress!, isLast: isLast) }
        withUnsafeMutableBytes(of: &copy) { sodium_memzero($0.baseAddress!, $0.count) }
    }

    /// The compression function F (RFC 7693 section 3.2) over one 64-byte block at `block`.
    private mutating func compress(block: UnsafeRawPointer, isLast: Bool) {
        let counter = compressedCount
        withUnsafeTemporaryAllocation(of: UInt32.self, capacity: 32) { scratch in
            let v = scratch.baseAddress!
            let m = v + 16
            for i in 0..<16 {
                m[i] = UInt32(littleEndian: block.loadUnaligned(fromByteOffset: 4 * i, as: UInt32.self))
            }
            withUnsafeBytes(of: state) { h in
                for i in 0..<8 { v[i] = h.load(fromByteOffset: 4 * i, as: UInt32.self) }
            }
            withUnsafeBytes(of: Self.iv) { iv in
                for i in 0..<8 { v[8 + i] = iv.load(fromByteOffset: 4 * i, as: UInt32.self) }
            }
            v[12] ^= UInt32(truncatingIfNeeded: counter)
            v[13] ^= UInt32(truncatingIfNeeded: counter >> 32)
            if isLast { v[14] = ~v[14] }

            Self.sigma.withUnsafeBufferPointer { sigma in
                for round in 0..<10 {
                    let s = sigma.baseAddress! + 16 * round
                    Self.mix(v, 0, 4, 8, 12, m[Int(s[0])], m[Int(s[1])])
                    Self.mix(v, 1, 5, 9, 13, m[Int(s[2])], m[Int(s[3])])
                    Self.mix(v, 2, 6, 10, 14, m[Int(s[4])], m[Int(s[5])])
                    Self.mix(v, 3, 7, 11, 15, m[Int(s[6])], m[Int(s[7])])
                    Self.mix(v, 0, 5, 10, 15, m[Int(s[8])], m[Int(s[9])])
                    Self.mix(v, 1, 6, 11, 12, m[Int(s[10])], m[Int(s[11])])
                    Self.mix(v, 2, 7, 8, 13, m[Int(s[12])], m[Int(s[13])])
                    Self.mix(v, 3, 4, 9, 14, m[Int(s[14])], m[Int(s[15])])
                }
            }

            withUnsafeMutableBytes(of: &state) { h in
                for i in 0..<8 {
                    let old = h.load(fromByteOffset: 4 * i, as: UInt32.self)
                    h.storeBytes(of: old ^ v[i] ^ v[i + 8], toByteOffset: 4 * i, as: UInt32.self)
                }
            }
            // The work vector and message words held input and key material.
            scratch.initialize(repeating: 0)
        }
    }

    /// The mixing function G (RFC 7693 section 3.1) with BLAKE2s's rotations 16, 12, 8, 7.
    @inline(__always)
    private static func mix(_ v: UnsafeMutablePointer<UInt32>, _ a: Int, _ b: Int, _ c: Int, _ d: Int,
                            _ x: UInt32, _ y: UInt32) {
        v[a] = v[a] &+ v[b] &+ x
        v[d] = rotateRight(v[d] ^ v[a], 16)
        v[c] = v[c] &+ v[d]
        v[b] = rotateRight(v[b] ^ v[c], 12)
        v[a] = v[a] &+ v[b] &+ y
        v[d] = rotateRight(v[d] ^ v[a], 8)
        v[c] = v[c] &+ v[d]
        v[b] = rotateRight(v[b] ^ v[c], 7)
    }

    @inline(__always)
    private static func rotateRight(_ x: UInt32, _ n: UInt32) -> UInt32 {
        (x >> n) | (x << (32 - n))
    }
}
