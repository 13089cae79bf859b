import XCTest
@testable import TunnelgateSettings

/// Records what the JSON format's code was asked to do while `body` ran (JSONFormatProbe).
final class JSONFormatLog: @unchecked Sendable {
    // @unchecked Sendable: appended to only by the synchronous call under test, on the test's thread.
    var events: [JSONFormatEvent] = []

    static func events(_ body: () throws -> Void) rethrows -> [JSONFormatEvent] {
        let log = JSONFormatLog()
        try JSONFormatProbe.$observer.withValue({ log.events.append($0) }) { try body() }
        return log.events
    }
}

/// `TunnelSettings.validate()`: the model's rules, whoever built the model, and the translators
/// that reach them without going through JSON.
final class ModelValidationTests: XCTestCase {
    typealias Keys = WgQuickConfigTests

    func problems(_ settings: TunnelSettings, file: StaticString = #filePath, line: UInt = #line) -> [String] {
        do {
            try settings.validate()
            XCTFail("expected the settings to be refused", file: file, line: line)
            return []
        } catch {
            return error.problems.map(\.description)
        }
    }

    static func v4(_ text: String) -> IPv4Address { IPv4Address(text)! }
    static func v6(_ text: String) -> IPv6Address { IPv6Address(text)! }
    static func route(_ text: String, via gateway: String? = nil) -> Route {
        Route(destination: IPPrefix(text)!, gateway: gateway.flatMap { IPAddress($0) })
    }

    // MARK: The rules, on a model built in code

    func testAModelBuiltInCodeIsCheckedByTheSameRules() {
        let settings = TunnelSettings(
            name: "tg0", tunnelRemoteAddress: "198.18.0.10", mtu: 1200,
            ipv4Settings: IPv4Settings(addresses: [Self.v4("10.8.0.2"), Self.v4("127.0.0.1")],
                                       subnetMasks: [Self.v4("255.0.255.0")],
                                       includedRoutes: [Self.route("::/0"), Self.route("10.1.2.3/8"),
                                                        Self.route("10.2.0.0/16", via: "fd00::1")]),
            ipv6Settings: IPv6Settings(addresses: [Self.v6("fd00:8::2")], networkPrefixLengths: [129]),
            dnsSettings: DNSSettings(servers: [IPAddress("224.0.0.1")!], searchDomains: ["-bad.example"]),
            carrierEndpoints: [CarrierEndpoint(host: .address(IPAddress("198.18.0.10")!), port: 51820, transport: .udp),
                               CarrierEndpoint(host: .address(IPAddress("198.18.0.10")!), port: 51820, transport: .udp)],
            forwarding: ForwardingSettings(sources: [IPPrefix("0.0.0.0/0")!, IPPrefix("10.9.0.1/24")!]))
        XCTAssertEqual(problems(settings), [
            "mtu: 1200 is below 1280, the minimum for IPv6 (ipv6Settings is configured)",
            "ipv4Settings.addresses[1]: 127.0.0.1 cannot be an interface address (loopback)",
            "ipv4Settings.subnetMasks[0]: 255.0.255.0 is not a contiguous mask",
            "ipv4Settings.subnetMasks: 1 mask for 2 addresses (one mask per address)",
            // A route of the wrong family: JSON and NetworkExtension refuse it as a type, a model can hold it.
            "ipv4Settings.includedRoutes[0]: ::/0 is an IPv6 route in ipv4Settings",
            "ipv4Settings.includedRoutes[1].destinationAddress: 10.1.2.3/8 has host bits set (the network is 10.0.0.0/8)",
            "ipv4Settings.includedRoutes[2].gatewayAddress: 'fd00::1' is not a usable IPv4 gateway address",
            "ipv6Settings.networkPrefixLengths[0]: prefix length 129 is outside 0–128",
            "dnsSettings.servers[0]: '224.0.0.1' is not a DNS server address",
            "dnsSettings.searchDomains[0]: '-bad.example' is not a domain ('-bad' begins or ends with '-')",
            "carrierEndpoints[1]: '198.18.0.10:51820/udp' is listed twice",
            "forwarding.sources[0]: 0.0.0.0/0 would forward for every address; name the hosts' prefixes",
            "forwarding.sources[1]: 10.9.0.1/24 has host bits set (the network is 10.9.0.0/24)",
        ])
    }

