import XCTest
@testable import TunnelgateSettings

/// The wg-quick format: a realistic file mapped onto TunnelSettings, and every
/// refusal with its exact line, key and reason. Keys never appear in a problem.
final class WgQuickConfigTests: XCTestCase {
    // Bytes 0xa0, 0xa7, 0xae, … (7 apart): distinctive in base64, hex and decimal.
    static let privateKey = "oKeutbzDytHY3+bt9PsCCRAXHiUsMzpBSE9WXWRrcnk="
    static let publicKey1 = "ERgfJi00O0JJUFdeZWxzeoGIj5adpKuyucDHztXc4+o="
    static let presharedKey = "MzpBSE9WXWRrcnmAh46VnKOqsbi/xs3U2+Lp8Pf+BQw="
    static let publicKey2 = "VVxjanF4f4aNlJuiqbC3vsXM09rh6O/2/QQLEhkgJy4="

    static let full = """
    # wg0: the office, as the VPN admin sent it
    [Interface]
    PrivateKey = \(privateKey)  # this host's key
    Address = 10.8.0.2/24
    Address = fd00:8::2/64
    DNS = 10.8.0.1, fd00:8::1, corp.example
    ListenPort = 51820
    MTU = 1380
    FwMark = 0x1234

    [Peer]
    # office gateway
    PublicKey = \(publicKey1)
    PresharedKey = \(presharedKey)
    Endpoint = vpn.example.net:51820
    AllowedIPs = 10.8.0.0/24, 192.168.10.0/24
    AllowedIPs = fd00:8::/64
    PersistentKeepalive = 25

    [peer]
    \tpublickey=\(publicKey2)
    endpoint = [2001:db8:18::10]:51821
    allowedips = 10.9.0.0/16,fd00:9::/48   # lab
    """

    func parse(_ text: String, name: String = "wg0.conf") throws -> TunnelSettings {
        try WgQuickConfig.parse(text, name: name)
    }

    func wireguard(_ s: TunnelSettings, file: StaticString = #filePath, line: UInt = #line) throws -> WireGuardSettings {
        guard case .wireguard(let w) = s.runtime else {
            XCTFail("not the wireguard runtime", file: file, line: line)
            throw CancellationError()
        }
        return w
    }

    /// The problems of a refused file, as printed.
    func problems(_ text: String, name: String = "wg0.conf", file: StaticString = #filePath, line: UInt = #line) -> [String] {
        do {
            _ = try WgQuickConfig.parse(text, name: name)
            XCTFail("expected the file to be refused", file: file, line: line)
            return []
        } catch {
            return error.problems.map(\.description)
        }
    }

    /// An [Interface] with a valid key, then `rest` (line 3 onwards).
    func file(_ rest: String) -> String { "[Interface]\nPrivateKey = \(Self.privateKey)\n" + rest }

    static func routes(_ prefixes: String...) -> [Route] { prefixes.map { Route(destination: IPPrefix($0)!) } }
    static func prefixes(_ prefixes: String...) -> [IPPrefix] { prefixes.map { IPPrefix($0)! } }

