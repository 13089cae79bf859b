@testable import NetworkExtension
@testable import TunnelgateSettings
import XCTest

/// One tunnel written three ways (a JSON file, a wg-quick file, NetworkExtension's settings
/// objects) is one model, and one broken tunnel is refused with the same reasons from each; the
/// wg-quick file and the objects never go through JSON.
final class ModelTranslationTests: XCTestCase {
    static let privateKey = "oKeutbzDytHY3+bt9PsCCRAXHiUsMzpBSE9WXWRrcnk="
    static let publicKey = "ERgfJi00O0JJUFdeZWxzeoGIj5adpKuyucDHztXc4+o="

    /// The key file the JSON form names.
    struct KeyFile: SecretFileReader {
        func readSecretFile(_ path: String) -> Result<any SecretMemory, SecretFileFailure> {
            guard path == "/etc/tunnelgate/wg0.key" else { return .failure(SecretFileFailure("\(path) does not exist")) }
            let text = Array((ModelTranslationTests.privateKey + "\n").utf8)
            let memory = UnprotectedSecretMemory(count: text.count)
            memory.withUnsafeMutableBytes { $0.copyBytes(from: text) }
            return .success(memory)
        }
        var secretMemory: any SecretMemoryAllocator { UnprotectedSecretMemoryAllocator() }
    }

    /// What the JSON parser and reader were asked to do while `body` ran.
    final class Log: @unchecked Sendable {
        // @unchecked Sendable: appended to only by the synchronous call under test, on the test's thread.
        var events: [JSONFormatEvent] = []
    }

    func jsonEvents(_ body: () throws -> Void) rethrows -> [JSONFormatEvent] {
        let log = Log()
        try JSONFormatProbe.$observer.withValue({ log.events.append($0) }) { try body() }
        return log.events
    }

    // MARK: The tunnel

    static let wgQuick = """
    [Interface]
    PrivateKey = \(privateKey)
    MTU = 1380
    Address = 10.8.0.2/24, fd00:8::2/64
    DNS = 10.8.0.1, fd00:8::1, Corp.Example

    [Peer]
    PublicKey = \(publicKey)
    Endpoint = 198.18.0.10:51820
    AllowedIPs = 0.0.0.0/0, ::/0
    """

    /// The same network as JSON; `runtime` is appended when given.
    static func json(runtime: String = "") -> String {
        """
        {"name": "wg0", "tunnelRemoteAddress": "198.18.0.10", "mtu": 1380,
         "ipv4Settings": {"addresses": ["10.8.0.2"], "subnetMasks": ["255.255.255.0"], "includedRoutes": ["0.0.0.0/0"]},
         "ipv6Settings": {"addresses": ["fd00:8::2"], "networkPrefixLengths": [64],
                          "includedRoutes": [{"destinationAddress": "::", "networkPrefixLength": 0}]},
         "dnsSettings": {"servers": ["10.8.0.1", "fd00:8::1"], "searchDomains": ["corp.example"], "matchDomains": [""]},
         "carrierEndpoints": ["198.18.0.10:51820/udp"]\(runtime)}
        """
    }