    func testRuntimeRulesOnTheModel() {
        var mesh = MeshRuntimeSettings(library: "", identitySeedFile: "mesh.seed")
        mesh.seeds = [.init(host: "[fd00::1]", port: 5510), .init(host: "10.0.0.1", port: 0)]
        mesh.keepaliveSeconds = 0
        XCTAssertEqual(problems(TunnelSettings(tunnelRemoteAddress: "10.0.0.1", mtu: 1400, runtime: .mesh(mesh))), [
            "mtu: 1400 is above 1396, MeshGuard's tunnel payload limit (runtime.kind mesh): use 1396 or less",
            "runtime.library: empty",
            "runtime.identitySeedFile: 'mesh.seed' is not an absolute path",
            "runtime.seeds[0]: '[fd00::1]:5510': MeshGuard joins over IPv4; give an IPv4 address or a host name",
            "runtime.seeds[1]: '10.0.0.1:0' is not IP:port or host:port (port 1–65535)",
            "runtime.keepaliveSeconds: 0 is outside 1–600",
        ])
        let key = SecretKey(base64: Keys.privateKey)!
        let peer = Base64Key.decode(Keys.publicKey1)!
        let wireguard = WireGuardSettings(privateKey: key, peers: [
            .init(publicKey: peer, allowedIPs: [IPPrefix("10.0.0.0/24")!]),
            .init(publicKey: Base64Key.decode(Keys.publicKey2)!, allowedIPs: [IPPrefix("10.0.0.0/24")!, IPPrefix("10.1.0.1/16")!]),
            .init(publicKey: peer),
        ])
        XCTAssertEqual(problems(TunnelSettings(tunnelRemoteAddress: "198.18.0.10", runtime: .wireguard(wireguard))), [
            "runtime.peers[1].allowedIPs[0]: 10.0.0.0/24 is also allowed for runtime.peers[0]",
            "runtime.peers[1].allowedIPs[1]: 10.1.0.1/16 has host bits set (the network is 10.1.0.0/16)",
            "runtime.peers[2].publicKey: the same peer as runtime.peers[0]",
        ])
        var callback = CallbackRuntimeSettings(library: "/opt/rt.so")
        callback.symbols.stop = "rt-stop"
        callback.resultCodes.failed = 1
        callback.startTimeoutSeconds = 0.5
        XCTAssertEqual(problems(TunnelSettings(tunnelRemoteAddress: "198.18.0.10", runtime: .callback(callback))), [
            "runtime.symbols.stop: 'rt-stop' is not a C symbol name",
            "runtime.resultCodes.failed: 1 is also queueFull's value (its default); every code needs a value of its own",
            "runtime.startTimeoutSeconds: 0.5 is outside 1–600",
        ])
        XCTAssertEqual(problems(TunnelSettings(tunnelRemoteAddress: "198.18.0.10",
                                               ipv4Settings: IPv4Settings(addresses: [IPv4Address(0)], subnetMasks: [Self.v4("255.255.255.0")]),
                                               meshAddressIndex: 0)),
                       ["ipv4Settings.addresses[0]: 'auto' is this node's mesh address, derived from its MeshGuard identity: it needs runtime.kind mesh"])
    }

    func testWhatATranslatorReturnsPassesValidateAgain() throws {
        let json = try TunnelSettings.parse(json: Array(WireGuardRuntimeSettingsTests.full.utf8),
                                            secretFiles: WireGuardRuntimeSettingsTests.keyFiles)
        XCTAssertNoThrow(try json.validate())
        XCTAssertNoThrow(try WgQuickConfig.parse(Keys.full, name: "wg0.conf").validate())
        XCTAssertNoThrow(try TunnelSettings(tunnelRemoteAddress: "vpn.example.net").validate())
    }

    // MARK: The same rules from JSON and from a wg-quick file