    func testFullFileMapsLikeTheIOSApp() throws {
        let s = try parse(Self.full)
        let expected = TunnelSettings(
            name: "wg0", tunnelRemoteAddress: "vpn.example.net", mtu: 1380,
            ipv4Settings: IPv4Settings(addresses: [IPv4Address("10.8.0.2")!], subnetMasks: [IPv4Address("255.255.255.0")!],
                                       includedRoutes: Self.routes("10.8.0.0/24", "192.168.10.0/24", "10.9.0.0/16")),
            ipv6Settings: IPv6Settings(addresses: [IPv6Address("fd00:8::2")!], networkPrefixLengths: [64],
                                       includedRoutes: Self.routes("fd00:8::/64", "fd00:9::/48")),
            dnsSettings: DNSSettings(servers: [IPAddress("10.8.0.1")!, IPAddress("fd00:8::1")!],
                                     searchDomains: ["corp.example"], matchDomains: [""]),
            includeAllNetworks: false, excludeLocalNetworks: false,
            carrierEndpoints: [CarrierEndpoint(host: .name("vpn.example.net"), port: 51820, transport: .udp),
                               CarrierEndpoint(host: .address(IPAddress("2001:db8:18::10")!), port: 51821, transport: .udp)],
            runtime: .wireguard(WireGuardSettings(
                privateKey: SecretKey(base64: Self.privateKey)!, listenPort: 51820, fwMark: 0x1234,
                peers: [
                    .init(publicKey: Base64Key.decode(Self.publicKey1)!, presharedKey: SecretKey(base64: Self.presharedKey)!,
                          endpoint: .init(host: .name("vpn.example.net"), port: 51820),
                          allowedIPs: Self.prefixes("10.8.0.0/24", "192.168.10.0/24", "fd00:8::/64"), persistentKeepalive: 25),
                    .init(publicKey: Base64Key.decode(Self.publicKey2)!,
                          endpoint: .init(host: .address(IPAddress("2001:db8:18::10")!), port: 51821),
                          allowedIPs: Self.prefixes("10.9.0.0/16", "fd00:9::/48")),
                ])))
        XCTAssertEqual(s, expected)
        // Resolution problems will name the line of each endpoint.
        XCTAssertEqual(s.carrierEndpoints.map(\.keyPath), ["wg0.conf:15: [Peer] Endpoint", "wg0.conf:22: [Peer] Endpoint"])
        XCTAssertEqual(try wireguard(s).peers.map { $0.endpoint?.description }, ["vpn.example.net:51820", "[2001:db8:18::10]:51821"])
    }

    func testEndpointHostNamesResolveAsCarriersDo() throws {
        let s = try parse(Self.full)
        let resolver = TableResolver(table: ["vpn.example.net": [IPAddress("198.18.0.10")!]])
        XCTAssertEqual(try s.resolveCarrierEndpoints(using: resolver).map(\.description), ["198.18.0.10", "2001:db8:18::10"])
        XCTAssertThrowsError(try s.resolveCarrierEndpoints(using: TableResolver(table: [:]))) { error in
            XCTAssertEqual((error as? ConfigurationError)?.problems.map(\.description),
                           ["wg0.conf:15: [Peer] Endpoint: 'vpn.example.net' does not resolve (Name or service not known)"])
        }
    }

    func testDefaultsAndTheTunnelNameFromThePath() throws {
        let s = try parse(file("Address = 10.0.0.2\n[Peer]\nPublicKey = \(Self.publicKey1)\nAllowedIPs = 10.0.0.0/24\n"),
                          name: "/etc/wireguard/home.conf")
        XCTAssertEqual(s.name, "home")
        XCTAssertEqual(s.mtu, 1420)
        XCTAssertEqual(s.ipv4Settings?.interfaceAddresses.map(\.description), ["10.0.0.2/32"])
        XCTAssertNil(s.ipv6Settings)
        XCTAssertNil(s.dnsSettings)
        XCTAssertFalse(s.includeAllNetworks)
        // No peer has an endpoint: the iOS app's placeholder, kept off the carrier list.
        XCTAssertEqual(s.tunnelRemoteAddress, "0.0.0.0")
        XCTAssertEqual(s.carrierEndpoints, [])
        let w = try wireguard(s)
        XCTAssertNil(w.listenPort)
        XCTAssertNil(w.fwMark)
        XCTAssertNil(w.peers[0].presharedKey)
        XCTAssertNil(w.peers[0].endpoint)
        XCTAssertNil(w.peers[0].persistentKeepalive)
        XCTAssertEqual(WgQuickConfig.tunnelName(fileName: "wg0"), "wg0")
        XCTAssertEqual(WgQuickConfig.tunnelName(fileName: "./tunnels/wg1.conf"), "wg1")
    }

    func testDefaultRoutesAndAFamilyWithoutAddress() throws {
        // The common full tunnel with an IPv4 address only: IPv6 still goes into the tunnel (not around it).
        let s = try parse(file("Address = 10.0.0.2/32\n[Peer]\nPublicKey = \(Self.publicKey1)\nEndpoint = 198.18.0.10:51820\nAllowedIPs = 0.0.0.0/0, ::/0\n"))
        XCTAssertEqual(s.ipv4Settings?.includedRoutes, [Route.default(.ipv4)])
        XCTAssertEqual(s.ipv6Settings?.addresses, [])
        XCTAssertEqual(s.ipv6Settings?.includedRoutes, [Route.default(.ipv6)])
        XCTAssertEqual(s.tunnelRemoteAddress, "198.18.0.10")
        let intent = RoutingIntent(settings: s, carrierAddresses: try s.resolveCarrierEndpoints(using: TableResolver(table: [:])))
        XCTAssertTrue(intent.ipv6.isActive)
        XCTAssertEqual(intent.ipv4.excluded.map(\.description), ["198.18.0.10/32"])
    }

