import Glibc
import TunnelgateSettings
@testable import WireGuard
import XCTest

/// Endpoints as the UAPI writes them (`1.2.3.4:51820`, `[2001:db8::1]:51820`) and as the kernel
/// reports them (sockaddr_in, sockaddr_in6, IPv4-mapped addresses folded to IPv4).
final class EndpointTests: XCTestCase {
    func testParseAndPrint() throws {
        let v4 = try XCTUnwrap(Endpoint("192.0.2.1:51820"))
        XCTAssertEqual(v4.address, .v4(IPv4Address("192.0.2.1")!))
        XCTAssertEqual(v4.port, 51_820)
        XCTAssertEqual(v4.description, "192.0.2.1:51820")
        XCTAssertEqual(v4.family, AF_INET)

        let v6 = try XCTUnwrap(Endpoint("[2001:DB8:0:0::1]:1"))
        XCTAssertEqual(v6.address, .v6(IPv6Address("2001:db8::1")!))
        XCTAssertEqual(v6.description, "[2001:db8::1]:1", "RFC 5952 form, bracketed")
        XCTAssertEqual(v6.family, AF_INET6)
        XCTAssertEqual(Endpoint(v6.description), v6)
        XCTAssertEqual(Endpoint("[::]:65535")?.description, "[::]:65535")
    }

    func testRefusesWhatIsNotALiteralAndAPort() {
        for text in ["192.0.2.1", "192.0.2.1:", ":51820", "192.0.2.1:0", "192.0.2.1:65536", "192.0.2.1:+80", "192.0.2.1:-1",
                     "192.0.2.1: 80", "192.0.2.1:0x50", "[2001:db8::1]51820", "[2001:db8::1]", "[2001:db8::1:51820",
                     "2001:db8::1:51820", "[192.0.2.1]:5", "vpn.example.com:51820", "[fe80::1%eth0]:51820",
                     "192.0.2.256:1", "", "[]:1"] {
            XCTAssertNil(Endpoint(text), text)
        }
    }

    /// The text form folds an IPv4-mapped address like the sockaddr form, so a peer configured
    /// as [::ffff:a.b.c.d] is the peer whose packets come from a.b.c.d.
    func testMappedTextIsFoldedToIPv4() throws {
        let e = try XCTUnwrap(Endpoint("[::ffff:192.0.2.9]:9"))
        XCTAssertEqual(e, Endpoint(address: .v4(IPv4Address("192.0.2.9")!), port: 9))
        XCTAssertEqual(e.description, "192.0.2.9:9")
    }

    func endpoint(sin6 address: [UInt8], port: UInt16) -> Endpoint? {
        var storage = sockaddr_storage()
        withUnsafeMutableBytes(of: &storage) { raw in
            var sin6 = sockaddr_in6()
            sin6.sin6_family = sa_family_t(AF_INET6)
            sin6.sin6_port = port.bigEndian
            withUnsafeMutableBytes(of: &sin6.sin6_addr) { $0.copyBytes(from: address) }
            raw.storeBytes(of: sin6, as: sockaddr_in6.self)
        }
        return withUnsafePointer(to: &storage) { Endpoint(socketAddress: $0) }
    }

    func testFromSockaddrIn6FoldsMappedAddresses() throws {
        let mapped = [UInt8](repeating: 0, count: 10) + [0xff, 0xff, 192, 0, 2, 1]
        XCTAssertEqual(endpoint(sin6: mapped, port: 51_820), Endpoint(address: .v4(IPv4Address("192.0.2.1")!), port: 51_820))
        // Not mapped: ::192.0.2.1 (IPv4-compatible, deprecated) and 64:ff9b::192.0.2.1 (NAT64) stay IPv6.
        let compatible = [UInt8](repeating: 0, count: 12) + [192, 0, 2, 1]
        XCTAssertEqual(endpoint(sin6: compatible, port: 1)?.address, .v6(IPv6Address(bytes: compatible)))
        let nat64: [UInt8] = [0, 0x64, 0xff, 0x9b] + [UInt8](repeating: 0, count: 8) + [192, 0, 2, 1]
        XCTAssertEqual(endpoint(sin6: nat64, port: 1)?.address, .v6(IPv6Address("64:ff9b::c000:201")!))
        let plain = IPv6Address("2001:db8::7")!
        XCTAssertEqual(endpoint(sin6: plain.bytes, port: 4_500), Endpoint(address: .v6(plain), port: 4_500))
    }

    func testFromSockaddrInAndOtherFamilies() throws {
        var storage = sockaddr_storage()
        withUnsafeMutableBytes(of: &storage) { raw in
            var sin = sockaddr_in()
            sin.sin_family = sa_family_t(AF_INET)
            sin.sin_port = UInt16(53).bigEndian
            sin.sin_addr.s_addr = IPv4Address("198.51.100.7")!.value.bigEndian
            raw.storeBytes(of: sin, as: sockaddr_in.self)
        }
        XCTAssertEqual(withUnsafePointer(to: &storage) { Endpoint(socketAddress: $0) }, Endpoint("198.51.100.7:53"))
        storage.ss_family = sa_family_t(AF_UNIX)
        XCTAssertNil(withUnsafePointer(to: &storage) { Endpoint(socketAddress: $0) })
    }

    /// store(to:) gives the kernel the right family, length, address and port.
    func testSockaddrRoundTrip() throws {
        for text in ["192.0.2.1:51820", "[2001:db8::1]:4500", "255.255.255.255:65535", "[::1]:1"] {
            let e = try XCTUnwrap(Endpoint(text))
            var storage = sockaddr_storage()
            let length = withUnsafeMutableBytes(of: &storage) { e.store(to: $0.baseAddress!) }
            XCTAssertEqual(length, e.family == AF_INET ? MemoryLayout<sockaddr_in>.size : MemoryLayout<sockaddr_in6>.size)
            XCTAssertEqual(Int32(storage.ss_family), e.family)
            XCTAssertEqual(withUnsafePointer(to: &storage) { Endpoint(socketAddress: $0) }, e, text)
        }
    }

    func testCookieInputIsAddressThenPortBigEndian() throws {
        XCTAssertEqual(try XCTUnwrap(Endpoint("192.0.2.1:51820")).cookieInput, [192, 0, 2, 1, 0xca, 0x6c])
        XCTAssertEqual(try XCTUnwrap(Endpoint("[2001:db8::1]:1")).cookieInput, IPAddress("2001:db8::1")!.bytes + [0, 1])
    }
}
