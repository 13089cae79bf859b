@testable import NetworkExtension
import TunnelgateSettings
import XCTest

final class NetworkSettingsConversionTests: XCTestCase {
    /// The seed's settings (seeds/003), with the harness's server address.
    func seedSettings() -> NEPacketTunnelNetworkSettings {
        let settings = NEPacketTunnelNetworkSettings(tunnelRemoteAddress: "198.18.0.10")
        settings.mtu = 1400
        let ipv4 = NEIPv4Settings(addresses: ["10.8.0.2"], subnetMasks: ["255.255.255.0"])
        ipv4.includedRoutes = [NEIPv4Route.default()]
        settings.ipv4Settings = ipv4
        settings.dnsSettings = NEDNSSettings(servers: ["10.8.0.1", "fd00:8::1"])
        return settings
    }

    func testSeedSettingsConvert() throws {
        let s = try seedSettings().tunnelgateSettings()
        XCTAssertEqual(s.name, "tg0")
        XCTAssertEqual(s.tunnelRemoteAddress, "198.18.0.10")
        XCTAssertEqual(s.mtu, 1400)
        XCTAssertEqual(s.ipv4Settings?.interfaceAddresses, [IPPrefix("10.8.0.2/24")!])
        XCTAssertEqual(s.ipv4Settings?.includedRoutes, [Route.default(.ipv4)])
        XCTAssertEqual(s.ipv4Settings?.excludedRoutes, [])
        XCTAssertNil(s.ipv6Settings)
        XCTAssertEqual(s.dnsSettings?.servers, [IPAddress("10.8.0.1")!, IPAddress("fd00:8::1")!])
        // tunnelRemoteAddress is always a carrier endpoint.
        XCTAssertEqual(s.carrierEndpoints.map(\.description), ["198.18.0.10"])
        XCTAssertEqual(s.runtime, .none)
    }

    func testDefaultRoutes() {
        let v4 = NEIPv4Route.default()
        XCTAssertEqual(v4.destinationAddress, "0.0.0.0")
        XCTAssertEqual(v4.destinationSubnetMask, "0.0.0.0")
        XCTAssertNil(v4.gatewayAddress)
        let v6 = NEIPv6Route.default()
        XCTAssertEqual(v6.destinationAddress, "::")
        XCTAssertEqual(v6.destinationNetworkPrefixLength, 0)
    }

    func testRoutesMasksAndGateways() throws {
        let settings = NEPacketTunnelNetworkSettings(tunnelRemoteAddress: "198.18.0.10")
        let ipv4 = NEIPv4Settings(addresses: ["10.8.0.2", "10.9.0.2"], subnetMasks: ["255.255.255.0", "255.255.255.255"])
        let gw = NEIPv4Route(destinationAddress: "10.1.0.0", subnetMask: "255.255.0.0")
        gw.gatewayAddress = "10.8.0.1"
        ipv4.includedRoutes = [NEIPv4Route(destinationAddress: "10.0.0.0", subnetMask: "255.0.0.0"), gw]
        ipv4.excludedRoutes = [NEIPv4Route(destinationAddress: "198.18.0.20", subnetMask: "255.255.255.255")]
        settings.ipv4Settings = ipv4
        let ipv6 = NEIPv6Settings(addresses: ["fd00:8::2"], networkPrefixLengths: [64])
        ipv6.includedRoutes = [NEIPv6Route.default()]
        ipv6.excludedRoutes = [NEIPv6Route(destinationAddress: "2001:db8:18::20", networkPrefixLength: 128)]
        settings.ipv6Settings = ipv6
        let s = try settings.tunnelgateSettings(TunnelgateHostConfiguration(interfaceName: "ne1", carrierEndpoints: ["198.18.0.11:51820"]))
        XCTAssertEqual(s.name, "ne1")
        XCTAssertEqual(s.mtu, nil)
        XCTAssertEqual(s.ipv4Settings?.interfaceAddresses, [IPPrefix("10.8.0.2/24")!, IPPrefix("10.9.0.2/32")!])
        XCTAssertEqual(s.ipv4Settings?.includedRoutes, [Route(destination: IPPrefix("10.0.0.0/8")!),
                                                       Route(destination: IPPrefix("10.1.0.0/16")!, gateway: IPAddress("10.8.0.1"))])
        XCTAssertEqual(s.ipv4Settings?.excludedRoutes, [Route(destination: IPPrefix("198.18.0.20/32")!)])
        XCTAssertEqual(s.ipv6Settings?.interfaceAddresses, [IPPrefix("fd00:8::2/64")!])
        XCTAssertEqual(s.ipv6Settings?.includedRoutes, [Route.default(.ipv6)])
        XCTAssertEqual(s.ipv6Settings?.excludedRoutes, [Route(destination: IPPrefix("2001:db8:18::20/128")!)])
        XCTAssertEqual(Set(s.carrierEndpoints.map(\.description)), ["198.18.0.10", "198.18.0.11:51820"])
    }