    func testTableOffInstallsNoRoutesForAllowedIPs() throws {
        let s = try parse(file("Address = 10.0.0.2/24\nTable = off\n[Peer]\nPublicKey = \(Self.publicKey1)\nAllowedIPs = 0.0.0.0/0, ::/0\n"))
        XCTAssertEqual(s.ipv4Settings?.includedRoutes, [])
        XCTAssertNil(s.ipv6Settings)
        // The device still routes by AllowedIPs.
        XCTAssertEqual(try wireguard(s).peers[0].allowedIPs, Self.prefixes("0.0.0.0/0", "::/0"))
        XCTAssertNoThrow(try parse(file("Table = Auto\nSaveConfig = false\n")))
    }

    func testWhatWgQuickAcceptsLexically() throws {
        // Any case, tabs, no spaces, trailing comments, CRLF, a BOM, space-separated addresses,
        // host bits in AllowedIPs (cleared, as wg clears them), "off" values.
        let text = "\u{FEFF}[INTERFACE]\r\n\tprivatekey\t=\(Self.privateKey)\r\naddress=10.0.0.2/24 fd00::2/64 ,\r\n"
            + "dns = 10.0.0.1,\tlan.example # resolver\r\nfwmark = off\r\nlistenport = 0\r\n"
            + "[ Peer ]\r\nPUBLICKEY = \(Self.publicKey1)\r\nAllowedIPs = 10.0.0.7/24 , fd00::7/64,10.0.0.0/24\r\nPersistentKeepalive = off\r\n"
        let s = try parse(text)
        XCTAssertEqual(s.ipv4Settings?.interfaceAddresses.map(\.description), ["10.0.0.2/24"])
        XCTAssertEqual(s.ipv6Settings?.interfaceAddresses.map(\.description), ["fd00::2/64"])
        XCTAssertEqual(s.dnsSettings?.servers.map(\.description), ["10.0.0.1"])
        XCTAssertEqual(s.dnsSettings?.searchDomains, ["lan.example"])
        let w = try wireguard(s)
        XCTAssertNil(w.fwMark)
        XCTAssertNil(w.listenPort)
        XCTAssertEqual(w.peers[0].allowedIPs, Self.prefixes("10.0.0.0/24", "fd00::/64"))
        XCTAssertNil(w.peers[0].persistentKeepalive)
        XCTAssertEqual(try wireguard(parse(file("FwMark = 4660\n"))).fwMark, 4660)
        XCTAssertEqual(try wireguard(parse(file("FwMark = 0\n"))).fwMark, nil)
    }

    func testBriefExamples() {
        XCTAssertEqual(problems("""
        [Interface]
        PrivateKey = \(Self.privateKey)
        Address = 10.0.0.2/32

        [Peer]
        PublicKey = \(Self.publicKey1)
        AllowedIPs = 10.0.0.0/33
        """), ["wg0.conf:7: [Peer] AllowedIPs: 10.0.0.0/33 is not a valid prefix"])
        XCTAssertEqual(problems("# home\n[Interface]\nPrivateKey = \(Self.privateKey.dropLast(2))==\n"),
                       ["wg0.conf:3: [Interface] PrivateKey: not a base64 32-byte key"])
    }

    func testMalformedKeysAreRefusedAndNeverQuoted() {
        let hex = String(repeating: "a0", count: 32)
        let badKeys = [
            String(Self.privateKey.dropLast()),                 // no padding
            String(Self.privateKey.dropLast(2)) + "l=",        // low bits of the last digit set
            "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwd",         // 30 bytes
            hex,                                                // hex is not wg's encoding
            Self.privateKey.replacingOccurrences(of: "+", with: "-"), // URL-safe alphabet
        ]
        for bad in badKeys {
            let p = problems("[Interface]\nPrivateKey = \(bad)\n[Peer]\nPublicKey = \(bad)\nPresharedKey = \(bad)\n")
            XCTAssertEqual(p, ["wg0.conf:2: [Interface] PrivateKey: not a base64 32-byte key",
                               "wg0.conf:4: [Peer] PublicKey: not a base64 32-byte key",
                               "wg0.conf:5: [Peer] PresharedKey: not a base64 32-byte key"], bad)
            XCTAssertFalse(p.joined().contains(bad), "a problem quotes the key \(bad)")
        }
    }

