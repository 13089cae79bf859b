import XCTest
@testable import TunnelgateSettings

/// Resolves from a fixed table, so validation tests do not depend on DNS.
struct TableResolver: HostResolver {
    var table: [String: [IPAddress]]
    func resolve(_ name: String) -> Result<[IPAddress], ResolveFailure> {
        table[name].map { .success($0) } ?? .failure(ResolveFailure("Name or service not known"))
    }
}

final class SettingsValidationTests: XCTestCase {
    let full = """
    {"name": "tg0", "tunnelRemoteAddress": "198.18.0.10", "mtu": 1400,
     "ipv4Settings": {"addresses": ["10.8.0.2"], "subnetMasks": ["255.255.255.0"],
                      "includedRoutes": ["0.0.0.0/0"],
                      "excludedRoutes": [{"destinationAddress": "198.18.0.20", "subnetMask": "255.255.255.255"}]},
     "ipv6Settings": {"addresses": ["fd00:8::2"], "networkPrefixLengths": [64],
                      "includedRoutes": [{"destinationAddress": "::", "networkPrefixLength": 0}],
                      "excludedRoutes": ["2001:db8:18::20/128"]},
     "dnsSettings": {"servers": ["10.8.0.1"], "searchDomains": ["corp.example"], "matchDomains": [""],
                     "matchDomainsNoSearch": false, "domainName": "corp.example"},
     "includeAllNetworks": false, "excludeLocalNetworks": true,
     "carrierEndpoints": ["198.18.0.10:51820", "[2001:db8:18::10]:51820", "vpn.example.net"],
     "runtime": {"kind": "none"}}
    """

    func parse(_ json: String) throws -> TunnelSettings { try TunnelSettings.parse(json: Array(json.utf8)) }

    /// The problems of an invalid configuration, as printed.
    func problems(_ json: String, file: StaticString = #filePath, line: UInt = #line) -> [String] {
        do {
            _ = try parse(json)
            XCTFail("expected the configuration to be refused", file: file, line: line)
            return []
        } catch {
            return (error as! ConfigurationError).problems.map(\.description)
        }
    }

    func testFullConfiguration() throws {
        let s = try parse(full)
        XCTAssertEqual(s.name, "tg0")
        XCTAssertEqual(s.mtu, 1400)
        XCTAssertEqual(s.ipv4Settings?.interfaceAddresses.map(\.description), ["10.8.0.2/24"])
        XCTAssertEqual(s.ipv4Settings?.includedRoutes, [Route.default(.ipv4)])
        XCTAssertEqual(s.ipv4Settings?.excludedRoutes.map(\.description), ["198.18.0.20/32"])
        XCTAssertEqual(s.ipv6Settings?.includedRoutes, [Route.default(.ipv6)])
        XCTAssertEqual(s.dnsSettings?.matchDomains, [""])
        XCTAssertTrue(s.excludeLocalNetworks)
        // tunnelRemoteAddress is the same host as the first endpoint (with a port): not added twice.
        XCTAssertEqual(s.carrierEndpoints.map(\.description), ["198.18.0.10:51820", "[2001:db8:18::10]:51820", "vpn.example.net"])
        XCTAssertEqual(s.runtime, .none)
    }

