import TunnelgateSettings
@testable import WireGuard
import XCTest

/// Cryptokey routing (whitepaper §2): longest prefix wins in both families, a prefix belongs to one
/// peer, and packets are looked up by destination (sending) or source (receiving).
final class AllowedIPsTests: XCTestCase {
    func table(_ entries: [(String, Int)]) -> AllowedIPs {
        var t = AllowedIPs()
        for (prefix, peer) in entries { t.insert(IPPrefix(prefix)!, peer: peer) }
        return t
    }

    func lookup(_ t: AllowedIPs, _ address: String) -> Int? { t.lookup(IPAddress(address)!) }

    func testLongestPrefixIPv4() {
        // Inserted shortest-first and mixed, to show the order of insertion does not matter.
        let t = table([("0.0.0.0/0", 0), ("10.1.2.3/32", 3), ("10.0.0.0/8", 1), ("10.1.0.0/16", 2), ("10.1.2.0/31", 4)])
        XCTAssertEqual(lookup(t, "192.0.2.1"), 0)
        XCTAssertEqual(lookup(t, "10.200.0.1"), 1)
        XCTAssertEqual(lookup(t, "10.1.255.255"), 2)
        XCTAssertEqual(lookup(t, "10.1.2.3"), 3)
        XCTAssertEqual(lookup(t, "10.1.2.1"), 4)
        XCTAssertEqual(lookup(t, "10.1.2.2"), 2, "just outside the /31")
        XCTAssertEqual(lookup(t, "2001:db8::1"), nil, "no IPv6 prefix")
        XCTAssertEqual(lookup(table([("10.0.0.0/8", 1)]), "11.0.0.0"), nil)
    }

    func testLongestPrefixIPv6AcrossTheHalves() {
        let t = table([("::/0", 0), ("2001:db8::/32", 1), ("2001:db8:0:1::/64", 2), ("2001:db8:0:1:8000::/65", 3),
                       ("2001:db8:0:1::4/127", 4), ("2001:db8:0:1::5/128", 5)])
        XCTAssertEqual(lookup(t, "fe80::1"), 0)
        XCTAssertEqual(lookup(t, "2001:db8:ffff::1"), 1)
        XCTAssertEqual(lookup(t, "2001:db8:0:1::1"), 2)
        XCTAssertEqual(lookup(t, "2001:db8:0:1:8000::1"), 3)
        XCTAssertEqual(lookup(t, "2001:db8:0:1::4"), 4)
        XCTAssertEqual(lookup(t, "2001:db8:0:1::5"), 5)
        XCTAssertEqual(lookup(t, "2001:db8:0:1::6"), 2)
        XCTAssertEqual(lookup(t, "10.0.0.1"), nil, "no IPv4 prefix")
    }

    /// Giving a prefix to another peer moves it, as `wg set wg0 peer B allowed-ips ...` does.
    func testMovingAPrefixBetweenPeers() {
        var t = table([("10.0.0.0/8", 1), ("fd00::/8", 1), ("10.0.0.0/16", 1)])
        t.insert(IPPrefix("10.0.0.0/8")!, peer: 2)
        XCTAssertEqual(lookup(t, "10.9.0.1"), 2)
        XCTAssertEqual(lookup(t, "10.0.0.1"), 1, "the longer prefix stayed")
        XCTAssertEqual(Set(t.prefixes(of: 1)), [IPPrefix("10.0.0.0/16")!, IPPrefix("fd00::/8")!])
        XCTAssertEqual(t.prefixes(of: 2), [IPPrefix("10.0.0.0/8")!])
    }

    func testRemoveAllOfAPeerAndRemoveOnePrefix() {
        var t = table([("10.0.0.0/8", 1), ("fd00::/8", 1), ("10.1.0.0/16", 2), ("0.0.0.0/0", 3)])
        t.removeAll(peer: 1)
        XCTAssertEqual(t.prefixes(of: 1), [])
        XCTAssertEqual(lookup(t, "10.9.0.1"), 3)
        XCTAssertEqual(lookup(t, "10.1.0.1"), 2)
        XCTAssertEqual(lookup(t, "fd00::1"), nil)
        t.remove(IPPrefix("10.1.0.0/16")!)
        XCTAssertEqual(lookup(t, "10.1.0.1"), 3)
        t.removeAll(peer: 3)
        XCTAssertTrue(t.isEmpty)
    }

    /// A prefix with host bits set stands for its network, as in wireguard-go's trie.
    func testHostBitsAreCleared() {
        var t = table([("10.1.2.3/8", 1)])
        XCTAssertEqual(lookup(t, "10.200.0.1"), 1)
        XCTAssertEqual(t.prefixes(of: 1), [IPPrefix("10.0.0.0/8")!])
        t.remove(IPPrefix("10.9.9.9/8")!)
        XCTAssertTrue(t.isEmpty)
    }

    // MARK: Packets

