import TunnelgateSettings
@testable import WireGuard
import XCTest

/// The cross-platform userspace API as wg(8) speaks it (ipc-uapi.h) and wireguard-go answers it
/// (device/uapi.go): the requests wg(8) writes parse to the change they mean, and what wireguard-go
/// refuses is refused with its errno.
final class UAPITests: XCTestCase {
    let privateHex = "e84b5a6d2717c1003a13b431570353dbaca9146cf150c5f8575680feba52027a" // clamped already
    let peerHex = "b85996fecc9c7f1fc6d2572a76eda11d59bcd20be8e543b15ce4bd85a8e75a33"
    let otherPeerHex = "58402e695ba1772b1cc9309755f043251ea77fdcf10fbe63989ceb7e19321376"
    let pskHex = "188515093e952f5f22e865cef3012e72f8b5f0b598ac0309d5dacce3b70fcf52"

    func parse(_ text: String) throws(UAPI.Failure) -> UAPI.Request {
        try UAPI.parse(text.split(separator: "\n", omittingEmptySubsequences: false).filter { !$0.isEmpty })
    }

    func change(_ text: String, file: StaticString = #filePath, line: UInt = #line) -> UAPI.InterfaceChange? {
        do throws(UAPI.Failure) {
            guard case .set(let change) = try parse(text) else {
                XCTFail("not a set", file: file, line: line)
                return nil
            }
            return change
        } catch {
            XCTFail("refused (errno \(error.errno)): \(error.description)", file: file, line: line)
            return nil
        }
    }

    func failure(_ text: String, file: StaticString = #filePath, line: UInt = #line) -> UAPI.Failure? {
        do throws(UAPI.Failure) {
            let request = try parse(text)
            XCTFail("accepted: \(request)", file: file, line: line)
            return nil
        } catch {
            return error
        }
    }

    func bytes(_ hexText: String) -> [UInt8] { hex(hexText) }

    // MARK: get

    func testGet() throws {
        XCTAssertEqual(try parse("get=1\n"), .get)
        // wireguard-go: "trailing character in UAPI get", EINVAL.
        XCTAssertEqual(failure("get=1\nlisten_port=1\n")?.errno, 22)
    }

    // MARK: set, interface

    func testSetInterfaceKeys() throws {
        let c = try XCTUnwrap(change("""
            set=1
            private_key=\(privateHex)
            listen_port=51820
            fwmark=4294967295
            replace_peers=true
            """))
        XCTAssertEqual(c.privateKey, .some(SecretKey(bytes: bytes(privateHex))))
        XCTAssertEqual(c.listenPort, 51_820)
        XCTAssertEqual(c.fwmark, 4_294_967_295)
        XCTAssertTrue(c.replacePeers)
        XCTAssertEqual(c.peers, [])
    }

    func testSetWithNothingChangesNothing() throws {
        XCTAssertEqual(change("set=1\n"), UAPI.InterfaceChange())
    }

    /// `wg set wg0 listen-port 0` (any free port) and `fwmark off` (wg(8) sends 0); an all-zero
    /// private key asks to remove it; an upper-case hex key is the same key.
    func testZeroValuesWgSends() throws {
        let c = try XCTUnwrap(change("set=1\nlisten_port=0\nfwmark=0\nprivate_key=\(String(repeating: "0", count: 64))\n"))
        XCTAssertEqual(c.listenPort, 0)
        XCTAssertEqual(c.fwmark, 0)
        XCTAssertEqual(c.privateKey, .some(nil))
        XCTAssertEqual(change("set=1\nprivate_key=\(privateHex.uppercased())\n")?.privateKey, .some(SecretKey(bytes: bytes(privateHex))))
        XCTAssertEqual(change("set=1\nlisten_port=00080\n")?.listenPort, 80, "leading zeros, as strconv.ParseUint")
    }