    static let wireguardRuntime = #"""
    , "runtime": {"kind": "wireguard", "privateKeyFile": "/etc/tunnelgate/wg0.key",
                  "peers": [{"publicKey": "ERgfJi00O0JJUFdeZWxzeoGIj5adpKuyucDHztXc4+o=", "endpoint": "198.18.0.10:51820",
                             "allowedIPs": ["0.0.0.0/0", "::/0"]}]}
    """#

    /// The same network as a provider would set it, with the host's options.
    static func objects() -> (NEPacketTunnelNetworkSettings, TunnelgateHostConfiguration) {
        let settings = NEPacketTunnelNetworkSettings(tunnelRemoteAddress: "198.18.0.10")
        settings.mtu = 1380
        let ipv4 = NEIPv4Settings(addresses: ["10.8.0.2"], subnetMasks: ["255.255.255.0"])
        ipv4.includedRoutes = [NEIPv4Route.default()]
        settings.ipv4Settings = ipv4
        let ipv6 = NEIPv6Settings(addresses: ["fd00:8::2"], networkPrefixLengths: [64])
        ipv6.includedRoutes = [NEIPv6Route.default()]
        settings.ipv6Settings = ipv6
        let dns = NEDNSSettings(servers: ["10.8.0.1", "fd00:8::1"])
        dns.searchDomains = ["CORP.example"]
        dns.matchDomains = [""]
        settings.dnsSettings = dns
        return (settings, TunnelgateHostConfiguration(interfaceName: "wg0", carrierEndpoints: ["198.18.0.10:51820/udp"]))
    }

    func testOneTunnelThreeWaysIsOneModel() throws {
        let fromJSON = try TunnelSettings.parse(json: Array(Self.json().utf8))
        let (objects, host) = Self.objects()
        let fromObjects = try objects.tunnelgateSettings(host)
        XCTAssertEqual(fromObjects, fromJSON)

        let fromWgQuick = try WgQuickConfig.parse(Self.wgQuick, name: "wg0.conf")
        let fromWireGuardJSON = try TunnelSettings.parse(json: Array(Self.json(runtime: Self.wireguardRuntime).utf8), secretFiles: KeyFile())
        XCTAssertEqual(fromWgQuick, fromWireGuardJSON, "the wg-quick file and its JSON form, runtime and all")
        guard case .wireguard(let w) = fromWgQuick.runtime else { return XCTFail("not the wireguard runtime") }
        XCTAssertEqual(w.privateKey, SecretKey(base64: Self.privateKey))
        // The network part of the wg-quick file is the objects' network.
        var network = fromWgQuick
        network.runtime = .none
        XCTAssertEqual(network, fromObjects)

        // Each model is what the model's rules accept, and says where its carriers came from.
        for s in [fromJSON, fromObjects, fromWgQuick] { XCTAssertNoThrow(try s.validate()) }
        XCTAssertEqual(fromObjects.carrierEndpoints.map(\.description), ["198.18.0.10:51820"])
        XCTAssertEqual(fromObjects.carrierEndpoints.map(\.keyPath), ["carrierEndpoints[0]"])
        XCTAssertEqual(fromWgQuick.carrierEndpoints.map(\.keyPath), ["wg0.conf:9: [Peer] Endpoint"])
    }

    /// One broken tunnel three ways: the validation's reasons, word for word, named in each one's terms.
    func testTheSameProblemsFromEachWay() {
        let wgQuick = """
        [Interface]
        PrivateKey = \(Self.privateKey)
        MTU = 1200
        Address = 10.8.0.2/24, 127.0.0.1/8, 10.8.0.2/16, fd00:8::2/64
        DNS = 10.8.0.1, 224.0.0.1, -bad.example
        """
        let json = """
        {"name": "wg0", "tunnelRemoteAddress": "0.0.0.0", "mtu": 1200,
         "ipv4Settings": {"addresses": ["10.8.0.2", "127.0.0.1", "10.8.0.2"], "subnetMasks": ["255.255.255.0", "255.0.0.0", "255.255.0.0"]},
         "ipv6Settings": {"addresses": ["fd00:8::2"], "networkPrefixLengths": [64]},
         "dnsSettings": {"servers": ["10.8.0.1", "224.0.0.1"], "searchDomains": ["-bad.example"], "matchDomains": [""]}}
        """
        let objects = NEPacketTunnelNetworkSettings(tunnelRemoteAddress: "0.0.0.0")
        objects.mtu = 1200
        objects.ipv4Settings = NEIPv4Settings(addresses: ["10.8.0.2", "127.0.0.1", "10.8.0.2"],
                                              subnetMasks: ["255.255.255.0", "255.0.0.0", "255.255.0.0"])
        objects.ipv6Settings = NEIPv6Settings(addresses: ["fd00:8::2"], networkPrefixLengths: [64])
        let dns = NEDNSSettings(servers: ["10.8.0.1", "224.0.0.1"])
        dns.searchDomains = ["-bad.example"]
        dns.matchDomains = [""]
        objects.dnsSettings = dns

        func problems(_ body: () throws(ConfigurationError) -> TunnelSettings) -> [ConfigProblem] {
            do { _ = try body(); XCTFail("expected a refusal"); return [] } catch { return error.problems }
        }
        let fromJSON = problems { () throws(ConfigurationError) in try TunnelSettings.parse(json: Array(json.utf8)) }
        let fromObjects = problems { () throws(ConfigurationError) in try objects.tunnelgateSettings(.init(interfaceName: "wg0")) }
        let fromWgQuick = problems { () throws(ConfigurationError) in try WgQuickConfig.parse(wgQuick, name: "wg0.conf") }

        let reasons = [
            "1200 is below 1280, the minimum for IPv6 (ipv6Settings is configured)",
            "127.0.0.1 cannot be an interface address (loopback)",
            "10.8.0.2 is listed twice",
            "'224.0.0.1' is not a DNS server address",
            "'-bad.example' is not a domain ('-bad' begins or ends with '-')",
        ]
        for found in [fromJSON, fromObjects, fromWgQuick] { XCTAssertEqual(found.map(\.reason), reasons) }
        let paths = ["mtu", "ipv4Settings.addresses[1]", "ipv4Settings.addresses[2]", "dnsSettings.servers[1]",
                     "dnsSettings.searchDomains[0]"]
        XCTAssertEqual(fromJSON.map(\.path), paths)
        XCTAssertEqual(fromObjects.map(\.path), paths)
        XCTAssertEqual(fromWgQuick.map(\.path), ["wg0.conf:3: [Interface] MTU", "wg0.conf:4: [Interface] Address",
                                                 "wg0.conf:4: [Interface] Address", "wg0.conf:5: [Interface] DNS",
                                                 "wg0.conf:5: [Interface] DNS"])
    }

    /// Where NetworkExtension's names differ from the JSON format's, a problem uses the objects' own.
    func testProblemsUseTheObjectsNames() {
        let settings = NEPacketTunnelNetworkSettings(tunnelRemoteAddress: "198.18.0.10")
        settings.tunnelOverheadBytes = 1000
        let ipv4 = NEIPv4Settings(addresses: ["10.8.0.2"], subnetMasks: ["255.255.255.0"])
        ipv4.includedRoutes = [NEIPv4Route(destinationAddress: "10.0.0.0", subnetMask: "255.0.255.0")]
        settings.ipv4Settings = ipv4
        let ipv6 = NEIPv6Settings(addresses: ["fd00:8::2"], networkPrefixLengths: [64])
        ipv6.excludedRoutes = [NEIPv6Route(destinationAddress: "2001:db8::", networkPrefixLength: 129)]
        settings.ipv6Settings = ipv6
        XCTAssertThrowsError(try settings.tunnelgateSettings(.init(interfaceName: "a-very-long-name", carrierEndpoints: ["bad host"]))) { error in
            XCTAssertEqual((error as? ConfigurationError)?.problems.map(\.description), [
                "interfaceName: 'a-very-long-name' is 16 bytes; the kernel takes interface names of at most 15",
                "mtu (1500 − tunnelOverheadBytes): 500 is outside 576–65535",
                "ipv4Settings.includedRoutes[0].destinationSubnetMask: 255.0.255.0 is not a contiguous mask",
                "ipv6Settings.excludedRoutes[0].destinationNetworkPrefixLength: prefix length 129 is outside 0–128",
                "carrierEndpoints[0]: 'bad host' is not a valid host name ('bad host' has characters other than letters, digits, '-' and '_')",
            ])
        }
    }

    // MARK: No JSON on the way

    func testTheObjectsAreTranslatedWithoutJSON() throws {
        // The control: the probe sees the JSON format when it is used.
        XCTAssertEqual(try jsonEvents { _ = try TunnelSettings.parse(json: Array(Self.json().utf8)) },
                       [.documentParsed, .settingsRead])
        let (objects, host) = Self.objects()
        XCTAssertEqual(try jsonEvents { _ = try objects.tunnelgateSettings(host) }, [], "valid objects")
        objects.mtu = 100
        XCTAssertEqual(try jsonEvents { XCTAssertThrowsError(try objects.tunnelgateSettings(host)) }, [], "refused objects")
        XCTAssertEqual(try jsonEvents { _ = try WgQuickConfig.parse(Self.wgQuick, name: "wg0.conf") }, [], "a wg-quick file")
    }
}