    func testDNSSettings() throws {
        let settings = NEPacketTunnelNetworkSettings(tunnelRemoteAddress: "vpn.example")
        let dns = NEDNSSettings(servers: ["10.8.0.1"])
        dns.searchDomains = ["corp.example"]
        dns.matchDomains = ["corp.example", "Eng.Corp.Example"]
        dns.matchDomainsNoSearch = true
        dns.domainName = "corp.example"
        settings.dnsSettings = dns
        let s = try settings.tunnelgateSettings().dnsSettings
        XCTAssertEqual(s, DNSSettings(servers: [IPAddress("10.8.0.1")!], searchDomains: ["corp.example"],
                                      matchDomains: ["corp.example", "eng.corp.example"], matchDomainsNoSearch: true,
                                      domainName: "corp.example"))
    }

    func testTunnelOverheadBytesWithoutMTU() throws {
        let settings = NEPacketTunnelNetworkSettings(tunnelRemoteAddress: "198.18.0.10")
        settings.tunnelOverheadBytes = 80
        XCTAssertEqual(try settings.tunnelgateSettings().mtu, 1420)
        settings.mtu = 1300
        XCTAssertEqual(try settings.tunnelgateSettings().mtu, 1300, "mtu wins over tunnelOverheadBytes")
    }

    func testProblemsNameTheProperty() {
        let settings = NEPacketTunnelNetworkSettings(tunnelRemoteAddress: "198.18.0.10")
        let ipv4 = NEIPv4Settings(addresses: ["10.8.0.2"], subnetMasks: ["255.0.255.0"])
        ipv4.includedRoutes = [NEIPv4Route(destinationAddress: "10.1.2.3", subnetMask: "255.0.0.0")]
        settings.ipv4Settings = ipv4
        settings.mtu = 100
        XCTAssertThrowsError(try settings.tunnelgateSettings()) { error in
            let paths = (error as? ConfigurationError)?.problems.map(\.path) ?? []
            XCTAssertTrue(paths.contains("mtu"), "\(error)")
            XCTAssertTrue(paths.contains { $0.hasPrefix("ipv4Settings.subnetMasks") }, "\(error)")
            XCTAssertTrue(paths.contains { $0.hasPrefix("ipv4Settings.includedRoutes[0]") }, "\(error)")
        }
    }

    func testStringsAreEscapedInTheJSON() {
        let settings = NETunnelNetworkSettings(tunnelRemoteAddress: "a\"b\\c\n")
        XCTAssertThrowsError(try settings.tunnelgateSettings()) { error in
            XCTAssertEqual((error as? ConfigurationError)?.problems.map(\.path), ["tunnelRemoteAddress"])
        }
    }
}

/// A stand-in for the host: records what the provider passes, fails when told to.
final class RecordingSystem: NEProviderSystem, @unchecked Sendable {
    // @unchecked Sendable: tests touch it from one thread at a time.
    var applied: [NETunnelNetworkSettings?] = []
    var failWith: String?

    func setTunnelNetworkSettings(_ settings: NETunnelNetworkSettings?, for provider: NEPacketTunnelProvider,
                                  completionHandler: @escaping @Sendable ((any Error)?) -> Void) {
        applied.append(settings)
        completionHandler(failWith.map { TunnelgateProviderHost.error(.networkSettingsFailed, $0) })
    }
    func reassertingChanged(_ reasserting: Bool, for provider: NEPacketTunnelProvider) {}
    func cancelTunnel(with error: (any Error)?, for provider: NEPacketTunnelProvider) {}
}

final class ProviderTests: XCTestCase {
    func testSetTunnelNetworkSettingsReachesTheSystemAndReportsErrors() async throws {
        let provider = NEPacketTunnelProvider()
        let system = RecordingSystem()
        provider.system = system
        try await provider.setTunnelNetworkSettings(NEPacketTunnelNetworkSettings(tunnelRemoteAddress: "198.18.0.10"))
        try await provider.setTunnelNetworkSettings(nil)
        XCTAssertEqual(system.applied.count, 2)
        XCTAssertNil(system.applied[1])
        system.failWith = "applying the settings failed: File exists"
        do {
            try await provider.setTunnelNetworkSettings(nil)
            XCTFail("expected an error")
        } catch let error as NSError {
            XCTAssertEqual(error.domain, NETunnelProviderErrorDomain)
            XCTAssertEqual(error.code, NETunnelProviderError.networkSettingsFailed.rawValue)
            XCTAssertEqual(error.localizedDescription, "applying the settings failed: File exists")
        }
    }