    /// wireguard-go clamps a private key as it stores it, so `get` returns the clamped form.
    func testPrivateKeyIsClamped() throws {
        let unclamped = "ff" + String(repeating: "11", count: 30) + "ff"
        let c = try XCTUnwrap(change("set=1\nprivate_key=\(unclamped)\n"))
        var expected = [UInt8](repeating: 0x11, count: 32)
        expected[0] = 0xf8
        expected[31] = 0x7f
        XCTAssertEqual(c.privateKey, .some(SecretKey(bytes: expected)))
        // The public key is the same either way: X25519 clamps too.
        XCTAssertEqual(PrivateKey(bytes: expected)?.publicKey, PrivateKey(bytes: bytes(unclamped))?.publicKey)
    }

    // MARK: set, peers

    /// What `wg setconf wg0 wg0.conf` sends for two peers (ipc-uapi.h's order).
    func testPeerSectionsAsWgSetconfSendsThem() throws {
        let c = try XCTUnwrap(change("""
            set=1
            private_key=\(privateHex)
            listen_port=51820
            replace_peers=true
            public_key=\(peerHex)
            preshared_key=\(pskHex)
            endpoint=192.0.2.1:51820
            persistent_keepalive_interval=25
            replace_allowed_ips=true
            allowed_ip=10.0.0.2/32
            allowed_ip=10.10.0.0/16
            allowed_ip=fd00:1::/64
            public_key=\(otherPeerHex)
            endpoint=[2001:db8::1]:4500
            protocol_version=1
            replace_allowed_ips=true
            allowed_ip=0.0.0.0/0
            allowed_ip=::/0
            """))
        XCTAssertTrue(c.replacePeers)
        XCTAssertEqual(c.peers.count, 2)
        let a = c.peers[0], b = c.peers[1]
        XCTAssertEqual(a.publicKey, bytes(peerHex))
        XCTAssertEqual(a.presharedKey, .some(SecretKey(bytes: bytes(pskHex))))
        XCTAssertEqual(a.endpoint, Endpoint(address: .v4(IPv4Address("192.0.2.1")!), port: 51_820))
        XCTAssertEqual(a.persistentKeepalive, 25)
        XCTAssertTrue(a.replaceAllowedIPs)
        XCTAssertEqual(a.allowedIPs, ["10.0.0.2/32", "10.10.0.0/16", "fd00:1::/64"].map { IPPrefix($0)! })
        XCTAssertFalse(a.remove || a.updateOnly)
        XCTAssertEqual(b.publicKey, bytes(otherPeerHex))
        XCTAssertEqual(b.endpoint, Endpoint(address: .v6(IPv6Address("2001:db8::1")!), port: 4_500))
        XCTAssertEqual(b.presharedKey, .none, "not sent: unchanged")
        XCTAssertNil(b.persistentKeepalive)
        XCTAssertEqual(b.allowedIPs, [IPPrefix("0.0.0.0/0")!, IPPrefix("::/0")!])
    }

    /// `wg set wg0 peer X remove`, `... preshared-key /dev/null` (zeros: remove it),
    /// `persistent-keepalive off` (0), and update_only (in the protocol, though wg(8) never sends
    /// it; wgctrl-based tools do).
    func testPeerRemoveUpdateOnlyAndZeroes() throws {
        let c = try XCTUnwrap(change("""
            set=1
            public_key=\(peerHex)
            remove=true
            public_key=\(otherPeerHex)
            update_only=true
            preshared_key=\(String(repeating: "0", count: 64))
            persistent_keepalive_interval=0
            persistent_keepalive_interval=65535
            """))
        XCTAssertEqual(c.peers.map(\.remove), [true, false])
        XCTAssertEqual(c.peers.map(\.updateOnly), [false, true])
        XCTAssertEqual(c.peers[1].presharedKey, .some(nil))
        XCTAssertEqual(c.peers[1].persistentKeepalive, 65_535, "the last line wins")
    }

    /// wireguard-go masks host bits (its trie's maskSelf); so does the parser.
    func testAllowedIPWithHostBitsIsMasked() throws {
        let c = try XCTUnwrap(change("set=1\npublic_key=\(peerHex)\nallowed_ip=10.1.2.3/8\nallowed_ip=2001:db8::1/32\n"))
        XCTAssertEqual(c.peers[0].allowedIPs, [IPPrefix("10.0.0.0/8")!, IPPrefix("2001:db8::/32")!])
    }

