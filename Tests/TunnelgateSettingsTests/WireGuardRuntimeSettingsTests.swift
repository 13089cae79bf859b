import XCTest
@testable import TunnelgateSettings

/// Key files from a table, so that tests need no files and can play the
/// command's refusals (a file others can read).
struct TableKeyFiles: SecretFileReader {
    var files: [String: Result<[UInt8], SecretFileFailure>]
    func readSecretFile(_ path: String) -> Result<any SecretMemory, SecretFileFailure> {
        (files[path] ?? .failure(SecretFileFailure("\(path) does not exist"))).map { bytes in
            let memory = UnprotectedSecretMemory(count: bytes.count)
            memory.withUnsafeMutableBytes { $0.copyBytes(from: bytes) }
            return memory
        }
    }
    var secretMemory: any SecretMemoryAllocator { UnprotectedSecretMemoryAllocator() }
}

/// `runtime.kind wireguard` in the JSON format: the same runtime as a wg-quick
/// file, keys in owner-only files, problems by key path.
final class WireGuardRuntimeSettingsTests: XCTestCase {
    typealias Keys = WgQuickConfigTests

    static let keyFiles = TableKeyFiles(files: [
        "/etc/tunnelgate/wg0.key": .success(Array((Keys.privateKey + "\n").utf8)),
        "/etc/tunnelgate/wg0-office.psk": .success(Array(Keys.presharedKey.utf8)),
        "/etc/tunnelgate/open.psk": .failure(SecretFileFailure("/etc/tunnelgate/open.psk can be read by others (mode 644); make it owner-only: chmod 600 /etc/tunnelgate/open.psk")),
        "/etc/tunnelgate/hex.key": .success(Array(String(repeating: "a0", count: 32).utf8)),
    ])

    /// The tunnel of `WgQuickConfigTests.full`, written as JSON.
    static let full = """
    {"name": "wg0", "tunnelRemoteAddress": "vpn.example.net", "mtu": 1380,
     "ipv4Settings": {"addresses": ["10.8.0.2"], "subnetMasks": ["255.255.255.0"],
                      "includedRoutes": ["10.8.0.0/24", "192.168.10.0/24", "10.9.0.0/16"]},
     "ipv6Settings": {"addresses": ["fd00:8::2"], "networkPrefixLengths": [64],
                      "includedRoutes": ["fd00:8::/64", "fd00:9::/48"]},
     "dnsSettings": {"servers": ["10.8.0.1", "fd00:8::1"], "searchDomains": ["corp.example"], "matchDomains": [""]},
     "carrierEndpoints": ["vpn.example.net:51820/udp"],
     "runtime": {"kind": "wireguard", "privateKeyFile": "/etc/tunnelgate/wg0.key", "listenPort": 51820, "fwMark": 4660,
                 "peers": [{"publicKey": "\(Keys.publicKey1)", "presharedKeyFile": "/etc/tunnelgate/wg0-office.psk",
                            "endpoint": "vpn.example.net:51820",
                            "allowedIPs": ["10.8.0.0/24", "192.168.10.0/24", "fd00:8::/64"], "persistentKeepalive": 25},
                           {"publicKey": "\(Keys.publicKey2)", "endpoint": "[2001:db8:18::10]:51821",
                            "allowedIPs": ["10.9.0.0/16", "fd00:9::/48"]}]}}
    """

    func parse(_ json: String) throws -> TunnelSettings {
        try TunnelSettings.parse(json: Array(json.utf8), secretFiles: Self.keyFiles)
    }

    func problems(_ json: String, secretFiles: some SecretFileReader = WireGuardRuntimeSettingsTests.keyFiles,
                  file: StaticString = #filePath, line: UInt = #line) -> [String] {
        do {
            _ = try TunnelSettings.parse(json: Array(json.utf8), secretFiles: secretFiles)
            XCTFail("expected the configuration to be refused", file: file, line: line)
            return []
        } catch {
            return error.problems.map(\.description)
        }
    }

    /// A minimal tunnel around `runtime` members (after "kind").
    func config(_ runtime: String, top: String = "") -> String {
        """
        {"tunnelRemoteAddress": "198.18.0.10"\(top),
         "ipv4Settings": {"addresses": ["10.60.0.2"], "subnetMasks": ["255.255.255.0"], "includedRoutes": ["10.60.0.0/24"]},
         "runtime": {"kind": "wireguard"\(runtime)}}
        """
    }

    func testTheSameTunnelAsTheWgQuickFile() throws {
        let json = try parse(Self.full)
        let wgQuick = try WgQuickConfig.parse(WgQuickConfigTests.full, name: "wg0.conf")
        XCTAssertEqual(json, wgQuick)
        guard case .wireguard(let w) = json.runtime else { return XCTFail("not the wireguard runtime") }
        XCTAssertEqual(w.privateKey, SecretKey(base64: Keys.privateKey))
        XCTAssertEqual(w.peers.map(\.presharedKey), [SecretKey(base64: Keys.presharedKey), nil])
        XCTAssertEqual(w.fwMark, 4660)
        // Where each carrier came from, for resolution problems.
        XCTAssertEqual(json.carrierEndpoints.map(\.keyPath), ["carrierEndpoints[0]", "runtime.peers[1].endpoint"])
    }

