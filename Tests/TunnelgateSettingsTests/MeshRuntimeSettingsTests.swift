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
}
