/// A MeshGuard node's mesh IPv4 follows from its identity (its Ed25519
/// public key), so `ipv4Settings.addresses: ["auto"]` can put the node's own
/// mesh address on the TUN without anyone computing hashes by hand.
///
/// The derivation, as MeshGuard does it (src/wireguard/ip.zig,
/// deriveFromPubkey; read for the facts, written here from them):
/// h = BLAKE3-256(public key); the address is 10.99.a.b with a = h[0] and
/// b = h[1], where a = 0 becomes 1 and b = 0 becomes 1, b = 255 becomes 254.
/// So no derived address has 0 in its third octet (10.99.0.x is never a
/// node) and the last octet is never 0 or 255.
extension MeshRuntimeSettings {
    /// MeshGuard's default mesh network, 10.99.0.0/16.
    public static let meshNetwork = IPPrefix(address: .v4(IPv4Address(10 << 24 | 99 << 16)), length: 16)!

    /// The mesh IPv4 MeshGuard derives from a 32-byte identity.
    public static func meshIPv4(identity: [UInt8]) -> IPv4Address {
        precondition(identity.count == 32, "an identity is 32 bytes")
        let h = Blake3.hash(identity)
        let a = h[0] == 0 ? 1 : h[0]
        let b = h[1] == 0 ? 1 : h[1] == 255 ? 254 : h[1]
        return IPv4Address(bytes: [10, 99, a, b])
    }
}

/// BLAKE3 (default hash mode, 32-byte output) for inputs of up to one chunk
/// (1,024 bytes): enough for a 32-byte public key. Written from the BLAKE3
/// specification; checked against its test vectors in MeshRuntimeSettingsTests.
enum Blake3 {
    static let chunkLength = 1024
    private static let iv: [UInt32] = [0x6A09_E667, 0xBB67_AE85, 0x3C6E_F372, 0xA54F_F53A,
                                       0x510E_527F, 0x9B05_688C, 0x1F83_D9AB, 0x5BE0_CD19]
    private static let permutation = [2, 6, 3, 10, 7, 0, 4, 13, 1, 11, 12, 5, 9, 14, 15, 8]
    private static let chunkStart: UInt32 = 1, chunkEnd: UInt32 = 2, root: UInt32 = 8

    static func hash(_ input: [UInt8]) -> [UInt8] {
        precondition(input.count <= chunkLength, "this BLAKE3 hashes one chunk (1,024 bytes) at most")
        var cv = iv
        let blocks = max(1, (input.count + 63) / 64)
        var out: [UInt32] = []
        for b in 0..<blocks {
            let start = b * 64, end = min(start + 64, input.count)
            var m = [UInt32](repeating: 0, count: 16)
            for i in start..<end { m[(i - start) / 4] |= UInt32(input[i]) << (8 * UInt32((i - start) % 4)) }
            var flags: UInt32 = 0
            if b == 0 { flags |= chunkStart }
            if b == blocks - 1 { flags |= chunkEnd | root }
            out = compress(cv, m, blockLength: UInt32(end - start), flags: flags)
            cv = Array(out[0..<8])
        }
        return out[0..<8].flatMap { w in (0..<4).map { UInt8(truncatingIfNeeded: w >> (8 * UInt32($0))) } }
    }

    /// The compression function, chunk counter 0.
    private static func compress(_ cv: [UInt32], _ block: [UInt32], blockLength: UInt32, flags: UInt32) -> [UInt32] {
        var v = cv + iv[0..<4] + [0, 0, blockLength, flags]
        var m = block
        func g(_ a: Int, _ b: Int, _ c: Int, _ d: Int, _ x: UInt32, _ y: UInt32) {
            v[a] = v[a] &+ v[b] &+ x; v[d] = rotr(v[d] ^ v[a], 16)
            v[c] = v[c] &+ v[d];      v[b] = rotr(v[b] ^ v[c], 12)
            v[a] = v[a] &+ v[b] &+ y; v[d] = rotr(v[d] ^ v[a], 8)
            v[c] = v[c] &+ v[d];      v[b] = rotr(v[b] ^ v[c], 7)
        }
        for round in 0..<7 {
            g(0, 4, 8, 12, m[0], m[1]); g(1, 5, 9, 13, m[2], m[3])
            g(2, 6, 10, 14, m[4], m[5]); g(3, 7, 11, 15, m[6], m[7])
            g(0, 5, 10, 15, m[8], m[9]); g(1, 6, 11, 12, m[10], m[11])
            g(2, 7, 8, 13, m[12], m[13]); g(3, 4, 9, 14, m[14], m[15])
            if round < 6 { m = permutation.map { m[$0] } }
        }
        for i in 0..<8 { v[i] ^= v[i + 8]; v[i + 8] ^= cv[i] }
        return v
    }

    private static func rotr(_ x: UInt32, _ n: UInt32) -> UInt32 { x >> n | x << (32 - n) }
}
