import XCTest
@testable import TunnelgateSettings

final class RoutingIntentTests: XCTestCase {
    func settings(included4: [String], excluded4: [String] = [], included6: [String] = [], excluded6: [String] = []) -> TunnelSettings {
        func routes(_ p: [String]) -> [Route] { p.map { Route(destination: IPPrefix($0)!) } }
        return TunnelSettings(
            tunnelRemoteAddress: "198.18.0.10",
            ipv4Settings: IPv4Settings(addresses: [IPv4Address("10.8.0.2")!], subnetMasks: [IPv4Address("255.255.255.0")!],
                                       includedRoutes: routes(included4), excludedRoutes: routes(excluded4)),
            ipv6Settings: IPv6Settings(addresses: [IPv6Address("fd00:8::2")!], networkPrefixLengths: [64],
                                       includedRoutes: routes(included6), excludedRoutes: routes(excluded6)))
    }

    func testExclusionWinsATieAndCarriersAreExcluded() {
        let s = settings(included4: ["0.0.0.0/0", "198.18.0.128/25", "10.1.0.0/16"],
                         excluded4: ["198.18.0.128/25", "10.0.0.0/8"])
        let intent = RoutingIntent(settings: s, carrierAddresses: [IPAddress("198.18.0.10")!, IPAddress("2001:db8::10")!])
        XCTAssertEqual(intent.ipv4.included.map(\.description), ["0.0.0.0/0", "10.1.0.0/16"])
        XCTAssertEqual(intent.ipv4.excluded.map(\.description), ["198.18.0.128/25", "10.0.0.0/8", "198.18.0.10/32"])
        XCTAssertEqual(intent.ipv4.carriers, [IPPrefix("198.18.0.10/32")!])
        // No IPv6 inclusions: IPv6 is not routed, so it needs no exclusions either.
        XCTAssertFalse(intent.ipv6.isActive)
        XCTAssertEqual(intent.ipv6.excluded, [])
    }

    func testCarrierThatIsAlsoIncludedStaysOff() {
        let s = settings(included4: ["198.18.0.10/32"], included6: ["::/0"])
        let intent = RoutingIntent(settings: s, carrierAddresses: [IPAddress("198.18.0.10")!, IPAddress("2001:db8::10")!])
        XCTAssertFalse(intent.ipv4.isActive, "the only inclusion ties a carrier: the carrier wins")
        XCTAssertEqual(intent.ipv6.excluded.map(\.description), ["2001:db8::10/128"])
    }
}
