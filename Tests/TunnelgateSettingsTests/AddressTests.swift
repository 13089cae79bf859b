import XCTest
@testable import TunnelgateSettings

final class AddressTests: XCTestCase {
    func testIPv4ParsesDottedQuadOnly() {
        XCTAssertEqual(IPv4Address("10.1.2.3")?.value, 0x0a01_0203)
        XCTAssertEqual(IPv4Address("255.255.255.255")?.value, .max)
        for bad in ["10.1.2", "10.1.2.3.4", "256.1.1.1", "01.1.1.1", "1..1.1", "a.b.c.d", "", " 1.1.1.1", "1.1.1.1/8"] {
            XCTAssertNil(IPv4Address(bad), bad)
        }
    }

    func testIPv6FormatsCanonically() {
        let cases = [
            ("2001:DB8:0:0:0:0:0:1", "2001:db8::1"),
            ("::", "::"),
            ("::1", "::1"),
            ("fd00:8::2", "fd00:8::2"),
            ("2001:db8:0:0:1:0:0:1", "2001:db8::1:0:0:1"),   // first of two equal runs
            ("2001:0:0:1:0:0:0:1", "2001:0:0:1::1"),         // the longest run
            ("2001:db8:1:1:1:1:1:1", "2001:db8:1:1:1:1:1:1"),
            ("2001:db8::1:2:3:4:5", "2001:db8:0:1:2:3:4:5"), // a single zero group is not compressed
            ("::ffff:198.18.0.1", "::ffff:c612:1"),
        ]
        for (input, expected) in cases {
            XCTAssertEqual(IPv6Address(input)?.description, expected, input)
        }
        for bad in [":::", "1::2::3", "12345::", "1:2:3:4:5:6:7:8:9", "1:2:3:4:5:6:7", "g::1", "::1%eth0", ""] {
            XCTAssertNil(IPv6Address(bad), bad)
        }
    }

    func testBytesRoundTrip() {
        let a = IPv6Address("2001:db8::a:b")!
        XCTAssertEqual(IPv6Address(bytes: a.bytes), a)
        XCTAssertEqual(IPv4Address(bytes: [198, 18, 0, 1]).description, "198.18.0.1")
    }

    func testPrefixes() throws {
        let p = try XCTUnwrap(IPPrefix("10.0.0.0/8"))
        XCTAssertTrue(p.contains(IPAddress("10.255.0.1")!))
        XCTAssertFalse(p.contains(IPAddress("11.0.0.1")!))
        XCTAssertTrue(p.contains(IPPrefix("10.1.0.0/16")!))
        XCTAssertFalse(IPPrefix("10.1.0.0/16")!.contains(p))
        XCTAssertFalse(IPPrefix("10.1.2.3/8")!.isCanonical)
        XCTAssertEqual(IPPrefix("10.1.2.3/8")!.network.description, "10.0.0.0/8")
        XCTAssertEqual(IPPrefix("2001:db8::1/32")!.network.description, "2001:db8::/32")
        XCTAssertEqual(IPPrefix("198.18.0.1")?.length, 32)
        XCTAssertEqual(IPPrefix("::1")?.length, 128)
        XCTAssertNil(IPPrefix("10.0.0.0/33"))
        XCTAssertNil(IPPrefix("::/129"))
        XCTAssertNil(IPPrefix("10.0.0.0/-1"))
        XCTAssertTrue(IPPrefix("::/0")!.contains(IPAddress("2001:db8::1")!))
        XCTAssertFalse(IPPrefix("::/0")!.contains(IPAddress("10.0.0.1")!))
    }

    func testMaskLength() {
        XCTAssertEqual(IPv4Address("255.255.255.0")?.maskLength, 24)
        XCTAssertEqual(IPv4Address("0.0.0.0")?.maskLength, 0)
        XCTAssertEqual(IPv4Address("255.255.255.255")?.maskLength, 32)
        XCTAssertNil(IPv4Address("255.0.255.0")?.maskLength)
        XCTAssertNil(IPv4Address("0.255.255.255")?.maskLength)
        XCTAssertEqual(IPv4Address(maskLength: 20).description, "255.255.240.0")
    }

    func testCarrierEndpointForms() {
        func parse(_ s: String) -> CarrierEndpoint? { try? CarrierEndpoint.parse(s).get() }
        XCTAssertEqual(parse("198.18.0.10"), CarrierEndpoint(host: .address(IPAddress("198.18.0.10")!)))
        XCTAssertEqual(parse("198.18.0.10:51820"), CarrierEndpoint(host: .address(IPAddress("198.18.0.10")!), port: 51820))
        XCTAssertEqual(parse("[2001:db8::1]:443"), CarrierEndpoint(host: .address(IPAddress("2001:db8::1")!), port: 443))
        XCTAssertEqual(parse("2001:db8::1"), CarrierEndpoint(host: .address(IPAddress("2001:db8::1")!)))
        XCTAssertEqual(parse("VPN.example.com:8443"), CarrierEndpoint(host: .name("vpn.example.com"), port: 8443))
        XCTAssertNil(parse("vpn.example.com:0"))
        XCTAssertNil(parse("vpn.example.com:70000"))
        XCTAssertNil(parse("2001:db8::1:443:x"))
        XCTAssertNil(parse("bad_host!"))
        XCTAssertNil(parse("300.1.1.1"))
    }

    func testInterfaceNames() {
        XCTAssertNil(InterfaceName.problem("tg0"))
        XCTAssertNil(InterfaceName.problem("wg-home.1"))
        XCTAssertNotNil(InterfaceName.problem(""))
        XCTAssertNotNil(InterfaceName.problem("this-name-is-way-too-long"))
        XCTAssertNotNil(InterfaceName.problem("a/b"))
        XCTAssertNotNil(InterfaceName.problem("a:b"))
        XCTAssertNotNil(InterfaceName.problem("a b"))
        XCTAssertNotNil(InterfaceName.problem(".."))
        XCTAssertNil(InterfaceName.problem("fifteen-chars15"))
        XCTAssertNotNil(InterfaceName.problem("sixteen-chars-16"))
    }
}
