import XCTest
@testable import TunnelgateSettings

/// `runtime.kind mesh`: keys, identities in hex and base64, peers by prefix or auto, the MTU limit.
final class MeshRuntimeSettingsTests: XCTestCase {
    static let hexID = String(repeating: "ab", count: 32)
    // 32 bytes 0x00…0x1f in base64, and the same with URL-safe letters and no padding.
    static let b64ID = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="
    static let wgKey = "+/+/+/+/+/+/+/+/+/+/+/+/+/+/+/+/+/+/+/+/+/8="

    func config(runtime: String, mtu: String = #", "mtu": 1396"#) -> String {
        """
        {"tunnelRemoteAddress": "192.168.231.2"\(mtu),
         "ipv4Settings": {"addresses": ["10.60.0.1"], "subnetMasks": ["255.255.255.0"], "includedRoutes": ["10.60.0.0/24"]},
         "runtime": {"kind": "mesh", "library": "/opt/meshguard/libmeshguard-ffi.so",
                     "identitySeedFile": "/etc/tunnelgate/mesh.seed"\(runtime)}}
        """
    }

    func parse(_ json: String) throws -> MeshRuntimeSettings {
        let s = try TunnelSettings.parse(json: Array(json.utf8))
        guard case .mesh(let m) = s.runtime else { XCTFail("not a mesh runtime: \(s.runtime)"); throw CancellationError() }
        return m
    }

    func problems(_ json: String, file: StaticString = #filePath, line: UInt = #line) -> [String] {
        do {
            _ = try TunnelSettings.parse(json: Array(json.utf8))
            XCTFail("expected the configuration to be refused", file: file, line: line)
            return []
        } catch {
            return error.problems.map(\.description)
        }
    }

    func testFullConfiguration() throws {
        let m = try parse(config(runtime: """
            , "generateIdentity": true, "listenPort": 5510, "seeds": ["192.168.231.2:5510", "seed.mesh.example:7000"],
              "relay": "\(Self.hexID)", "contacts": [{"identity": "\(Self.b64ID)", "wireguardKey": "\(Self.wgKey)"}],
              "contactsOnly": true,
              "peers": {"\(Self.hexID)": ["10.60.0.2/32", "10.70.0.0/24"], "\(Self.b64ID)": ["fd00:70::/64"]},
              "keepaliveSeconds": 20, "startTimeoutSeconds": 45
            """))
        XCTAssertEqual(m.library, "/opt/meshguard/libmeshguard-ffi.so")
        XCTAssertEqual(m.identitySeedFile, "/etc/tunnelgate/mesh.seed")
        XCTAssertTrue(m.generateIdentity)
        XCTAssertEqual(m.listenPort, 5510)
        XCTAssertEqual(m.seeds.map(\.description), ["192.168.231.2:5510", "seed.mesh.example:7000"])
        XCTAssertEqual(m.seeds[0].ipv4?.description, "192.168.231.2")
        XCTAssertNil(m.seeds[1].ipv4)
        XCTAssertEqual(m.relay, Array(repeating: 0xab, count: 32))
        XCTAssertEqual(m.contacts.first?.identity, Array(0..<32))
        XCTAssertEqual(m.contacts.first?.wireguardKey.count, 32)
        XCTAssertEqual(m.contactsOnly, true)
        XCTAssertEqual(m.keepaliveSeconds, 20)
        XCTAssertEqual(m.startTimeoutSeconds, 45)
        guard case .routes(let routes) = m.peers else { return XCTFail("expected routes") }
        XCTAssertEqual(routes.map(\.identity), [Array(repeating: 0xab, count: 32), Array(0..<32)])
        XCTAssertEqual(routes[0].prefixes.map(\.description), ["10.60.0.2/32", "10.70.0.0/24"])
        XCTAssertEqual(routes[1].prefixes.map(\.description), ["fd00:70::/64"])
    }