    func testAStrayKeyLineIsNotQuoted() {
        // A key pasted on a line of its own splits at its "=" into a "key" that is key material.
        let p = problems(file("\(Self.presharedKey)\n\(Self.publicKey2.dropLast())\n"))
        XCTAssertEqual(p, ["wg0.conf:3: expected KEY = VALUE, with a key name such as PrivateKey or AllowedIPs",
                           "wg0.conf:4: expected KEY = VALUE or a [Interface] / [Peer] header"])
        XCTAssertFalse(p.joined().contains(Self.presharedKey.dropLast()))
        XCTAssertFalse(p.joined().contains(Self.publicKey2.dropLast()))
    }

    func testStructuralProblems() {
        XCTAssertEqual(problems("PrivateKey = \(Self.privateKey)\n[Interface]\nListenPort = 1\n"), [
            "wg0.conf:1: PrivateKey: outside a section (put it under [Interface] or [Peer])",
            "wg0.conf:2: [Interface] PrivateKey: missing (the interface's base64 private key, as `wg genkey` prints it)",
        ])
        XCTAssertEqual(problems("# nothing\n"), ["wg0.conf: no [Interface] section (a wg-quick file has one, with the PrivateKey)"])
        XCTAssertEqual(problems(file("[Peers]\nPublicKey = \(Self.publicKey1)\n[Interface]\nMTU = 1400\n[Wat\n")), [
            "wg0.conf:3: [Peers]: unknown section (did you mean [Peer]?)",
            "wg0.conf:5: [Interface]: a second [Interface] section (the first is on line 1)",
            "wg0.conf:7: a section header is [Interface] or [Peer]",
        ])
        XCTAssertEqual(problems(file("[Peer]\nEndpoint = 198.18.0.10:51820\n")), [
            "wg0.conf:3: [Peer] PublicKey: missing (the peer's base64 public key)",
        ])
    }

    func testUnknownAndMisplacedKeys() {
        XCTAssertEqual(problems(file("ListenPrt = 51820\nAllowedIPs = 10.0.0.0/8\nFrobnicate = 1\n[Peer]\nPublicKey = \(Self.publicKey1)\nallowed ips = 10.0.0.0/8\nAddress = 10.0.0.2\n")), [
            "wg0.conf:3: [Interface] ListenPrt: unknown key (did you mean 'ListenPort'?)",
            "wg0.conf:4: [Interface] AllowedIPs: belongs in [Peer], not [Interface]",
            "wg0.conf:5: [Interface] Frobnicate: unknown key (known in [Interface]: PrivateKey, ListenPort, FwMark, Address, DNS, MTU, Table, SaveConfig, PreUp, PostUp, PreDown, PostDown)",
            "wg0.conf:8: expected KEY = VALUE, with a key name such as PrivateKey or AllowedIPs",
            "wg0.conf:9: [Peer] Address: belongs in [Interface], not [Peer]",
        ])
    }

    func testRefusedKeysSayWhy() {
        XCTAssertEqual(problems(file("PostUp = iptables -A FORWARD -i %i -j ACCEPT\npredown = echo bye\nTable = 1234\nTable = main\nSaveConfig = true\n")), [
            "wg0.conf:3: [Interface] PostUp: refused: Tunnelgate never runs shell commands from a configuration (PreUp, PostUp, PreDown, PostDown); remove it and run the command outside tunnelgate",
            "wg0.conf:4: [Interface] PreDown: refused: Tunnelgate never runs shell commands from a configuration (PreUp, PostUp, PreDown, PostDown); remove it and run the command outside tunnelgate",
            "wg0.conf:5: [Interface] Table: refused: Tunnelgate routes each tunnel through a table of its own (7460 + slot, chosen at up); use auto (the default) or off (no routes for AllowedIPs)",
            "wg0.conf:6: [Interface] Table: given twice (also on line 5)",
            "wg0.conf:7: [Interface] SaveConfig: refused: Tunnelgate never writes the configuration back; remove SaveConfig or set it to false",
        ])
        XCTAssertEqual(problems(file("SaveConfig = yes\n")), ["wg0.conf:3: [Interface] SaveConfig: yes is not true or false"])
    }

