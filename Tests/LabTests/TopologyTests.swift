@testable import Lab
import TunnelgateSettings
import XCTest

final class TopologyTests: XCTestCase {
    func problems(_ json: String) -> [String] {
        do {
            _ = try Topology.parse(json: Array(json.utf8))
            return []
        } catch {
            return error.problems.map(\.description)
        }
    }

    func testTheShippedTopologyParses() throws {
        let url = #filePath.split(separator: "/").dropLast(3).joined(separator: "/")
        let bytes = try XCTUnwrap(FileManagerLite.read("/" + url + "/Examples/lab/vpn-client.json"))
        let t = try Topology.parse(json: bytes)
        XCTAssertEqual(t.client, "client")
        XCTAssertEqual(t.clientLinks.map(\.far.interface), ["c0", "c1"])
        XCTAssertEqual(t.node("router")?.wan, "inet0")
        XCTAssertEqual(t.link("uplink")?.a.addresses.map(\.description), ["10.231.0.2/24", "fd00:231::2/64"])
        XCTAssertEqual(t.interface(for: t.node("client")!.routes[0], in: "client"), "eth0")
    }

    func testEveryProblemHasItsKeyPath() {
        let p = problems("""
        {"nodes": {"a": {"routes": [{"to": "10.0.0.1/8", "via": "fd00::1"}], "bogus": 1},
                   "B": {}},
         "links": [{"name": "l", "a": {"node": "a", "interface": "eth0", "addresses": ["10.0.0.1"]},
                    "b": {"node": "rooter", "interface": "eth0"}}],
         "client": "nobody"}
        """)
        XCTAssertEqual(p, [
            "nodes.a.bogus: unknown key (known: dnsServer, forwarding, nameservers, routes, sysctls, wan)",
            "nodes.a.routes[0].to: 10.0.0.1/8 has host bits set (the network is 10.0.0.0/8)",
            "nodes.a.routes[0].via: fd00::1 is not of the family of 10.0.0.1/8",
            "nodes.B: the node name \"B\" must be lower-case letters, digits and '-', starting with a letter",
            "links[0].a.addresses[0]: \"10.0.0.1\" is not an address with a prefix length (10.0.0.2/24, fd00::2/64)",
            "links[0].b.node: \"rooter\" is not a node (nodes: a, B)",
            "nodes.a.routes[0].via: no interface of node a has an address whose prefix holds fd00::1; name one with \"dev\"",
            "client: \"nobody\" is not a node",
        ])
    }

    func testSyntaxErrorsAndMissingKeys() {
        XCTAssertEqual(problems("{").count, 1)
        XCTAssertTrue(problems("{")[0].hasPrefix("not valid JSON: line 1, column 2"), problems("{")[0])
        XCTAssertEqual(problems("{}"), ["nodes: is required", "links: is required"])
        XCTAssertEqual(problems(#"{"nodes": {"a": {}}, "links": [{"a": {"node": "a"}}]}"#),
                       ["links[0].a.interface: is required", "links[0].name: is required", "links[0].b: is required"])
    }

    func testDuplicateInterfacesAndSelfLinks() {
        let p = problems(#"{"nodes": {"a": {}, "b": {}}, "links": [{"name": "x", "a": {"node": "a", "interface": "e0"}, "b": {"node": "b", "interface": "e0"}}, {"name": "x", "a": {"node": "a", "interface": "e0"}, "b": {"node": "a", "interface": "e1"}}]}"#)
        XCTAssertEqual(p, ["links[1].name: \"x\" names two links",
                           "links[1].a.interface: \"e0\" is already an interface of node a",
                           "links[1]: joins node a to itself"])
    }

    func testCarrierSpecs() {
        XCTAssertEqual(CarrierSpec("198.18.10.10:51820/udp")?.description, "198.18.10.10:51820/udp")
        XCTAssertEqual(CarrierSpec("[2001:db8::1]:443/tcp")?.description, "[2001:db8::1]:443/tcp")
        XCTAssertNil(CarrierSpec("2001:db8::1:443/udp"))
        XCTAssertNil(CarrierSpec("198.18.10.10:0/udp"))
        XCTAssertNil(CarrierSpec("198.18.10.10:53/icmp"))
    }

    func testLeakVerdict() {
        let flow = { (d: String, port: UInt16, proto: UInt8, n: UInt64) in
            ObservedFlow(uid: nil, proto: proto, source: IPAddress("10.231.0.2")!, sourcePort: 40000,
                         destination: IPAddress(d)!, destinationPort: port, packets: n, observedAt: "router")
        }
        var byUID = flow("198.18.10.10", 51820, 17, 3)
        byUID.uid = 1000
        let reading = LeakReading(flows: [flow("198.18.10.10", 51820, 17, 10), flow("192.168.231.2", 53, 17, 2), flow("198.18.30.30", 0, 1, 4)],
                                  flowsByUID: [byUID], unitemised: 0)
        let v = LeakVerdict(reading: reading, carriers: [CarrierSpec("198.18.10.10:51820/udp")!], allowed: [], uid: 0)
        XCTAssertFalse(v.passed)
        XCTAssertEqual(v.carrierPackets, 10)
        XCTAssertEqual(v.lines, [
            "leak: icmp 10.231.0.2 -> 198.18.30.30 type 40000 code 0 packets 4 (at router)",
            "dns leak: udp 10.231.0.2:40000 -> 192.168.231.2:53 packets 2 (at router)",
            "carrier from another uid: udp 10.231.0.2:40000 -> 198.18.10.10:51820 packets 3 uid 1000 (at router)",
        ])
        let allowed = LeakVerdict(reading: LeakReading(flows: [flow("198.18.20.20", 80, 6, 1)], flowsByUID: [], unitemised: 0),
                                  carriers: [], allowed: [IPPrefix("198.18.20.20/32")!], uid: nil)
        XCTAssertTrue(allowed.passed)
        XCTAssertFalse(LeakVerdict(reading: LeakReading(flows: [], flowsByUID: [], unitemised: 2), carriers: [], allowed: [], uid: nil).passed)
    }
}

/// Reads a file without Foundation (the test target imports only XCTest).
enum FileManagerLite {
    static func read(_ path: String) -> [UInt8]? {
        guard let f = fopen(path, "rb") else { return nil }
        defer { fclose(f) }
        var out: [UInt8] = []
        var buf = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = fread(&buf, 1, buf.count, f)
            if n == 0 { break }
            out += buf[0..<n]
        }
        return out
    }
}