    func testDefaultsAndAuto() throws {
        let m = try parse(config(runtime: #", "seeds": ["10.0.0.1:5510"], "peers": "auto""#))
        XCTAssertEqual(m.peers, .auto)
        XCTAssertFalse(m.generateIdentity)
        XCTAssertEqual(m.listenPort, 0)
        XCTAssertNil(m.relay)
        XCTAssertNil(m.keepaliveSeconds)
        // peers defaults to auto.
        XCTAssertEqual(try parse(config(runtime: #", "seeds": ["10.0.0.1:5510"]"#)).peers, .auto)
    }

    func testKeyFormats() {
        XCTAssertEqual(MeshRuntimeSettings.parseKey(Self.hexID), Array(repeating: 0xab, count: 32))
        XCTAssertEqual(MeshRuntimeSettings.parseKey(Self.hexID.uppercased()), Array(repeating: 0xab, count: 32))
        XCTAssertEqual(MeshRuntimeSettings.parseKey(Self.b64ID), Array(0..<32))
        XCTAssertEqual(MeshRuntimeSettings.parseKey(String(Self.b64ID.dropLast())), Array(0..<32))  // unpadded
        XCTAssertEqual(MeshRuntimeSettings.parseKey("-_-_" + String(repeating: "A", count: 39) + "="), MeshRuntimeSettings.parseKey("+/+/" + String(repeating: "A", count: 39) + "="))
        XCTAssertNil(MeshRuntimeSettings.parseKey(String(repeating: "ab", count: 31)))   // 31 bytes
        XCTAssertNil(MeshRuntimeSettings.parseKey(String(repeating: "zz", count: 32)))   // not hex, not 32 bytes of base64
        XCTAssertNil(MeshRuntimeSettings.parseKey("AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHg=="))  // 31 bytes
        XCTAssertNil(MeshRuntimeSettings.parseKey("AAEC*wQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="))
        XCTAssertEqual(MeshRuntimeSettings.hex(Array(0..<4)), "00010203")
    }

    func testErrorsNameTheKey() {
        let p = problems(config(runtime: """
            , "listenPort": 70000, "seeds": ["10.0.0.1", "[fd00::1]:5510", "bad host!:1", "10.0.0.2:0"],
              "relay": "nope", "contacts": [{"identity": "\(Self.hexID)"}, {"identity": "xx", "wireguardKey": "\(Self.wgKey)", "extra": 1}],
              "peers": {"short": ["10.0.0.0/8"], "\(Self.hexID)": ["10.0.0.1/8", "not-a-prefix", 5]},
              "keepaliveSeconds": 0
            """))
        let expected = [
            "runtime.listenPort: 70000 is outside 0–65535",
            "runtime.seeds[0]: '10.0.0.1' is not IP:port or host:port (port 1–65535)",
            "runtime.seeds[1]: '[fd00::1]:5510': MeshGuard joins over IPv4; give an IPv4 address or a host name",
            "runtime.seeds[2]: 'bad host!' is neither an IPv4 address nor a valid host name",
            "runtime.seeds[3]: '10.0.0.2:0' is not IP:port or host:port (port 1–65535)",
            "runtime.relay: 'nope' is not a 32-byte relay identity (64 hex digits or base64)",
            "runtime.contacts[0].wireguardKey: missing",
            "runtime.contacts[1].extra: unknown key",
            "runtime.contacts[1].identity: 'xx' is not a 32-byte identity (64 hex digits or base64)",
            "runtime.peers.short: 'short' is not a 32-byte identity (64 hex digits or base64)",
            "runtime.peers.\(Self.hexID)[0]: '10.0.0.1/8' has host bits set (did you mean 10.0.0.0/8?)",
            "runtime.peers.\(Self.hexID)[1]: 'not-a-prefix' is not an IP prefix",
            "runtime.peers.\(Self.hexID)[2]: expected a string, found a number",
            "runtime.keepaliveSeconds: 0 is outside 1–600",
        ]
        for e in expected {
            XCTAssertTrue(p.contains { $0.hasPrefix(e) }, "no problem starting with \(e) in:\n\(p.joined(separator: "\n"))")
        }
    }

    func testMissingKeys() {
        let p = problems(#"{"tunnelRemoteAddress": "10.0.0.1", "mtu": 1396, "runtime": {"kind": "mesh"}}"#)
        XCTAssertTrue(p.contains { $0.hasPrefix("runtime.library: missing") }, "\(p)")
        XCTAssertTrue(p.contains { $0.hasPrefix("runtime.identitySeedFile: missing") }, "\(p)")
        XCTAssertTrue(p.contains { $0.hasPrefix("runtime.seeds: missing") }, "\(p)")
        let relative = problems(config(runtime: #", "seeds": []"#).replacingOccurrences(of: "/etc/tunnelgate/mesh.seed", with: "mesh.seed"))
        XCTAssertTrue(relative.contains { $0.hasPrefix("runtime.identitySeedFile: 'mesh.seed' is not an absolute path") }, "\(relative)")
        XCTAssertTrue(relative.contains { $0.hasPrefix("runtime.seeds: empty") }, "\(relative)")
        let peers = problems(config(runtime: #", "seeds": ["10.0.0.1:1"], "peers": "all""#))
        XCTAssertTrue(peers.contains { $0.hasPrefix("runtime.peers: 'all' is not \"auto\"") }, "\(peers)")
    }

    func testAPrivilegedListenPortIsRefused() throws {
        // MeshGuard binds its own socket in the unprivileged packet plane.
        XCTAssertEqual(problems(config(runtime: #", "listenPort": 443, "seeds": ["10.0.0.1:5510"]"#)), [
            "runtime.listenPort: 443 is below 1024, which the packet plane may not bind (MeshGuard opens its own socket there); use 1024–65535, or 0 for any",
        ])
        XCTAssertEqual(try parse(config(runtime: #", "listenPort": 1024, "seeds": ["10.0.0.1:5510"]"#)).listenPort, 1024)
        XCTAssertEqual(try parse(config(runtime: #", "listenPort": 0, "seeds": ["10.0.0.1:5510"]"#)).listenPort, 0)
    }

    func testTheMTUIsLimitedTo1396() throws {
        let runtime = #", "seeds": ["10.0.0.1:5510"]"#
        XCTAssertNoThrow(try parse(config(runtime: runtime, mtu: #", "mtu": 1396"#)))
        XCTAssertNoThrow(try parse(config(runtime: runtime, mtu: #", "mtu": 1280"#)))
        XCTAssertEqual(problems(config(runtime: runtime, mtu: #", "mtu": 1400"#)),
                       ["mtu: 1400 is above 1396, MeshGuard's tunnel payload limit (runtime.kind mesh): use 1396 or less"])
        let missing = problems(config(runtime: runtime, mtu: ""))
        XCTAssertEqual(missing.count, 1)
        XCTAssertTrue(missing[0].hasPrefix("mtu: missing: a mesh runtime needs \"mtu\" of at most 1396"), "\(missing)")
    }

    func testUnknownKindListsMesh() {
        let p = problems(#"{"tunnelRemoteAddress": "10.0.0.1", "runtime": {"kind": "openvpn"}}"#)
        XCTAssertEqual(p, ["runtime.kind: unknown runtime kind 'openvpn' (supported: none, callback, mesh, wireguard)"])
    }

    // MARK: - The mesh address ("auto")

    static func bytes(_ hex: String) -> [UInt8] { MeshRuntimeSettings.parseKey(hex)! }

    /// BLAKE3 against values computed with Zig's std.crypto.hash.Blake3 (the implementation MeshGuard
    /// uses) for the BLAKE3 test-vector input pattern (byte i = i mod 251), across block boundaries.
    func testBlake3() {
        let expected: [Int: String] = [
            0: "af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262",
            1: "2d3adedff11b61f14c886e35afa036736dcd87a74d27b5c1510225d0f592e213",
            32: "e528e95798037df410543d9f31e396ecdd458d71b157d6014398bae32fb56c65",
            63: "e9bc37a594daad83be9470df7f7b3798297c3d834ce80ba85d6e207627b7db7b",
            64: "4eed7141ea4a5cd4b788606bd23f46e212af9cacebacdc7d1f4c6dc7f2511b98",
            65: "de1e5fa0be70df6d2be8fffd0e99ceaa8eb6e8c93a63f2d8d1c30ecb6b263dee",
            1023: "10108970eeda3eb932baac1428c7a2163b0e924c9a9e25b35bba72b28f70bd11",
            1024: "42214739f095a406f3fc83deb889744ac00df831c10daa55189b5d121c855af7",
        ]
        for (n, digest) in expected.sorted(by: { $0.key < $1.key }) {
            let input = (0..<n).map { UInt8($0 % 251) }
            XCTAssertEqual(MeshRuntimeSettings.hex(Blake3.hash(input)), digest, "BLAKE3 of \(n) bytes")
        }
    }

    /// Identities (Ed25519 public keys of the seeds 00 01 … 1f and others, as the real
    /// libmeshguard-ffi.so's meshguard_get_pubkey reports them) and the mesh IPv4 MeshGuard derives.
    func testMeshAddressDerivation() {
        let cases = [
            ("03a107bff3ce10be1d70dd18e74bc09967e4d6309ba50d5f1ddc8664125531b8", "10.99.152.186"),
            ("79b5562e8fe654f94078b112e8a98ba7901f853ae695bed7e0e3910bad049664", "10.99.71.24"),
            ("c5db2c53c2bcf3dd886f05e60ac9828ed244e61a4fdc09277d58bdf4af1ba29f", "10.99.22.210"),
            ("1d82c3c7343151a824cc0c85e178a7fc56c3090faa5c8301d70c3891c15e853e", "10.99.161.250"),
        ]
        for (identity, address) in cases {
            XCTAssertEqual(MeshRuntimeSettings.meshIPv4(identity: Self.bytes(identity)).description, address, identity)
        }
        // The edge rules: the third octet is never 0, the last never 0 or 255; always inside 10.99.0.0/16.
        var thirdZero = false, lastEdge = false
        for i in 0..<2000 {
            let id = (0..<32).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ i &* 13 &+ i >> 8) }
            let a = MeshRuntimeSettings.meshIPv4(identity: id)
            let h = Blake3.hash(id)
            XCTAssertTrue(MeshRuntimeSettings.meshNetwork.contains(.v4(a)))
            let b = a.description.split(separator: ".").map { Int($0)! }
            XCTAssertNotEqual(b[2], 0); XCTAssertNotEqual(b[3], 0); XCTAssertNotEqual(b[3], 255)
            XCTAssertEqual(b[2], h[0] == 0 ? 1 : Int(h[0]))
            XCTAssertEqual(b[3], h[1] == 0 ? 1 : h[1] == 255 ? 254 : Int(h[1]))
            thirdZero = thirdZero || h[0] == 0
            lastEdge = lastEdge || h[1] == 0 || h[1] == 255
        }
        XCTAssertTrue(thirdZero && lastEdge, "the sample should reach the edge rules")
    }

    func autoConfig(addresses: String, runtime: String = #", "runtime": {"kind": "mesh", "library": "/l.so", "identitySeedFile": "/s", "seeds": ["10.0.0.1:1"]}"#) -> String {
        """
        {"tunnelRemoteAddress": "10.0.0.1", "mtu": 1396,
         "ipv4Settings": {"addresses": \(addresses), "subnetMasks": ["255.255.0.0", "255.255.255.0"], "includedRoutes": ["10.99.0.0/16"]}\(runtime)}
        """
    }

    func testAutoAddress() throws {
        let s = try TunnelSettings.parse(json: Array(autoConfig(addresses: #"["10.60.0.1", "auto"]"#).utf8))
        XCTAssertEqual(s.meshAddressIndex, 1)
        XCTAssertEqual(s.meshAddressPath, "ipv4Settings.addresses[1]")
        let r = try s.resolvingMeshAddress(IPv4Address("10.99.152.186")!)
        XCTAssertNil(r.meshAddressIndex)
        XCTAssertEqual(r.ipv4Settings?.addresses.map(\.description), ["10.60.0.1", "10.99.152.186"])
        XCTAssertEqual(r.ipv4Settings?.interfaceAddresses.map(\.description), ["10.60.0.1/16", "10.99.152.186/24"])
        // The derived address may not also be written out.
        XCTAssertThrowsError(try s.resolvingMeshAddress(IPv4Address("10.60.0.1")!)) { e in
            XCTAssertEqual((e as? ConfigurationError)?.problems.map(\.description),
                           ["ipv4Settings.addresses[0]: 10.60.0.1 is also this node's mesh address ('auto' at [1])"])
        }
        // Without "auto", nothing to resolve.
        let fixed = try TunnelSettings.parse(json: Array(autoConfig(addresses: #"["10.60.0.1", "10.60.1.1"]"#).utf8))
        XCTAssertNil(fixed.meshAddressIndex)
        XCTAssertEqual(try fixed.resolvingMeshAddress(IPv4Address("10.99.1.1")!), fixed)
    }

    func testAutoAddressNeedsTheMeshRuntime() {
        XCTAssertEqual(problems(autoConfig(addresses: #"["auto", "10.60.0.1"]"#, runtime: "")),
                       ["ipv4Settings.addresses[0]: 'auto' is this node's mesh address, derived from its MeshGuard identity: it needs runtime.kind mesh"])
        XCTAssertEqual(problems(autoConfig(addresses: #"["auto", "auto"]"#)), ["ipv4Settings.addresses[1]: 'auto' is listed twice"])
        XCTAssertTrue(problems(autoConfig(addresses: #"["automatic", "10.60.0.1"]"#))
            .contains("ipv4Settings.addresses[0]: 'automatic' is not an IPv4 address"))
    }
}
