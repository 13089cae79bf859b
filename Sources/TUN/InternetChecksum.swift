import CInternetChecksum

/// The Internet checksum (RFC 1071): the one's-complement sum of 16-bit words, complemented.
///
/// Sums are kept unfolded in 64 bits with the end-around carry, over words loaded in the
/// machine's byte order: a one's-complement sum commutes with swapping the bytes of every word,
/// so storing the complemented fold in the machine's order gives the bytes a big-endian sum
/// would (RFC 1071 §2(B)). Every value added must be in the same native view: a field the wire
/// holds big-endian is added as `UInt16(x).bigEndian`.
public enum InternetChecksum {
    /// `sum` plus the bytes, as 16-bit words from the first byte on (an odd last byte is the high
    /// half of a word padded with zero). Chain calls only on pieces that start at an even offset.
    /// The loop is C's (CInternetChecksum): there the carry chain stays in the carry flag.
    @inline(__always)
    public static func add(_ bytes: UnsafeRawBufferPointer, to sum: UInt64 = 0) -> UInt64 {
        guard let base = bytes.baseAddress else { return sum }
        return tg_checksum_add(base, bytes.count, sum)
    }

    /// Copies `bytes` to `out` (`bytes.count` bytes there, not overlapping) and returns `sum` plus
    /// them, as `add` would: the copy and the sum in one pass.
    @inline(__always)
    public static func copy(_ bytes: UnsafeRawBufferPointer, to out: UnsafeMutableRawPointer, adding sum: UInt64 = 0) -> UInt64 {
        guard let base = bytes.baseAddress else { return sum }
        return tg_checksum_copy(out, base, bytes.count, sum)
    }

    /// `a + b` with the carry out of bit 63 added back in (one's-complement addition).
    @inline(__always)
    public static func addCarrying(_ a: UInt64, _ b: UInt64) -> UInt64 {
        let (s, carried) = a.addingReportingOverflow(b)
        return s &+ (carried ? 1 : 0)
    }

    /// The 16-bit one's-complement sum of an unfolded sum, in the machine's byte order.
    @inline(__always)
    public static func fold(_ sum: UInt64) -> UInt16 {
        var s = (sum >> 32) &+ (sum & 0xFFFF_FFFF)
        s = (s >> 32) &+ (s & 0xFFFF_FFFF)
        s = (s >> 16) &+ (s & 0xFFFF)
        s = (s >> 16) &+ (s & 0xFFFF)
        return UInt16(truncatingIfNeeded: s)
    }

    /// The checksum to store (in the machine's byte order) for an unfolded sum over everything it
    /// covers with the checksum field zero.
    @inline(__always)
    public static func checksum(_ sum: UInt64) -> UInt16 { ~fold(sum) }
}
