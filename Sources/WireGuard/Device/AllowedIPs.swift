import TunnelgateSettings

/// Cryptokey routing (whitepaper §2): which peer a destination goes to, and
/// which peer may send from a source. Longest prefix wins; a prefix belongs
/// to one peer at most (giving it to another moves it, as `wg set` does).
///
/// Held per family as arrays sorted longest-first, compared as integers:
/// the lookup is a scan without allocation. Tunnels have few prefixes; the
/// table is rebuilt only when configuration changes.
struct AllowedIPs {
    private struct Entry4 { var network: UInt32; var mask: UInt32; var length: Int; var peer: Int }
    private struct Entry6 { var high: UInt64; var low: UInt64; var maskHigh: UInt64; var maskLow: UInt64; var length: Int; var peer: Int }
    private var v4: [Entry4] = []
    private var v6: [Entry6] = []

    var isEmpty: Bool { v4.isEmpty && v6.isEmpty }

    /// Gives `prefix` to `peer`, taking it from any other peer.
    mutating func insert(_ prefix: IPPrefix, peer: Int) {
        remove(prefix)
        switch prefix.network.address {
        case .v4(let a):
            let mask: UInt32 = prefix.length == 0 ? 0 : ~0 << (32 - prefix.length)
            v4.append(Entry4(network: a.value, mask: mask, length: prefix.length, peer: peer))
            v4.sort { $0.length > $1.length }
        case .v6(let a):
            let mh: UInt64 = prefix.length == 0 ? 0 : (prefix.length >= 64 ? ~0 : ~0 << (64 - prefix.length))
            let ml: UInt64 = prefix.length <= 64 ? 0 : (prefix.length == 128 ? ~0 : ~0 << (128 - prefix.length))
            v6.append(Entry6(high: a.high, low: a.low, maskHigh: mh, maskLow: ml, length: prefix.length, peer: peer))
            v6.sort { $0.length > $1.length }
        }
    }

    mutating func remove(_ prefix: IPPrefix) {
        switch prefix.network.address {
        case .v4(let a): v4.removeAll { $0.network == a.value && $0.length == prefix.length }
        case .v6(let a): v6.removeAll { $0.high == a.high && $0.low == a.low && $0.length == prefix.length }
        }
    }

    /// Removes `prefix` if it is `peer`'s; another peer's prefix of that value stays (as
    /// wireguard-go's and the kernel's removal of one allowed IP do).
    mutating func remove(_ prefix: IPPrefix, peer: Int) {
        let prefix = prefix.network
        switch prefix.address {
        case .v4(let a): v4.removeAll { $0.network == a.value && $0.length == prefix.length && $0.peer == peer }
        case .v6(let a): v6.removeAll { $0.high == a.high && $0.low == a.low && $0.length == prefix.length && $0.peer == peer }
        }
    }

    mutating func removeAll(peer: Int) {
        v4.removeAll { $0.peer == peer }
        v6.removeAll { $0.peer == peer }
    }

    /// The prefixes of `peer`, for `wg show` (longest first, as stored).
    func prefixes(of peer: Int) -> [IPPrefix] {
        v4.filter { $0.peer == peer }.map { IPPrefix(address: .v4(IPv4Address($0.network)), length: $0.length)! }
            + v6.filter { $0.peer == peer }.map { IPPrefix(address: .v6(IPv6Address(high: $0.high, low: $0.low)), length: $0.length)! }
    }

    func lookup(v4 address: UInt32) -> Int? {
        for e in v4 where address & e.mask == e.network { return e.peer }
        return nil
    }

    func lookup(v6 high: UInt64, _ low: UInt64) -> Int? {
        for e in v6 where high & e.maskHigh == e.high && low & e.maskLow == e.low { return e.peer }
        return nil
    }

    /// The peer for the destination (`source == false`) or source address of
    /// an IP packet; nil when no prefix holds it or the packet is too short.
    func lookup(packet p: UnsafeRawBufferPointer, source: Bool) -> Int? {
        guard p.count >= 1 else { return nil }
        switch p[0] >> 4 {
        case 4:
            guard p.count >= 20 else { return nil }
            return lookup(v4: UInt32(bigEndian: p.loadUnaligned(fromByteOffset: source ? 12 : 16, as: UInt32.self)))
        case 6:
            guard p.count >= 40 else { return nil }
            let offset = source ? 8 : 24
            return lookup(v6: UInt64(bigEndian: p.loadUnaligned(fromByteOffset: offset, as: UInt64.self)),
                          UInt64(bigEndian: p.loadUnaligned(fromByteOffset: offset + 8, as: UInt64.self)))
        default:
            return nil
        }
    }

    func lookup(_ address: IPAddress) -> Int? {
        switch address {
        case .v4(let a): lookup(v4: a.value)
        case .v6(let a): lookup(v6: a.high, a.low)
        }
    }
}