    /// wireguard-go applies replace_allowed_ips where it stands: prefixes listed before it go too.
    func testReplaceAllowedIPsDropsPrefixesListedBeforeIt() throws {
        let c = try XCTUnwrap(change("""
            set=1
            public_key=\(peerHex)
            allowed_ip=10.0.0.0/8
            replace_allowed_ips=true
            allowed_ip=10.1.0.0/16
            """))
        XCTAssertTrue(c.peers[0].replaceAllowedIPs)
        XCTAssertEqual(c.peers[0].allowedIPs, [IPPrefix("10.1.0.0/16")!])
    }

    /// `wg set wg0 peer X allowed-ips -10.1.0.0/16,+10.2.0.0/16` (wireguard-tools ≥ 1.0.20250521):
    /// "-PREFIX" removes one prefix; the lines keep their order, host bits are masked.
    func testAllowedIPRemovalKeepsTheOrderOfTheLines() throws {
        let c = try XCTUnwrap(change("""
            set=1
            public_key=\(peerHex)
            allowed_ip=-10.1.2.3/16
            allowed_ip=10.2.0.0/16
            allowed_ip=-2001:db8::/32
            allowed_ip=10.1.0.0/16
            """))
        XCTAssertEqual(c.peers[0].allowedIPChanges, [
            .remove(IPPrefix("10.1.0.0/16")!), .add(IPPrefix("10.2.0.0/16")!),
            .remove(IPPrefix("2001:db8::/32")!), .add(IPPrefix("10.1.0.0/16")!),
        ])
        XCTAssertEqual(c.peers[0].allowedIPs, [IPPrefix("10.2.0.0/16")!, IPPrefix("10.1.0.0/16")!])
    }

    /// An IPv4-mapped endpoint is folded to IPv4, as the device folds received sources.
    func testMappedEndpointIsFolded() throws {
        let c = try XCTUnwrap(change("set=1\npublic_key=\(peerHex)\nendpoint=[::ffff:192.0.2.9]:51820\n"))
        XCTAssertEqual(c.peers[0].endpoint, Endpoint(address: .v4(IPv4Address("192.0.2.9")!), port: 51_820))
    }

    // MARK: errors

    /// Bad values are EINVAL (22), as wireguard-go's IpcErrorInvalid.
    func testBadValuesAreEINVAL() throws {
        let interface: [String] = [
            "private_key=\(String(privateHex.dropLast()))",             // 63 hex digits
            "private_key=\(privateHex)0",                                 // 65
            "private_key=\(String(privateHex.dropLast()))g",             // not hex
            "private_key=",
            "listen_port=70000", "listen_port=65536", "listen_port=-1", "listen_port=+1", "listen_port=", "listen_port= 1",
            "listen_port=0x10",
            "fwmark=", "fwmark=4294967296", "fwmark=0x10", "fwmark=-1",
            "replace_peers=false", "replace_peers=1", "replace_peers=",
            "mtu=1420", "Listen_Port=1", "=1",
        ]
        let peer: [String] = [
            "preshared_key=abc", "preshared_key=\(pskHex)00",
            "endpoint=192.0.2.1", "endpoint=192.0.2.1:", "endpoint=192.0.2.1:0", "endpoint=192.0.2.1:65536",
            "endpoint=192.0.2.1:+80", "endpoint=[2001:db8::1]", "endpoint=2001:db8::1:51820", "endpoint=[192.0.2.1]:1",
            "endpoint=vpn.example.com:51820", "endpoint=[fe80::1%eth0]:51820", "endpoint=",
            "persistent_keepalive_interval=65536", "persistent_keepalive_interval=-1", "persistent_keepalive_interval=",
            "persistent_keepalive_interval=25s",
            "allowed_ip=10.0.0.0/33", "allowed_ip=::/129", "allowed_ip=10.0.0.0", "allowed_ip=10.0.0.0/", "allowed_ip=10.0.0.0/08",
            "allowed_ip=10.0.0.0/+8", "allowed_ip=010.0.0.0/8", "allowed_ip=fe80::/64%eth0",
            "allowed_ip=", "allowed_ip=-", "allowed_ip=--10.0.0.0/8", "allowed_ip=-10.0.0.0/33", "allowed_ip=- 10.0.0.0/8",
            "remove=false", "update_only=yes", "replace_allowed_ips=TRUE",
            "protocol_version=2", "protocol_version=",
            "listen_port=1",                                               // an interface key inside a peer section
            "last_handshake_time_sec=0", "tx_bytes=0",                     // get's read-only keys
        ]
        for line in interface {
            XCTAssertEqual(failure("set=1\n\(line)\n")?.errno, 22, line)
        }
        for line in peer {
            XCTAssertEqual(failure("set=1\npublic_key=\(peerHex)\n\(line)\n")?.errno, 22, line)
        }
        for bad in [String(peerHex.dropLast()), peerHex + "0", "", String(repeating: "z", count: 64)] {
            XCTAssertEqual(failure("set=1\npublic_key=\(bad)\n")?.errno, 22, bad)
        }
    }