    /// One broken tunnel, as a wg-quick file and as JSON: the validation's reasons are the same,
    /// each named in its format's terms.
    func testTheSameProblemsFromJSONAndFromAWgQuickFile() throws {
        let wgQuick = """
        [Interface]
        PrivateKey = \(Keys.privateKey)
        MTU = 1200
        Address = 10.8.0.2/24, 127.0.0.1/8, 10.8.0.2/16, fd00:8::2/64
        DNS = 10.8.0.1, 224.0.0.1, -bad.example

        [Peer]
        PublicKey = \(Keys.publicKey1)
        AllowedIPs = 10.60.0.0/24
        [Peer]
        PublicKey = \(Keys.publicKey2)
        AllowedIPs = 10.60.0.0/24
        """
        let json = """
        {"name": "a-very-long-name", "tunnelRemoteAddress": "0.0.0.0", "mtu": 1200,
         "ipv4Settings": {"addresses": ["10.8.0.2", "127.0.0.1", "10.8.0.2"],
                          "subnetMasks": ["255.255.255.0", "255.0.0.0", "255.255.0.0"], "includedRoutes": ["10.60.0.0/24"]},
         "ipv6Settings": {"addresses": ["fd00:8::2"], "networkPrefixLengths": [64]},
         "dnsSettings": {"servers": ["10.8.0.1", "224.0.0.1"], "searchDomains": ["-bad.example"], "matchDomains": [""]},
         "runtime": {"kind": "wireguard", "privateKeyFile": "/etc/tunnelgate/wg0.key",
                     "peers": [{"publicKey": "\(Keys.publicKey1)", "allowedIPs": ["10.60.0.0/24"]},
                               {"publicKey": "\(Keys.publicKey2)", "allowedIPs": ["10.60.0.0/24"]}]}}
        """
        var fromJSON: [ConfigProblem] = [], fromWgQuick: [ConfigProblem] = []
        XCTAssertThrowsError(try TunnelSettings.parse(json: Array(json.utf8), secretFiles: WireGuardRuntimeSettingsTests.keyFiles)) {
            fromJSON = ($0 as? ConfigurationError)?.problems ?? []
        }
        XCTAssertThrowsError(try WgQuickConfig.parse(wgQuick, name: "/etc/wireguard/a-very-long-name.conf")) {
            fromWgQuick = ($0 as? ConfigurationError)?.problems ?? []
        }
        let nameReason = "'a-very-long-name' is 16 bytes; the kernel takes interface names of at most 15"
        XCTAssertEqual(fromJSON.map(\.description), [
            "name: \(nameReason)",
            "mtu: 1200 is below 1280, the minimum for IPv6 (ipv6Settings is configured)",
            "ipv4Settings.addresses[1]: 127.0.0.1 cannot be an interface address (loopback)",
            "ipv4Settings.addresses[2]: 10.8.0.2 is listed twice",
            "dnsSettings.servers[1]: '224.0.0.1' is not a DNS server address",
            "dnsSettings.searchDomains[0]: '-bad.example' is not a domain ('-bad' begins or ends with '-')",
            "runtime.peers[1].allowedIPs[0]: 10.60.0.0/24 is also allowed for runtime.peers[0]",
        ])
        let file = "/etc/wireguard/a-very-long-name.conf"
        XCTAssertEqual(fromWgQuick.map(\.description), [
            "\(file): tunnel name (from the file name): \(nameReason)",
            "\(file):3: [Interface] MTU: 1200 is below 1280, the minimum for IPv6 (ipv6Settings is configured)",
            "\(file):4: [Interface] Address: 127.0.0.1 cannot be an interface address (loopback)",
            "\(file):4: [Interface] Address: 10.8.0.2 is listed twice",
            "\(file):5: [Interface] DNS: '224.0.0.1' is not a DNS server address",
            "\(file):5: [Interface] DNS: '-bad.example' is not a domain ('-bad' begins or ends with '-')",
            "\(file):12: [Peer] AllowedIPs: 10.60.0.0/24 is also allowed for the [Peer] on line 7",
        ])
        // The reasons are the validation's, word for word, but for how each format names the other peer.
        XCTAssertEqual(fromJSON.dropLast().map(\.reason), fromWgQuick.dropLast().map(\.reason))
    }

    func testTheSameTunnelFromJSONAndAWgQuickFileIsOneModel() throws {
        let json = try TunnelSettings.parse(json: Array(WireGuardRuntimeSettingsTests.full.utf8),
                                            secretFiles: WireGuardRuntimeSettingsTests.keyFiles)
        XCTAssertEqual(json, try WgQuickConfig.parse(Keys.full, name: "wg0.conf"))
    }

    // MARK: No JSON on the way

    func testAWgQuickFileIsTranslatedWithoutJSON() throws {
        // The probe sees the JSON format when it is used: the control.
        let jsonEvents = try JSONFormatLog.events {
            _ = try TunnelSettings.parse(json: Array(WireGuardRuntimeSettingsTests.full.utf8),
                                         secretFiles: WireGuardRuntimeSettingsTests.keyFiles)
        }
        XCTAssertEqual(jsonEvents, [.documentParsed, .settingsRead])
        // A wg-quick file, valid or not, never reaches the JSON parser or the JSON reader.
        XCTAssertEqual(try JSONFormatLog.events { _ = try WgQuickConfig.parse(Keys.full, name: "wg0.conf") }, [])
        XCTAssertEqual(try JSONFormatLog.events {
            XCTAssertThrowsError(try WgQuickConfig.parse("[Interface]\nPrivateKey = \(Keys.privateKey)\nMTU = 100\n", name: "wg0.conf"))
        }, [])
    }
}
