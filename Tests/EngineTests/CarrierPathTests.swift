import Session
import Engine
import Glibc
import LinuxSystem
@testable import Netlink
import TunnelgateSettings
import XCTest

/// The carrier-path verdict and the status it makes, as pure functions of the kernel's answers.
final class CarrierPathTests: XCTestCase {
    static let carrier4 = IPAddress("192.168.231.2")!
    static let carrier6 = IPAddress("2001:db8:18::10")!
    /// IFF_UP | IFF_RUNNING | IFF_LOWER_UP.
    static let healthy: UInt32 = 0x1 | 0x40 | 0x1_0000

    static func eth0(flags: UInt32 = healthy) -> LinkInfo {
        LinkInfo(index: 2, name: "eth0", mtu: 1500, flags: flags, kind: "veth", statistics: nil)
    }

    static func refused(_ code: Int32) -> Result<RouteLookup, NetlinkError> {
        .failure(NetlinkError(operation: "ip -4 route get 192.168.231.2 mark 0x1d24 ipproto udp", errno: Errno(rawValue: code)))
    }

    static func found(_ destination: IPAddress = CarrierPathTests.carrier4, kind: RouteLookup.Kind = .unicast, oif: Int32? = 2,
                      source: IPAddress? = IPAddress("10.231.0.2")) -> Result<RouteLookup, NetlinkError> {
        .success(RouteLookup(destination: destination, kind: kind, outputInterface: oif,
                             gateway: IPAddress("10.231.0.1"), preferredSource: source))
    }

    func testRefusedLookupsSayWhichRoute() {
        let cases: [(Int32, String)] = [(ENETUNREACH, "no route"), (EHOSTUNREACH, "unreachable route"),
                                        (EINVAL, "blackhole route"), (EACCES, "prohibit route")]
        for (code, reason) in cases {
            XCTAssertEqual(CarrierPath.judge(Self.refused(code), link: nil, tunnelInterface: 5), .gone(reason))
        }
        // A request the kernel finds malformed is no blackhole: it says why.
        let malformed = NetlinkError(operation: "ip -6 route get 2001:db8:18::10 ipproto udp", errno: Errno(rawValue: EINVAL),
                                     kernelMessage: "ipv6: Invalid flags for get route request")
        XCTAssertEqual(CarrierPath.judge(.failure(malformed), link: nil, tunnelInterface: 5),
                       .gone("ip -6 route get 2001:db8:18::10 ipproto udp: Invalid argument (22) (kernel: ipv6: Invalid flags for get route request)"))
        // Anything else is reported as the request and its errno.
        XCTAssertEqual(CarrierPath.judge(Self.refused(ENOBUFS), link: nil, tunnelInterface: 5),
                       .gone("ip -4 route get 192.168.231.2 mark 0x1d24 ipproto udp: No buffer space available (105)"))
    }

    func testAHealthyRouteIsAPathViaItsLink() {
        XCTAssertEqual(CarrierPath.judge(Self.found(), link: Self.eth0(), tunnelInterface: 5), .present(via: "eth0"))
        XCTAssertEqual(CarrierPath.judge(Self.found(), link: Self.eth0(), tunnelInterface: nil), .present(via: "eth0"))
        // The endpoint is this host's own address: a local route, no source needed.
        let lo = LinkInfo(index: 1, name: "lo", mtu: 65536, flags: Self.healthy, kind: nil, statistics: nil)
        XCTAssertEqual(CarrierPath.judge(Self.found(kind: .local, oif: 1, source: nil), link: lo, tunnelInterface: 5),
                       .present(via: "lo"))
    }

    func testRoutesThatGoNowhere() {
        // IPv6 can answer with the route's type instead of an errno.
        for kind in [RouteLookup.Kind.blackhole, .unreachable, .prohibit] {
            XCTAssertEqual(CarrierPath.judge(Self.found(Self.carrier6, kind: kind), link: Self.eth0(), tunnelInterface: 5),
                           .gone("\(kind) route"))
        }
        XCTAssertEqual(CarrierPath.judge(Self.found(oif: nil), link: nil, tunnelInterface: 5),
                       .gone("a route without an output interface"))
        XCTAssertEqual(CarrierPath.judge(Self.found(oif: 7), link: nil, tunnelInterface: 5), .gone("its interface if7 is gone"))
    }

