import Foundation
@testable import NetworkExtension
import XCTest

/// Apple's shapes that iOS code relies on: NEVPNError's initialiser, identity equality and hashing of
/// managers, protocols and connections (NSObject's on iOS), and NEProvider.defaultPath.
final class AppleShapesTests: XCTestCase {
    func testNEVPNErrorAsApplesInitialiser() {
        let e = NEVPNError(.configurationInvalid)
        XCTAssertEqual(e.code, .configurationInvalid)
        XCTAssertEqual(e.errorCode, 1)
        XCTAssertEqual((e as NSError).domain, NEVPNErrorDomain)
        XCTAssertEqual((e as NSError).code, 1)
        XCTAssertFalse(e.localizedDescription.isEmpty)
        XCTAssertEqual(e, NEVPNError(.configurationInvalid))
        XCTAssertNotEqual(e, NEVPNError(.configurationDisabled))
        XCTAssertEqual(NEVPNError.Code(rawValue: 6), .configurationUnknown)

        let custom = NEVPNError(.connectionFailed, userInfo: [NSLocalizedDescriptionKey: "server down", "extra": 7])
        XCTAssertEqual(custom.localizedDescription, "server down")
        XCTAssertEqual((custom as NSError).localizedDescription, "server down")
        XCTAssertEqual((custom as NSError).userInfo["extra"] as? Int, 7)
        XCTAssertEqual(custom.userInfo["extra"] as? Int, 7)
        do { throw NEVPNError(.configurationStale) } catch NEVPNError.configurationStale {} catch { XCTFail("\(error)") }
        // The Linux message form still works, and says what it was given.
        XCTAssertEqual(NEVPNError(.configurationInvalid, "no protocol").localizedDescription, "no protocol")
    }

    func testManagersProtocolsAndConnectionsCompareByIdentity() {
        let a = NETunnelProviderManager(), b = NETunnelProviderManager()
        XCTAssertEqual(a, a)
        XCTAssertNotEqual(a, b)
        XCTAssertTrue(a.isEqual(a))
        XCTAssertFalse(a.isEqual(b))
        XCTAssertEqual(Set([a, b, a]).count, 2)
        XCTAssertEqual(a.hashValue, a.hashValue)
        let managers: [NEVPNManager] = [a, b]
        XCTAssertEqual(managers.firstIndex(of: b), 1)

        let p = NETunnelProviderProtocol(), q = NETunnelProviderProtocol()
        XCTAssertEqual(p, p)
        XCTAssertNotEqual(p, q, "equal contents, different objects: not equal, as NSObject's isEqual")

        let c = a.connection
        XCTAssertTrue(c == a.connection, "one connection per manager")
        XCTAssertFalse(c == b.connection)
        XCTAssertEqual(Set([c, a.connection, b.connection]).count, 2)
        var byConnection: [NEVPNConnection: String] = [:]
        byConnection[c] = "a"
        XCTAssertEqual(byConnection[a.connection], "a")
        XCTAssertNil(byConnection[b.connection])
    }

    func testDefaultPathFollowsTheHostsCarrierVerdict() {
        final class Provider: NEPacketTunnelProvider, @unchecked Sendable {}
        let provider = Provider()
        XCTAssertNil(provider.defaultPath, "nil until the host reports a path")
        provider.tunnelgateSetDefaultPath(carrierReachable: true)
        let up = provider.defaultPath
        XCTAssertEqual(up?.status, .satisfied)
        XCTAssertEqual(up?.isExpensive, false)
        XCTAssertEqual(up?.isConstrained, false)
        provider.tunnelgateSetDefaultPath(carrierReachable: false)
        XCTAssertEqual(provider.defaultPath?.status, .unsatisfied)
        XCTAssertFalse(up!.isEqual(to: provider.defaultPath!))
        XCTAssertTrue(up!.isEqual(to: NWPath(status: .satisfied)))
        XCTAssertEqual(NWPathStatus.satisfiable.rawValue, 3)
        XCTAssertNil(Provider().defaultPath, "per provider")
    }
}