    func testDefaults() throws {
        let s = try parse(#"{"tunnelRemoteAddress": "198.18.0.10"}"#)
        XCTAssertEqual(s.name, "tg0")
        XCTAssertEqual(s.effectiveMTU, 1500)
        XCTAssertEqual(s.runtime, .none)
        XCTAssertEqual(s.carrierEndpoints.map(\.description), ["198.18.0.10"])
        XCTAssertEqual(s.carrierEndpoints.first?.keyPath, "tunnelRemoteAddress")
    }

    func testEveryProblemIsNamedByKeyPath() {
        let p = problems("""
        {"name": "this-name-is-way-too-long", "tunnelRemoteAddress": "198.18.0.10", "mtu": 500,
         "ipv4Settings": {"addresses": ["10.8.0.2", "10.8.0.300"], "subnetMasks": ["255.0.255.0"],
                          "includedRoutes": ["2001:db8::/32", "10.1.2.3/8", "10.0.0.0/40"]},
         "ipv6Settings": {"adresses": ["fd00::1"], "networkPrefixLengths": [129]},
         "carrierEndpoints": ["bad host"], "frobnicate": 1}
        """)
        // Unknown keys of an object come first, then the problems of its known keys in file order.
        XCTAssertEqual(p, [
            "frobnicate: unknown key (known here: name, tunnelRemoteAddress, mtu, ipv4Settings, ipv6Settings, dnsSettings, includeAllNetworks, excludeLocalNetworks, carrierEndpoints, runtime, forwarding, restart)",
            "name: 'this-name-is-way-too-long' is 25 bytes; the kernel takes interface names of at most 15",
            "mtu: 500 is outside 576–65535",
            "ipv4Settings.addresses[1]: '10.8.0.300' is not an IPv4 address",
            "ipv4Settings.subnetMasks[0]: 255.0.255.0 is not a contiguous mask",
            "ipv4Settings.subnetMasks: 1 mask for 2 addresses (one mask per address)",
            "ipv4Settings.includedRoutes[0]: 2001:db8::/32 is an IPv6 route in ipv4Settings",
            "ipv4Settings.includedRoutes[1]: 10.1.2.3/8 has host bits set (the network is 10.0.0.0/8)",
            "ipv4Settings.includedRoutes[2]: '10.0.0.0/40': prefix length must be 0–32",
            "ipv6Settings.adresses: unknown key (did you mean 'addresses'?)",
            "ipv6Settings.addresses: missing (NEIPv6Settings needs at least one address)",
            "ipv6Settings.networkPrefixLengths[0]: prefix length 129 is outside 0–128",
            "carrierEndpoints[0]: 'bad host' is not a valid host name ('bad host' has characters other than letters, digits, '-' and '_')",
        ])
    }

    func testRestartPolicy() throws {
        XCTAssertNil(try parse(#"{"tunnelRemoteAddress": "198.18.0.10"}"#).restart)
        XCTAssertEqual(try parse(#"{"tunnelRemoteAddress": "198.18.0.10", "restart": {"policy": "on-failure"}}"#).restart,
                       RestartSettings(policy: .onFailure, attempts: 5))
        XCTAssertEqual(try parse(#"{"tunnelRemoteAddress": "198.18.0.10", "restart": {"policy": "on-failure", "attempts": 9}}"#).restart,
                       RestartSettings(policy: .onFailure, attempts: 9))
        XCTAssertEqual(problems(#"{"tunnelRemoteAddress": "198.18.0.10", "restart": {"policy": "always", "attempts": 0, "delay": 1}}"#), [
            "restart.delay: unknown key (known here: policy, attempts)",
            "restart.policy: 'always' is not a restart policy (never or on-failure)",
            "restart.attempts: 0 is out of range (1–100)",
        ])
        XCTAssertEqual(problems(#"{"tunnelRemoteAddress": "198.18.0.10", "restart": {"attempts": 101}}"#), [
            "restart.policy: missing (never or on-failure)",
            "restart.attempts: 101 is out of range (1–100)",
        ])
        // `tunnelgate up --restart`.
        XCTAssertEqual(RestartSettings.parse("never"), RestartSettings(policy: .never))
        XCTAssertEqual(RestartSettings.parse("on-failure"), RestartSettings(policy: .onFailure, attempts: 5))
        XCTAssertEqual(RestartSettings.parse("on-failure:3"), RestartSettings(policy: .onFailure, attempts: 3))
        for bad in ["", "sometimes", "on-failure:", "on-failure:0", "on-failure:x", "never:3", "on-failure:101"] {
            XCTAssertNil(RestartSettings.parse(bad), bad)
            XCTAssertNotNil(RestartSettings.problem(bad), bad)
        }
    }

    func testMTUAtLeast1280WithIPv6() {
        XCTAssertEqual(problems("""
        {"tunnelRemoteAddress": "198.18.0.10", "mtu": 1000,
         "ipv6Settings": {"addresses": ["fd00::1"], "networkPrefixLengths": [64]}}
        """), ["mtu: 1000 is below 1280, the minimum for IPv6 (ipv6Settings is configured)"])
        XCTAssertEqual(problems(#"{"tunnelRemoteAddress": "198.18.0.10", "mtu": 65536}"#), ["mtu: 65536 is outside 576–65535"])
        XCTAssertEqual(problems(#"{"tunnelRemoteAddress": "198.18.0.10", "mtu": 1400.5}"#), ["mtu: expected a whole number, found 1400.5"])
    }

    func testRouteObjects() {
        XCTAssertEqual(problems("""
        {"tunnelRemoteAddress": "198.18.0.10",
         "ipv4Settings": {"addresses": ["10.8.0.2"], "subnetMasks": ["255.255.255.0"],
           "includedRoutes": [{"destinationAddress": "10.0.0.0"},
                              {"destinationAddress": "10.0.0.0", "subnetMask": "255.0.0.0", "gatewayAddress": "fd00::1"},
                              {"destinationAddress": "fd00::", "subnetMask": "255.0.0.0"},
                              {"destinationAddress": "10.0.0.0", "networkPrefixLength": 8}]},
         "ipv6Settings": {"addresses": ["fd00::1"], "networkPrefixLengths": [64],
           "excludedRoutes": [{"destinationAddress": "2001:db8::1", "networkPrefixLength": 32}, 7]}}
        """), [
            "ipv4Settings.includedRoutes[0].subnetMask: missing (NEIPv4Route needs destinationAddress and subnetMask)",
            "ipv4Settings.includedRoutes[1].gatewayAddress: 'fd00::1' is not a usable IPv4 gateway address",
            "ipv4Settings.includedRoutes[2]: fd00:: is an IPv6 route in ipv4Settings",
            "ipv4Settings.includedRoutes[3].networkPrefixLength: unknown key (known here: destinationAddress, subnetMask, gatewayAddress)",
            "ipv4Settings.includedRoutes[3].subnetMask: missing (NEIPv4Route needs destinationAddress and subnetMask)",
            "ipv6Settings.excludedRoutes[0].destinationAddress: 2001:db8::1/32 has host bits set (the network is 2001:db8::/32)",
            "ipv6Settings.excludedRoutes[1]: expected a route (an object or an ADDRESS/LENGTH string), found a number",
        ])
    }

    func testTypesAndDNS() {
        XCTAssertEqual(problems("""
        {"tunnelRemoteAddress": 7, "includeAllNetworks": "yes",
         "dnsSettings": {"servers": [], "matchDomains": ["", "-bad.example"], "domainName": "a..b"},
         "runtime": {"kind": "openvpn"}}
        """), [
            "tunnelRemoteAddress: expected a string, found a number",
            "dnsSettings.servers: empty (NEDNSSettings needs at least one server)",
            "dnsSettings.matchDomains[1]: '-bad.example' is not a domain ('-bad' begins or ends with '-')",
            "dnsSettings.domainName: 'a..b' is not a domain (empty label)",
            "includeAllNetworks: expected true or false, found a string",
            "runtime.kind: unknown runtime kind 'openvpn' (supported: none, callback, mesh, wireguard)",
        ])
        XCTAssertEqual(problems("[]"), ["(top level): expected an object, found an array"])
        XCTAssertEqual(problems("{"), ["not valid JSON: line 1, column 2: expected a key in quotes"])
        XCTAssertEqual(problems("{}"), ["tunnelRemoteAddress: missing (the tunnel server's IP address or host name)"])
    }

    func testCarrierResolution() throws {
        let s = try parse(full)
        let resolver = TableResolver(table: ["vpn.example.net": [IPAddress("198.18.1.1")!, IPAddress("2001:db8:1::1")!]])
        XCTAssertEqual(try s.resolveCarrierEndpoints(using: resolver).map(\.description),
                       ["198.18.0.10", "2001:db8:18::10", "198.18.1.1", "2001:db8:1::1"])
        XCTAssertThrowsError(try s.resolveCarrierEndpoints(using: TableResolver(table: [:]))) { error in
            XCTAssertEqual((error as! ConfigurationError).problems.map(\.description),
                           ["carrierEndpoints[2]: 'vpn.example.net' does not resolve (Name or service not known)"])
        }
        let remote = try parse(#"{"tunnelRemoteAddress": "no-such-host.invalid"}"#)
        XCTAssertThrowsError(try remote.resolveCarrierEndpoints(using: TableResolver(table: [:]))) { error in
            XCTAssertEqual((error as! ConfigurationError).problems.map(\.path), ["tunnelRemoteAddress"])
        }
    }

    /// `symbols.packetInBatch`: the default name, another name, or null for none; a bad name is named by key path.
    func testCallbackRuntimePacketInBatchSymbol() throws {
        func callback(_ symbols: String) throws -> CallbackRuntimeSettings {
            let s = try parse("""
            {"tunnelRemoteAddress": "198.18.0.10",
             "runtime": {"kind": "callback", "library": "/opt/rt.so"\(symbols)}}
            """)
            guard case .callback(let c) = s.runtime else { XCTFail("not a callback runtime: \(s.runtime)"); throw CancellationError() }
            return c
        }
        XCTAssertEqual(try callback("").symbols.packetInBatch, "tunnelgate_runtime_packet_in_batch")
        XCTAssertEqual(try callback(#", "symbols": {"packetIn": "mehs_ios_runtime_packet_in"}"#).symbols.packetInBatch,
                       "tunnelgate_runtime_packet_in_batch")
        XCTAssertEqual(try callback(#", "symbols": {"packetInBatch": "my_rt_packets_in"}"#).symbols.packetInBatch, "my_rt_packets_in")
        XCTAssertNil(try callback(#", "symbols": {"packetInBatch": null}"#).symbols.packetInBatch)
        XCTAssertEqual(problems("""
        {"tunnelRemoteAddress": "198.18.0.10",
         "runtime": {"kind": "callback", "library": "/opt/rt.so", "symbols": {"packetInBatch": "no-such name"}}}
        """), ["runtime.symbols.packetInBatch: 'no-such name' is not a C symbol name"])
    }
}