    func testValueProblems() {
        XCTAssertEqual(problems(file("""
        Address = 10.0.0.2/33, 10.0.0.300, fd00::1
        ListenPort = 65536
        FwMark = 010
        MTU = big
        PrivateKey = \(Self.privateKey)
        [Peer]
        PublicKey = \(Self.publicKey1)
        Endpoint = 198.18.0.10
        PersistentKeepalive = 70000
        [Peer]
        PublicKey = \(Self.publicKey2)
        Endpoint = 2001:db8::1:51820
        AllowedIPs = 10.0.0.0/24, ten
        """)), [
            "wg0.conf:3: [Interface] Address: 10.0.0.2/33: prefix length must be 0–32",
            "wg0.conf:3: [Interface] Address: 10.0.0.300 is not an address (ADDRESS or ADDRESS/LENGTH)",
            "wg0.conf:4: [Interface] ListenPort: 65536 is not a port (0–65535)",
            "wg0.conf:5: [Interface] FwMark: 010 is ambiguous (wg reads a leading 0 as octal); write it in decimal or as 0x hexadecimal",
            "wg0.conf:6: [Interface] MTU: big is not a number",
            "wg0.conf:7: [Interface] PrivateKey: given twice (also on line 2)",
            "wg0.conf:10: [Peer] Endpoint: '198.18.0.10' has no port (HOST:PORT)",
            "wg0.conf:11: [Peer] PersistentKeepalive: 70000 is not a number of seconds (0–65535) or off",
            "wg0.conf:14: [Peer] Endpoint: '2001:db8::1:51820' is not an address; write an IPv6 address with a port as [ADDRESS]:PORT",
            "wg0.conf:15: [Peer] AllowedIPs: ten is not a valid prefix",
        ])
        XCTAssertEqual(problems(file("FwMark = 0x1FFFFFFFF\n[Peer]\nPublicKey = \(Self.publicKey1)\nEndpoint = [fd00::1]\n")), [
            "wg0.conf:3: [Interface] FwMark: 0x1FFFFFFFF is not a 32-bit mark (decimal, 0x hexadecimal or off)",
            "wg0.conf:6: [Peer] Endpoint: '[fd00::1]' has no port; write an IPv6 endpoint as [ADDRESS]:PORT",
        ])
    }

    func testDuplicatePeersAndSharedAllowedIPs() {
        XCTAssertEqual(problems(file("""
        [Peer]
        PublicKey = \(Self.publicKey1)
        AllowedIPs = 10.0.0.0/24
        [Peer]
        PublicKey = \(Self.publicKey2)
        AllowedIPs = 10.0.1.0/24, 10.0.0.9/24
        [Peer]
        PublicKey = \(Self.publicKey1)
        """)), [
            "wg0.conf:8: [Peer] AllowedIPs: 10.0.0.0/24 is also allowed for the [Peer] on line 3",
            "wg0.conf:10: [Peer] PublicKey: the same peer as the [Peer] on line 3",
        ])
    }

    func testTheJSONReadersChecksNameTheLine() {
        // Interface addresses, MTU, DNS and the tunnel name are checked by the JSON format's reader.
        XCTAssertEqual(problems(file("""
        Address = 10.0.0.2/24, 127.0.0.1
        Address = 10.0.0.2/16
        DNS = 10.0.0.1, -bad.example
        MTU = 500
        """), name: "/etc/wireguard/a-very-long-name.conf"), [
            "/etc/wireguard/a-very-long-name.conf: tunnel name (from the file name): 'a-very-long-name' is 16 bytes; the kernel takes interface names of at most 15",
            "/etc/wireguard/a-very-long-name.conf:3: [Interface] Address: 127.0.0.1 cannot be an interface address (loopback)",
            "/etc/wireguard/a-very-long-name.conf:4: [Interface] Address: 10.0.0.2 is listed twice",
            "/etc/wireguard/a-very-long-name.conf:5: [Interface] DNS: '-bad.example' is not a domain ('-bad' begins or ends with '-')",
            "/etc/wireguard/a-very-long-name.conf:6: [Interface] MTU: 500 is outside 576–65535",
        ])
        XCTAssertEqual(problems(file("Address = fd00::2/64\nMTU = 1200\n")),
                       ["wg0.conf:4: [Interface] MTU: 1200 is below 1280, the minimum for IPv6 (ipv6Settings is configured)"])
        XCTAssertEqual(problems(file("DNS = corp.example\n")),
                       ["wg0.conf:3: [Interface] DNS: search domains but no server address (give at least one IP address)"])
    }