    static func ipv4Packet(source: String, destination: String) -> [UInt8] {
        var p: [UInt8] = [0x45, 0, 0, 20, 0, 0, 0, 0, 64, 17, 0, 0]
        p += IPAddress(source)!.bytes + IPAddress(destination)!.bytes
        return p
    }

    static func ipv6Packet(source: String, destination: String) -> [UInt8] {
        var p: [UInt8] = [0x60, 0, 0, 0, 0, 0, 17, 64]
        p += IPAddress(source)!.bytes + IPAddress(destination)!.bytes
        return p
    }

    func testLookupFromPacketsBySourceAndDestination() {
        let t = table([("10.0.0.2/32", 1), ("10.9.0.0/16", 2), ("fd00::2/128", 3), ("fd09::/16", 4)])
        let v4 = Self.ipv4Packet(source: "10.0.0.2", destination: "10.9.1.1")
        XCTAssertEqual(v4.withUnsafeBytes { t.lookup(packet: $0, source: true) }, 1)
        XCTAssertEqual(v4.withUnsafeBytes { t.lookup(packet: $0, source: false) }, 2)
        let v6 = Self.ipv6Packet(source: "fd00::2", destination: "fd09::1")
        XCTAssertEqual(v6.withUnsafeBytes { t.lookup(packet: $0, source: true) }, 3)
        XCTAssertEqual(v6.withUnsafeBytes { t.lookup(packet: $0, source: false) }, 4)
        // A packet with a payload behind the header reads the same.
        let longer = v4 + [UInt8](repeating: 0xEE, count: 1_000)
        XCTAssertEqual(longer.withUnsafeBytes { t.lookup(packet: $0, source: false) }, 2)
        // Nobody's address: nil.
        let stranger = Self.ipv4Packet(source: "192.0.2.1", destination: "192.0.2.2")
        XCTAssertNil(stranger.withUnsafeBytes { t.lookup(packet: $0, source: true) })
    }

    func testTruncatedAndForeignPacketsGiveNil() {
        let t = table([("0.0.0.0/0", 1), ("::/0", 2)])
        let v4 = Self.ipv4Packet(source: "10.0.0.2", destination: "10.9.1.1")
        let v6 = Self.ipv6Packet(source: "fd00::2", destination: "fd09::1")
        for source in [true, false] {
            XCTAssertNil(Array(v4.prefix(19)).withUnsafeBytes { t.lookup(packet: $0, source: source) })
            XCTAssertNil(Array(v6.prefix(39)).withUnsafeBytes { t.lookup(packet: $0, source: source) })
            XCTAssertNil([UInt8]().withUnsafeBytes { t.lookup(packet: $0, source: source) })
            XCTAssertNil(t.lookup(packet: UnsafeRawBufferPointer(start: nil, count: 0), source: source))
            // Version nibbles other than 4 and 6.
            for version: UInt8 in [0, 5, 7, 15] {
                var p = v6
                p[0] = version << 4
                XCTAssertNil(p.withUnsafeBytes { t.lookup(packet: $0, source: source) }, "version \(version)")
            }
            // Exactly the header is enough.
            XCTAssertEqual(v4.withUnsafeBytes { t.lookup(packet: $0, source: source) }, 1)
            XCTAssertEqual(v6.withUnsafeBytes { t.lookup(packet: $0, source: source) }, 2)
            // A 40-byte packet that says IPv4 is read as IPv4.
            var mislabelled = v6
            mislabelled[0] = 0x45
            XCTAssertEqual(mislabelled.withUnsafeBytes { t.lookup(packet: $0, source: source) }, 1)
        }
    }

    /// Removing one prefix (`allowed_ip=-PREFIX`) takes it from its own peer only; the lookup then
    /// falls back to the next longest prefix.
    func testRemovingOnePrefixTakesItFromItsOwnPeerOnly() {
        var t = AllowedIPs()
        t.insert(IPPrefix("10.0.0.0/8")!, peer: 1)
        t.insert(IPPrefix("10.1.0.0/16")!, peer: 2)
        t.insert(IPPrefix("fd00::/64")!, peer: 2)
        t.remove(IPPrefix("10.1.0.0/16")!, peer: 1)
        XCTAssertEqual(t.lookup(IPAddress("10.1.2.3")!), 2, "another peer's removal leaves it")
        t.remove(IPPrefix("10.1.9.9/16")!, peer: 2)
        XCTAssertEqual(t.lookup(IPAddress("10.1.2.3")!), 1, "gone: the /8 answers")
        XCTAssertEqual(t.prefixes(of: 2), [IPPrefix("fd00::/64")!])
        t.remove(IPPrefix("fd00::/64")!, peer: 2)
        XCTAssertNil(t.lookup(IPAddress("fd00::1")!))
        XCTAssertEqual(t.prefixes(of: 1), [IPPrefix("10.0.0.0/8")!])
    }
}