    func testWithoutAHostSetTunnelNetworkSettingsFails() {
        let done = expectation(description: "completion")
        NEPacketTunnelProvider().setTunnelNetworkSettings(nil) { error in
            XCTAssertNotNil(error)
            done.fulfill()
        }
        wait(for: [done], timeout: 5)
    }

    func testDefaultCompletionMethodsCallTheAsyncVariants() {
        final class AsyncProvider: NEPacketTunnelProvider, @unchecked Sendable {
            override func handleAppMessage(_ messageData: Data) async -> Data? { messageData + Data("!".utf8) }
        }
        let done = expectation(description: "reply")
        AsyncProvider().handleAppMessage(Data("hi".utf8)) { reply in
            XCTAssertEqual(reply, Data("hi!".utf8))
            done.fulfill()
        }
        wait(for: [done], timeout: 5)
    }
}

final class PacketFlowTests: XCTestCase {
    func testProtocolFamilyFromTheFirstNibble() {
        XCTAssertEqual(NEPacketTunnelFlow.protocolFamily(of: Data([0x45] + [UInt8](repeating: 0, count: 19))), AF_INET)
        XCTAssertEqual(NEPacketTunnelFlow.protocolFamily(of: Data([0x60] + [UInt8](repeating: 0, count: 39))), AF_INET6)
        XCTAssertNil(NEPacketTunnelFlow.protocolFamily(of: Data([0x45, 0, 0])), "shorter than an IPv4 header")
        XCTAssertNil(NEPacketTunnelFlow.protocolFamily(of: Data([0x50] + [UInt8](repeating: 0, count: 39))))
        XCTAssertNil(NEPacketTunnelFlow.protocolFamily(of: Data()))
    }

    func testWritePacketsValidatesAndWrites() throws {
        var fds: [Int32] = [0, 0]
        XCTAssertEqual(socketpair(AF_UNIX, Int32(SOCK_DGRAM.rawValue), 0, &fds), 0)
        defer { close(fds[0]); close(fds[1]) }
        let flow = NEPacketTunnelFlow()
        let v4 = Data([0x45] + [UInt8](repeating: 7, count: 27))
        XCTAssertFalse(flow.writePackets([v4], withProtocols: [NSNumber(value: AF_INET)]), "no TUN bound")
        flow.bind(.init(rawValue: fds[0]))
        XCTAssertFalse(flow.writePackets([v4], withProtocols: [NSNumber(value: AF_INET6)]), "version and protocol differ")
        XCTAssertFalse(flow.writePackets([v4], withProtocols: []), "counts differ")
        XCTAssertTrue(flow.writePacketObjects([NEPacket(data: v4, protocolFamily: sa_family_t(AF_INET))]))
        var buffer = [UInt8](repeating: 0, count: 100)
        XCTAssertEqual(read(fds[1], &buffer, 100), 28)
        XCTAssertEqual(Data(buffer.prefix(28)), v4)
        flow.close()
    }

    func testEachReadArmsOneDelivery() throws {
        var fds: [Int32] = [0, 0]
        XCTAssertEqual(socketpair(AF_UNIX, Int32(SOCK_DGRAM.rawValue), 0, &fds), 0)
        defer { close(fds[0]); close(fds[1]) }
        let flow = NEPacketTunnelFlow()
        let v6 = [UInt8]([0x60] + [UInt8](repeating: 1, count: 39))
        for _ in 0..<3 { XCTAssertEqual(write(fds[1], v6, v6.count), 40) }
        let first = expectation(description: "first delivery")
        flow.readPacketObjects { packets in
            XCTAssertEqual(packets.count, 3, "all waiting packets in one batch")
            XCTAssertEqual(packets.first?.protocolFamily, sa_family_t(AF_INET6))
            first.fulfill()
        }
        flow.bind(.init(rawValue: fds[0]))
        wait(for: [first], timeout: 5)
        // Not re-armed: a packet now waits for the next read.
        XCTAssertEqual(write(fds[1], v6, v6.count), 40)
        let second = expectation(description: "second delivery")
        flow.readPackets { packets, protocols in
            XCTAssertEqual(packets.count, 1)
            XCTAssertEqual(protocols, [NSNumber(value: AF_INET6)])
            second.fulfill()
        }
        wait(for: [second], timeout: 5)
        flow.unbind()
        flow.close()
    }
}