    func testSettingsNeverShowTheKeys() throws {
        let s = try parse(Self.full)
        var dumped = ""
        dump(s, to: &dumped)
        let bytes = Base64Key.decode(Self.privateKey)!
        let psk = Base64Key.decode(Self.presharedKey)!
        let w = try wireguard(s)
        for text in [String(describing: s), String(reflecting: s), dumped, "\(w)", "\(w.peers)"] {
            for secret in [Self.privateKey, Self.presharedKey, MeshRuntimeSettings.hex(bytes), MeshRuntimeSettings.hex(psk),
                           bytes.map(String.init).joined(separator: ", "), psk.map(String.init).joined(separator: ", ")] {
                XCTAssertFalse(text.contains(secret), "the settings' description shows a key: \(text)")
            }
            XCTAssertTrue(text.contains("SecretKey"), text)
        }
        // Still the same key underneath.
        w.privateKey.withUnsafeBytes { XCTAssertEqual(Array($0), bytes) }
    }

    func testRecognisedByContent() {
        XCTAssertTrue(WgQuickConfig.looksLikeWgQuick(Array("# wg\n\n  [ interface ]  # x\nPrivateKey = k\n".utf8)))
        XCTAssertFalse(WgQuickConfig.looksLikeWgQuick(Array("{\"tunnelRemoteAddress\": \"198.18.0.10\"}".utf8)))
        XCTAssertFalse(WgQuickConfig.looksLikeWgQuick(Array("[Peer]\n[Interface]\n".utf8)))
        XCTAssertFalse(WgQuickConfig.looksLikeWgQuick([]))
    }

    func testBase64KeysRoundTrip() {
        let bytes = Base64Key.decode(Self.privateKey)!
        XCTAssertEqual(bytes, (0..<32).map { UInt8((0xa0 + $0 * 7) % 256) })
        XCTAssertEqual(Base64Key.encode(bytes), Self.privateKey)
        XCTAssertEqual(Base64Key.encode(Array(repeating: 0xff, count: 32)), "//////////////////////////////////////////8=")
        XCTAssertNotEqual(SecretKey(base64: Self.privateKey), SecretKey(base64: Self.presharedKey))
        XCTAssertEqual(SecretKey(bytes: bytes), SecretKey(base64: Self.privateKey))
        XCTAssertNil(SecretKey(bytes: Array(bytes.dropLast())))
    }

    // MARK: The keys never become Strings

    /// An allocator that counts what it handed out, and keeps it, so the test can look at it.
    final class CountingAllocator: SecretMemoryAllocator, @unchecked Sendable {
        var handedOut: [UnprotectedSecretMemory] = []
        func allocate(count: Int) -> (any SecretMemory)? {
            let m = UnprotectedSecretMemory(count: count)
            handedOut.append(m)
            return m
        }
    }

    func contents(_ text: String) -> UnprotectedSecretMemory {
        let m = UnprotectedSecretMemory(count: text.utf8.count)
        m.withUnsafeMutableBytes { $0.copyBytes(from: text.utf8) }
        return m
    }

    func holds(_ memory: some SecretMemory, _ text: String) -> Bool {
        memory.withUnsafeBytes { raw in
            let needle = Array(text.utf8), hay = Array(raw)
            guard hay.count >= needle.count else { return false }
            return (0...(hay.count - needle.count)).contains { hay[$0..<($0 + needle.count)].elementsEqual(needle) }
        }
    }