    /// Not a request, or a line without '=': EPROTO (71), as wireguard-go's IpcErrorProtocol.
    func testProtocolErrorsAreEPROTO() throws {
        XCTAssertEqual(failure("set=2\n")?.errno, 71)
        XCTAssertEqual(failure("get=2\n")?.errno, 71)
        XCTAssertEqual(failure("hello\n")?.errno, 71)
        XCTAssertEqual(failure("")?.errno, 71)
        XCTAssertEqual(failure("set=1\nlisten_port 51820\n")?.errno, 71)
        XCTAssertEqual(failure("set=1\npublic_key=\(peerHex)\nremove\n")?.errno, 71)
    }

    /// The device logs a failure's description: it names the key, never a value that may be a key.
    func testErrorDescriptionsNeverContainKeyMaterial() throws {
        let requests = [
            "private_key=\(privateHex)",                              // a set without set=1
            "set=1\n\(privateHex)=1",                                 // the key as a key name
            "set=1\nprivate_key=\(privateHex)0",                      // one digit too many
            "set=1\nprivate_key=\(privateHex.dropLast(2))zz",        // not hex
            "set=1\nprivate_key \(privateHex)",                       // no '='
            "set=1\nprivatekey=\(privateHex)",                        // misspelt
            "set=1\npublic_key=\(peerHex)\npreshared_key=\(pskHex)0",
            "set=1\npublic_key=\(peerHex)\npresharedkey=\(pskHex)",
            "set=1\npublic_key=\(peerHex)\n\(pskHex)=\(pskHex)",
            "\(pskHex)\n",
        ]
        for request in requests {
            let error = try XCTUnwrap(failure(request + "\n"), request)
            for secret in [privateHex, pskHex] {
                for start in stride(from: 0, through: 56, by: 4) {
                    let piece = secret.dropFirst(start).prefix(8)
                    XCTAssertFalse(error.description.lowercased().contains(piece), "\(error.description) repeats \(piece)")
                }
            }
        }
        // Key names are still shown when they look like names.
        XCTAssertEqual(failure("set=1\nmtu=1420\n")?.description, "unknown interface key 'mtu'")
    }

    /// A request is parsed whole before anything is applied: a bad last line leaves nothing to apply.
    func testABadLineRefusesTheWholeRequest() throws {
        XCTAssertNotNil(failure("set=1\nlisten_port=1\npublic_key=\(peerHex)\nallowed_ip=10.0.0.0/8\nallowed_ip=bad\n"))
    }

    // MARK: format

    func testFormatIsWhatWgSendsAndParsesBack() throws {
        let text = """
            set=1
            private_key=\(privateHex)
            listen_port=51820
            fwmark=51
            replace_peers=true
            public_key=\(peerHex)
            remove=true
            public_key=\(otherPeerHex)
            update_only=true
            preshared_key=\(pskHex)
            endpoint=[2001:db8::1]:51820
            persistent_keepalive_interval=25
            replace_allowed_ips=true
            allowed_ip=10.0.0.0/8
            allowed_ip=fd00::/64
            """
        let c = try XCTUnwrap(change(text))
        XCTAssertEqual(UAPI.format(c).joined(separator: "\n"), text)
        XCTAssertEqual(try UAPI.parse(UAPI.format(c).map { Substring($0) }), .set(c))
    }
}