    func testDefaultsAndEndpointsAsCarriers() throws {
        let s = try parse(config(#", "privateKeyFile": "/etc/tunnelgate/wg0.key", "listenPort": 0, "fwMark": 0, "peers": [{"publicKey": "\#(Keys.publicKey1)", "endpoint": "wg.example.net:51820", "persistentKeepalive": 0}]"#,
                                 top: #", "includeAllNetworks": true"#))
        XCTAssertEqual(s.mtu, WireGuardSettings.defaultMTU)
        guard case .wireguard(let w) = s.runtime else { return XCTFail("not the wireguard runtime") }
        XCTAssertNil(w.listenPort)
        XCTAssertNil(w.fwMark)
        XCTAssertNil(w.peers[0].persistentKeepalive)
        XCTAssertEqual(w.peers[0].allowedIPs, [])
        // The endpoint is a carrier without being listed: kept off the tunnel and let through the kill switch.
        XCTAssertEqual(s.carrierEndpoints.map(\.description), ["198.18.0.10", "wg.example.net:51820"])
        XCTAssertEqual(s.carrierEndpoints.map(\.keyPath), ["tunnelRemoteAddress", "runtime.peers[0].endpoint"])
        XCTAssertEqual(try parse(config(#", "privateKeyFile": "/etc/tunnelgate/wg0.key""#, top: #", "mtu": 1280"#)).mtu, 1280)
        // Other runtimes keep the default of 1500.
        XCTAssertNil(try parse(#"{"tunnelRemoteAddress": "198.18.0.10"}"#).mtu)
    }

    func testEveryProblemIsNamedByKeyPath() {
        XCTAssertEqual(problems(config("""
            , "privateKeyFile": "wg0.key", "listenPort": 70000, "fwMark": -1, "peer": [],
              "peers": [{"publicKey": "\(Keys.privateKey.dropLast(2))l=", "presharedKeyFile": "/etc/tunnelgate/open.psk",
                         "endpoint": "198.18.0.10", "allowedIPs": ["10.0.0.1/24", "nope"], "persistentKeepalive": 65536},
                        {"publicKey": "\(Keys.publicKey1)", "allowedIPs": ["10.0.0.0/24"]},
                        {"publicKey": "\(Keys.publicKey2)", "allowedIPs": ["10.1.0.0/16", "10.0.0.0/24"]},
                        {"publicKey": "\(Keys.publicKey1)"},
                        {"allowedIps": []}]
            """)), [
            "runtime.peer: unknown key (did you mean 'peers'?)",
            "runtime.privateKeyFile: 'wg0.key' is not an absolute path",
            "runtime.listenPort: 70000 is outside 0–65535 (0: any port)",
            "runtime.fwMark: -1 is outside 0–4294967295 (0: the tunnel's own mark)",
            "runtime.peers[0].publicKey: not a base64 32-byte key",
            "runtime.peers[0].presharedKeyFile: /etc/tunnelgate/open.psk can be read by others (mode 644); make it owner-only: chmod 600 /etc/tunnelgate/open.psk",
            "runtime.peers[0].endpoint: '198.18.0.10' has no port (HOST:PORT)",
            "runtime.peers[0].allowedIPs[0]: 10.0.0.1/24 has host bits set (the network is 10.0.0.0/24)",
            "runtime.peers[0].allowedIPs[1]: 'nope' is not an address prefix (ADDRESS/LENGTH)",
            "runtime.peers[0].persistentKeepalive: 65536 is outside 0–65535 seconds (0: off)",
            "runtime.peers[2].allowedIPs[1]: 10.0.0.0/24 is also allowed for runtime.peers[1]",
            "runtime.peers[3].publicKey: the same peer as runtime.peers[1]",
            "runtime.peers[4].allowedIps: unknown key (did you mean 'allowedIPs'?)",
            "runtime.peers[4].publicKey: missing (the peer's base64 public key)",
        ])
    }

    func testKeyFiles() {
        XCTAssertEqual(problems(config("")), [
            "runtime.privateKeyFile: missing (an owner-only file holding the base64 private key, as `wg genkey` writes it)",
        ])
        let hex = problems(config(#", "privateKeyFile": "/etc/tunnelgate/hex.key""#))
        XCTAssertEqual(hex, ["runtime.privateKeyFile: /etc/tunnelgate/hex.key does not hold a base64 32-byte private key (as `wg genkey` writes it)"])
        XCTAssertFalse(hex.joined().contains("a0a0a0"))
        XCTAssertEqual(problems(config(#", "privateKeyFile": "/etc/tunnelgate/none.key""#)),
                       ["runtime.privateKeyFile: /etc/tunnelgate/none.key does not exist"])
        // Without a reader (the NetworkExtension path) no key file is read.
        XCTAssertEqual(problems(config(#", "privateKeyFile": "/etc/tunnelgate/wg0.key""#), secretFiles: NoSecretFiles()), [
            "runtime.privateKeyFile: /etc/tunnelgate/wg0.key is not read here: key files are read by `tunnelgate validate`, `plan` and `up`",
        ])
    }

    func testAFamilyRoutedWithoutAnAddress() throws {
        let s = try parse("""
            {"tunnelRemoteAddress": "198.18.0.10",
             "ipv6Settings": {"addresses": [], "networkPrefixLengths": [], "includedRoutes": ["::/0"]}}
            """)
        XCTAssertEqual(s.ipv6Settings?.includedRoutes, [Route.default(.ipv6)])
        XCTAssertEqual(problems("""
            {"tunnelRemoteAddress": "198.18.0.10",
             "ipv4Settings": {"addresses": [], "subnetMasks": [], "includedRoutes": []}}
            """), ["ipv4Settings.addresses: empty (NEIPv4Settings needs at least one address, or includedRoutes to route IPv4 without one)"])
    }
}