    func testKeysAreDecodedFromTheFilesBytesIntoTheGivenMemoryAndTheirTextOverwritten() throws {
        let file = contents(Self.full)
        let allocator = CountingAllocator()
        let s = try WgQuickConfig.parse(contents: file, name: "wg0.conf", secretMemory: allocator)
        let w = try wireguard(s)
        XCTAssertFalse(holds(file, Self.privateKey), "the private key's text is gone from the file's bytes")
        XCTAssertFalse(holds(file, Self.presharedKey), "and the preshared key's")
        XCTAssertTrue(holds(file, Self.publicKey1), "public keys stay (they are read as text)")
        XCTAssertEqual(allocator.handedOut.count, 2, "one memory per key, from the allocator given")
        XCTAssertTrue(w.privateKey.memory === allocator.handedOut[0], "the settings hold that memory, not a copy")
        XCTAssertTrue(w.peers[0].presharedKey?.memory === allocator.handedOut[1])
        XCTAssertEqual(w.privateKey, SecretKey(base64: Self.privateKey))
        XCTAssertEqual(w.peers[0].presharedKey, SecretKey(base64: Self.presharedKey))
    }

    func testKeyLinesAreFoundAsTheTextParserReadsThem() throws {
        // CR LF endings, a key name in odd case and spacing, a key split by spaces and tabs (wg(8)
        // removes white space), a comment after it.
        let k = Self.privateKey
        let spaced = String(k.prefix(10)) + " \t " + String(k.dropFirst(10))
        let text = "[Interface]\r\n  pRiVaTeKeY\t=  \(spaced)   # mine\r\nAddress = 10.8.0.2/24\r\n"
            + "[Peer]\r\nPublicKey = \(Self.publicKey1)\r\nPresharedKey=\(Self.presharedKey)\r\nAllowedIPs = 10.8.0.0/24\r\n"
        let file = contents(text)
        let w = try wireguard(try WgQuickConfig.parse(contents: file, name: "wg0.conf", secretMemory: UnprotectedSecretMemoryAllocator()))
        XCTAssertEqual(w.privateKey, SecretKey(base64: k))
        XCTAssertEqual(w.peers[0].presharedKey, SecretKey(base64: Self.presharedKey))
        XCTAssertFalse(holds(file, String(k.dropFirst(10))))
        XCTAssertFalse(holds(file, Self.presharedKey))
    }

    func testAKeyInTheWrongPlaceIsTakenOutTooAndRefusedWithoutItsValue() {
        // Before any section, and in [Peer]: the text parser refuses both; the text is gone all the same.
        let text = "PrivateKey = \(Self.privateKey)\n[Interface]\nPrivateKey = \(Self.privateKey)\n"
            + "[Peer]\nPublicKey = \(Self.publicKey1)\nPrivateKey = \(Self.presharedKey)\n"
        let file = contents(text)
        XCTAssertThrowsError(try WgQuickConfig.parse(contents: file, name: "wg0.conf", secretMemory: UnprotectedSecretMemoryAllocator())) { error in
            let problems = (error as? ConfigurationError)?.problems.map(\.description) ?? []
            XCTAssertEqual(problems, ["wg0.conf:1: PrivateKey: outside a section (put it under [Interface] or [Peer])",
                                      "wg0.conf:6: [Peer] PrivateKey: belongs in [Interface], not [Peer]"])
            for p in problems { XCTAssertFalse(p.contains(Self.privateKey) || p.contains(Self.presharedKey)) }
        }
        XCTAssertFalse(holds(file, Self.privateKey))
        XCTAssertFalse(holds(file, Self.presharedKey))
    }

    func testBase64DecodingIntoMemoryIsAsStrictAsWg() {
        func decodes(_ text: String) -> Bool {
            guard let d = Array(text.utf8).withUnsafeBytes({ SecretKey.decode(base64: $0, using: UnprotectedSecretMemoryAllocator()) }),
                  case .key = d else { return false }
            return true
        }
        XCTAssertTrue(decodes(Self.privateKey))
        XCTAssertTrue(decodes(" \(Self.privateKey)\t"))
        XCTAssertFalse(decodes(String(Self.privateKey.dropLast())), "no padding")
        XCTAssertFalse(decodes(Self.privateKey + "="), "more after the padding")
        XCTAssertFalse(decodes(String(Self.privateKey.dropLast(2)) + "B="), "unused low bits set")
        XCTAssertFalse(decodes(String(Self.privateKey.dropLast(2)) + "*="), "not base64")
        XCTAssertFalse(decodes("AA="), "too short")
        XCTAssertNil(Base64Key.decode(String(Self.privateKey.prefix(10)) + " " + String(Self.privateKey.dropFirst(10))),
                     "a public key in JSON has no spaces")
    }
}
