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
    @inline(__always)
    public static func add(_ bytes: UnsafeRawBufferPointer, to sum: UInt64 = 0) -> UInt64 {
        guard let base = bytes.baseAddress else { return sum }
        let count = bytes.count
        var sum = sum
        var i = 0
        while i + 32 <= count {
            let a = base.loadUnaligned(fromByteOffset: i, as: UInt64.self)
            let b = base.loadUnaligned(fromByteOffset: i + 8, as: UInt64.self)
            let c = base.loadUnaligned(fromByteOffset: i + 16, as: UInt64.self)
            let d = base.loadUnaligned(fromByteOffset: i + 24, as: UInt64.self)
            sum = addCarrying(addCarrying(sum, a), b)
            sum = addCarrying(addCarrying(sum, c), d)
            i += 32
        }
        while i + 8 <= count {
            sum = addCarrying(sum, base.loadUnaligned(fromByteOffset: i, as: UInt64.self))
            i += 8
        }
        if i + 4 <= count {
            sum = addCarrying(sum, UInt64(base.loadUnaligned(fromByteOffset: i, as: UInt32.self)))
            i += 4
        }
        if i + 2 <= count {
            sum = addCarrying(sum, UInt64(base.loadUnaligned(fromByteOffset: i, as: UInt16.self)))
            i += 2
        }
        if i < count {
            let last = UInt64(base.load(fromByteOffset: i, as: UInt8.self))
            #if _endian(little)
            sum = addCarrying(sum, last)
            #else
            sum = addCarrying(sum, last << 8)
            #endif
        }
        return sum
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
