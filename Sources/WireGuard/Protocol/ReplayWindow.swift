/// The receive-side replay protection of whitepaper 5.4.6: a sliding window over 64-bit
/// counters, a ring of 64-bit words as in RFC 6479, so moving the window forward clears whole
/// words instead of shifting bits.
///
/// Accepts any counter newer than the greatest accepted one and any older counter within
/// `windowSize` not seen before. The device checks `wouldAccept` before decrypting (cheap drop of
/// replays and stale packets) and calls `accept` only after the packet authenticated, so forged
/// packets never move the window.
public struct ReplayWindow: Sendable {
    /// Words in the ring; a power of two.
    private static let wordCount = 128
    private static let bitsPerWord: UInt64 = 64
    /// How far behind the greatest accepted counter a counter may be and still be accepted:
    /// the ring less one word (the one the newest counter is in may be partly ahead of it).
    public static let windowSize: UInt64 = UInt64(wordCount - 1) * bitsPerWord

    private var bitmap = [UInt64](repeating: 0, count: wordCount)
    /// One past the greatest accepted counter; 0 before the first.
    private var next: UInt64 = 0

    public init() {}

    /// The greatest counter accepted so far, nil before the first.
    public var greatestAccepted: UInt64? { next == 0 ? nil : next - 1 }

    /// True when `accept(counter)` would accept: below `rejectAfterMessages`, and either newer than
    /// anything accepted or within the window and not seen. Changes nothing.
    public func wouldAccept(_ counter: UInt64) -> Bool {
        guard counter < WireGuardProtocol.rejectAfterMessages else { return false }
        if counter >= next { return true }
        guard next - 1 - counter < Self.windowSize else { return false }
        let (word, bit) = Self.position(of: counter)
        return bitmap[word] & bit == 0
    }

    /// Records `counter` when `wouldAccept(counter)`; returns false (and changes nothing) otherwise.
    /// Call only for packets that authenticated.
    public mutating func accept(_ counter: UInt64) -> Bool {
        guard wouldAccept(counter) else { return false }
        if counter >= next {
            // Clear the words the window moves over; a jump past the whole ring clears all of them.
            let newBlock = counter / Self.bitsPerWord
            let oldBlock = next == 0 ? 0 : (next - 1) / Self.bitsPerWord
            let cleared = min(newBlock - oldBlock, UInt64(Self.wordCount))
            if cleared > 0 {
                for i in 1...cleared {
                    bitmap[Int((oldBlock &+ i) % UInt64(Self.wordCount))] = 0
                }
            }
            next = counter + 1
        }
        let (word, bit) = Self.position(of: counter)
        bitmap[word] |= bit
        return true
    }

    @inline(__always)
    private static func position(of counter: UInt64) -> (word: Int, bit: UInt64) {
        (Int((counter / bitsPerWord) % UInt64(wordCount)), 1 << (counter % bitsPerWord))
    }
}
