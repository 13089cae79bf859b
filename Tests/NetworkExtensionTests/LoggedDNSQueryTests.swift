@testable import NetworkExtension
import XCTest

/// The DNS watch's parsing of copied packets: the QNAME of a query to port 53 over UDP or TCP, in IPv4
/// or IPv6; nothing for anything else.
final class LoggedDNSQueryTests: XCTestCase {
    /// A query for `name` (one question, recursion desired).
    func message(_ name: String, flags: [UInt8] = [0x01, 0x00]) -> [UInt8] {
        var m: [UInt8] = [0x12, 0x34] + flags + [0, 1, 0, 0, 0, 0, 0, 0]
        for label in name.split(separator: ".") { m.append(UInt8(label.utf8.count)); m += Array(label.utf8) }
        return m + [0, 0, 1, 0, 1]
    }

    func ipv4(_ proto: UInt8, _ transport: [UInt8], fragment: [UInt8] = [0, 0]) -> [UInt8] {
        [0x45, 0, 0, 0, 0, 0] + fragment + [64, proto, 0, 0, 10, 0, 0, 2, 10, 0, 0, 1] + transport
    }

    func udp(_ payload: [UInt8], port: UInt8 = 53) -> [UInt8] { [0xc0, 0x00, 0, port, 0, 0, 0, 0] + payload }

    func testUDPAndTCPInIPv4AndIPv6() {
        XCTAssertEqual(LoggedDNSQuery.name(inPacket: ipv4(17, udp(message("Intranet.Corp.Example")))), "intranet.corp.example")
        let tcp: [UInt8] = [0xc0, 0x00, 0, 53] + [UInt8](repeating: 0, count: 8) + [0x50, 0x18, 0, 0, 0, 0, 0, 0]
        let m = message("a.example")
        XCTAssertEqual(LoggedDNSQuery.name(inPacket: ipv4(6, tcp + [0, UInt8(m.count)] + m)), "a.example")
        let v6: [UInt8] = [0x60, 0, 0, 0, 0, 0, 17, 64] + [UInt8](repeating: 0, count: 32)
        XCTAssertEqual(LoggedDNSQuery.name(inPacket: v6 + udp(message("b.example"))), "b.example")
    }

    func testWhatIsNotAQuery() {
        XCTAssertNil(LoggedDNSQuery.name(inPacket: ipv4(17, udp(message("a.example"), port: 54))), "another port")
        XCTAssertNil(LoggedDNSQuery.name(inPacket: ipv4(17, udp(message("a.example", flags: [0x81, 0x80])))), "a reply")
        XCTAssertNil(LoggedDNSQuery.name(inPacket: ipv4(17, udp(message("a.example")), fragment: [0x20, 0])), "a first fragment")
        XCTAssertNil(LoggedDNSQuery.name(inPacket: ipv4(17, udp(message("a.example")), fragment: [0, 8])), "a later fragment")
        let syn: [UInt8] = [0xc0, 0x00, 0, 53] + [UInt8](repeating: 0, count: 8) + [0x50, 0x02, 0, 0, 0, 0, 0, 0]
        XCTAssertNil(LoggedDNSQuery.name(inPacket: ipv4(6, syn)), "a TCP SYN")
        XCTAssertNil(LoggedDNSQuery.name(inPacket: ipv4(17, udp(message("we ird.example")))), "a label with a space")
        XCTAssertNil(LoggedDNSQuery.name(inPacket: ipv4(17, udp(Array(message("a.example").dropLast(6))))), "cut short")
        var compressed = message("a.example")
        compressed[12] = 0xc0
        XCTAssertNil(LoggedDNSQuery.name(inPacket: ipv4(17, udp(compressed))), "a compression pointer")
        XCTAssertNil(LoggedDNSQuery.name(inPacket: []))
    }

    /// The table: two rules, unmarked packets to port 53 logged to the group, no verdict, policy accept.
    func testTheWatchTableAltersNothing() {
        let table = TunnelgateOnDemandDNSWatch.rules
        XCTAssertEqual(table.name, "tunnelgate-on-demand")
        XCTAssertEqual(table.chains.count, 1)
        XCTAssertEqual(table.chains[0].policy, .accept)
        XCTAssertEqual(table.chains[0].hook, .output)
        XCTAssertEqual(table.chains[0].rules.map(\.verdict), [.next, .next])
        XCTAssertEqual(table.chains[0].rules.map(\.statements), [[.log(group: 7460, snaplen: 512)], [.log(group: 7460, snaplen: 512)]])
        XCTAssertEqual(table.chains[0].rules.map(\.matches.first), [.mark(0), .mark(0)])
    }
}