    func testARouteIntoTheTunnelItselfIsNoPath() {
        let tun = LinkInfo(index: 5, name: "tga", mtu: 1400, flags: Self.healthy, kind: "tun", statistics: nil)
        XCTAssertEqual(CarrierPath.judge(Self.found(oif: 5), link: tun, tunnelInterface: 5),
                       .gone("routed into the tunnel itself (tga)"))
    }

    func testTheLinkMustBeUpWithCarrierAndOperational() {
        XCTAssertEqual(CarrierPath.judge(Self.found(), link: Self.eth0(flags: 0x1_0000), tunnelInterface: 5), .gone("eth0 is down"))
        XCTAssertEqual(CarrierPath.judge(Self.found(), link: Self.eth0(flags: 0x1), tunnelInterface: 5), .gone("eth0 has no carrier"))
        XCTAssertEqual(CarrierPath.judge(Self.found(), link: Self.eth0(flags: 0x1 | 0x1_0000), tunnelInterface: 5),
                       .gone("eth0 is not operational"))
    }

    func testASourceAddressIsNeeded() {
        XCTAssertEqual(CarrierPath.judge(Self.found(source: nil), link: Self.eth0(), tunnelInterface: 5),
                       .gone("no source address on eth0"))
        // The global IPv6 address went; only the link-local one is left to send from.
        XCTAssertEqual(CarrierPath.judge(Self.found(Self.carrier6, source: IPAddress("fe80::1")), link: Self.eth0(), tunnelInterface: 5),
                       .gone("only a link-local source address on eth0"))
        XCTAssertEqual(CarrierPath.judge(Self.found(IPAddress("fe80::2")!, source: IPAddress("fe80::1")), link: Self.eth0(),
                                         tunnelInterface: 5), .present(via: "eth0"))
        XCTAssertEqual(CarrierPath.judge(Self.found(Self.carrier6, source: IPAddress("fd00:231::2")), link: Self.eth0(),
                                         tunnelInterface: 5), .present(via: "eth0"))
    }

    func testGoneOnlyWhenNoEndpointHasAPath() {
        XCTAssertFalse(CarrierPath.allGone([]), "no carrier endpoints: never gone")
        XCTAssertFalse(CarrierPath.allGone([.present(via: "eth0")]))
        XCTAssertFalse(CarrierPath.allGone([.gone("no route"), .present(via: "eth1")]), "one path left: not gone")
        XCTAssertTrue(CarrierPath.allGone([.gone("no route")]))
        XCTAssertTrue(CarrierPath.allGone([.gone("no route"), .gone("eth1 has no carrier")]))
    }

    func testStatusCombinesTheRuntimeAndTheCarrierPath() {
        XCTAssertEqual(CarrierPath.tunnelStatus(runtime: .connected, carrierPathGone: false), .connected)
        XCTAssertEqual(CarrierPath.tunnelStatus(runtime: .connected, carrierPathGone: true), .reasserting)
        // The runtime reconnecting is reasserting whatever the path says; connected again only when both are fine.
        XCTAssertEqual(CarrierPath.tunnelStatus(runtime: .reasserting, carrierPathGone: false), .reasserting)
        XCTAssertEqual(CarrierPath.tunnelStatus(runtime: .reasserting, carrierPathGone: true), .reasserting)
        // Not yet connected, or going away: the runtime's status stands.
        XCTAssertEqual(CarrierPath.tunnelStatus(runtime: .connecting, carrierPathGone: true), .connecting)
        XCTAssertEqual(CarrierPath.tunnelStatus(runtime: .disconnecting, carrierPathGone: true), .disconnecting)
    }
}
