import Engine
import Glibc
import LinuxSystem
import Netlink
import TunnelgateSettings
import XCTest

final class JournalTests: XCTestCase {
    func testFileRecordsOfWrittenFiles() throws {
        let path = "/tmp/tunnelgate-journal-files-\(getpid())"
        defer { FileSystem.remove(path) }
        let journal = try Journal(path: path, name: "tg0", slot: TunnelSlot(index: 2))
        try journal.append([Journal.fileRecord("/run/tunnelgate-proxy/net-1/tg0.proxy.pac"),
                            Journal.fileRecord("/run/tunnelgate-proxy/net-1/tg0.proxy.env"),
                            Journal.fileRecord("/run/tunnelgate-proxy/net-1/tg0.proxy.pac"),  // written again: one entry
                            "file relative/path", "file /run/../etc/passwd", "file /a b"])
        let read = try XCTUnwrap(try Journal.read(path: path))
        XCTAssertEqual(read.files, ["/run/tunnelgate-proxy/net-1/tg0.proxy.pac", "/run/tunnelgate-proxy/net-1/tg0.proxy.env"],
                       "relative paths, paths that climb and malformed lines are never taken for files to remove")
    }

    func testJournalRoundTripAndTornLine() throws {
        let path = "/tmp/tunnelgate-journal-test-\(getpid())"
        defer { FileSystem.remove(path) }
        let slot = TunnelSlot(index: 3)
        let journal = try Journal(path: path, name: "tg0", slot: slot)
        try journal.record(link: "tg0")
        let routes = [RouteSpec(destination: IPPrefix("0.0.0.0/0")!, table: slot.table),
                      RouteSpec(destination: IPPrefix("10.0.0.0/8")!, table: slot.table, gateway: IPAddress("10.8.0.1")),
                      RouteSpec(destination: IPPrefix("2001:db8::10/128")!, type: .throw, table: slot.table)]
        let rules = [RuleSpec(family: .ipv6, priority: slot.lookupPriority, table: slot.table, fwmark: slot.fwmark, fwmask: 0xffff_ffff, invert: true)]
        try journal.record(routes: routes, rules: rules)
        var read = try XCTUnwrap(try Journal.read(path: path))
        XCTAssertEqual(read.name, "tg0")
        XCTAssertEqual(read.slot, slot)
        XCTAssertEqual(read.links, ["tg0"])
        XCTAssertEqual(read.routes, routes)
        XCTAssertEqual(read.rules, rules)
        XCTAssertFalse(read.committed)
        // A process killed mid-write leaves a torn last line: it is ignored.
        let fd = try FileDescriptor.open(path, O_WRONLY | O_APPEND)
        try fd.writeAll(Array("route 7463 thr".utf8))
        fd.close()
        read = try XCTUnwrap(try Journal.read(path: path))
        XCTAssertEqual(read.routes, routes)
        try journal.recordCommitted()
        XCTAssertTrue(try XCTUnwrap(try Journal.read(path: path)).committed == false,
                      "a record appended after a torn line is part of that line, so not taken as committed")
    }

    func testSlotArithmetic() {
        let s = TunnelSlot(index: 2)
        XCTAssertEqual(s.table, 7462)
        XCTAssertEqual(s.fwmark, 7462)
        XCTAssertEqual(s.priorities, 7420...7429)
        XCTAssertEqual(s.lookupPriority, 7425)
        XCTAssertEqual(TunnelSlot(table: 7462), s)
        XCTAssertNil(TunnelSlot(table: 254))
    }

    func testPlanOrderAndWording() throws {
        let json = #"{"name": "tg0", "tunnelRemoteAddress": "198.18.0.10", "mtu": 1400, "ipv4Settings": {"addresses": ["10.8.0.2"], "subnetMasks": ["255.255.255.0"], "includedRoutes": ["0.0.0.0/0", {"destinationAddress": "10.1.0.0", "subnetMask": "255.255.0.0", "gatewayAddress": "10.8.0.1"}]}}"#
        let settings = try TunnelSettings.parse(json: Array(json.utf8))
        // Identified by the slot's mark: the carrier is no throw route (that would let anyone reach it).
        let plan = TunnelPlan(settings: settings, slot: TunnelSlot(index: 0), carrierAddresses: [IPAddress("198.18.0.10")!])
        XCTAssertEqual(plan.operations(interfaceIndex: 9).map(\.description), [
            "ip link set dev tg0 mtu 1400 up",
            "ip -4 addr add 10.8.0.2/24 dev tg0 noprefixroute",
            "ip -4 route add 0.0.0.0/0 dev tg0 scope global table 7460 proto 72",
            "ip -4 route add 10.1.0.0/16 via 10.8.0.1 dev tg0 onlink table 7460 proto 72",
            "ip -4 route add 10.8.0.0/24 dev tg0 scope global table 7460 proto 72",
            "ip -4 rule add pref 7405 not fwmark 0x1d24/0xffffffff lookup 7460 proto 72",
        ])
        // A runtime that cannot be identified falls back to the address-only throw route.
        let weak = TunnelPlan(settings: settings, slot: TunnelSlot(index: 0), carrierAddresses: [IPAddress("198.18.0.10")!],
                              carrierIdentity: .unidentified(reason: "test"))
        XCTAssertTrue(weak.operations(interfaceIndex: 9).map(\.description).contains("ip -4 route add throw 198.18.0.10/32 table 7460 proto 72"))
        XCTAssertTrue(weak.carrierExemption.hasPrefix("by address only"))
    }

    func testUserIdentityIsExemptOnlyToItsCarriers() throws {
        let json = #"{"name": "tg0", "tunnelRemoteAddress": "198.18.0.10", "ipv4Settings": {"addresses": ["10.8.0.2"], "subnetMasks": ["255.255.255.0"], "includedRoutes": ["0.0.0.0/0"]}, "carrierEndpoints": ["198.18.0.10:51820/udp", "198.18.0.11:443"]}"#
        let settings = try TunnelSettings.parse(json: Array(json.utf8))
        let carriers = try settings.pinCarrierEndpoints(using: Fixed())
        XCTAssertEqual(carriers.map(\.endpointText), ["198.18.0.10:51820/udp", "198.18.0.11:443"])
        let plan = TunnelPlan(settings: settings, slot: TunnelSlot(index: 1), carriers: carriers, carrierIdentity: .user(64001))
        XCTAssertEqual(plan.rules.map(\.description), [
            "pref 7413 to 198.18.0.10/32 ipproto udp dport 51820 uidrange 64001-64001 goto 7416 proto 72",
            "pref 7413 to 198.18.0.11/32 ipproto udp dport 443 uidrange 64001-64001 goto 7416 proto 72",
            "pref 7413 to 198.18.0.11/32 ipproto tcp dport 443 uidrange 64001-64001 goto 7416 proto 72",
            "pref 7415 not fwmark 0x1d25/0xffffffff lookup 7461 proto 72",
            "pref 7416 from all nop proto 72",
        ])
        // The journal keeps every selector of these rules.
        let lines = Journal.records(routes: [], rules: plan.rules)
        let path = "/tmp/tg-journal-\(getpid())"
        defer { unlink(path) }
        let journal = try Journal(path: path, name: "tg0", slot: plan.slot)
        try journal.append(lines)
        XCTAssertEqual(try Journal.read(path: path)?.rules, plan.rules.map { var r = $0; r.protocolID = 72; return r })
    }

    /// A split tunnel whose routes leave a carrier outside needs no exemption for it: no rules that jump
    /// past the lookup, and no connection-mark chains (which would put every packet of the namespace
    /// through connection tracking). A carrier its routes take (an included prefix holds it, no more
    /// specific exclusion) keeps both; an exclusion of the carrier's prefix frees it again.
    func testOnlyCapturedCarriersAreExempt() throws {
        func plan(_ included: String, excluded: String = "") throws -> TunnelPlan {
            let json = #"{"name": "tg0", "tunnelRemoteAddress": "198.18.0.10", "ipv4Settings": {"addresses": ["10.8.0.2"], "subnetMasks": ["255.255.255.0"], "includedRoutes": ["\#(included)"], "excludedRoutes": [\#(excluded)]}, "carrierEndpoints": ["198.18.0.10:51820/udp"]}"#
            let settings = try TunnelSettings.parse(json: Array(json.utf8))
            return TunnelPlan(settings: settings, slot: TunnelSlot(index: 1), carriers: try settings.pinCarrierEndpoints(using: Fixed()),
                              carrierIdentity: .user(64001))
        }
        let outside = try plan("10.78.0.0/24")
        XCTAssertFalse(outside.routesIntoTunnel(IPAddress("198.18.0.10")!))
        XCTAssertTrue(outside.capturedCarriers.isEmpty)
        XCTAssertEqual(outside.rules.map(\.description), ["pref 7415 not fwmark 0x1d25/0xffffffff lookup 7461 proto 72"])
        XCTAssertNil(outside.firewall, "no table at all: nothing to save a mark for")
        XCTAssertTrue(outside.carrierExemption.hasPrefix("none needed for 198.18.0.10:51820/udp"), outside.carrierExemption)

        for covering in ["198.18.0.0/15", "0.0.0.0/0"] {
            let inside = try plan(covering)
            XCTAssertTrue(inside.routesIntoTunnel(IPAddress("198.18.0.10")!), covering)
            XCTAssertEqual(inside.rules.count, 3, "exemption, lookup, nop (\(covering))")
            let chains = try XCTUnwrap(inside.firewall).chains.map(\.name)
            XCTAssertEqual(chains, ["carrier-save", "carrier-restore"], covering)
            XCTAssertTrue(inside.carrierExemption.hasPrefix("only packets of uid 64001"), inside.carrierExemption)
        }
        // The most specific prefix decides: an excluded /24 around the carrier beats the included /15...
        let excluded = try plan("198.18.0.0/15", excluded: #""198.18.0.0/24""#)
        XCTAssertFalse(excluded.routesIntoTunnel(IPAddress("198.18.0.10")!))
        XCTAssertNil(excluded.firewall)
        // ... and an included /32 inside an excluded /24 takes the carrier again.
        let pinned = try plan("198.18.0.10/32", excluded: #""198.18.0.0/24""#)
        XCTAssertTrue(pinned.routesIntoTunnel(IPAddress("198.18.0.10")!))
        XCTAssertEqual(pinned.capturedCarriers.count, 1)
    }

    /// A carrier inside the TUN's own subnet (tunnelRemoteAddress 198.18.0.1, address 198.18.0.2/24):
    /// the subnet's route is the tunnel's, in T, and the address carries IFA_F_NOPREFIXROUTE, so main
    /// (where an exemption looks next) has none and the carrier is exempt like any captured one. A
    /// family the tunnel does not route keeps the kernel's subnet route; host addresses have none.
    func testTheTunnelsSubnetRouteIsInItsOwnTable() throws {
        let json = #"{"name": "tg0", "tunnelRemoteAddress": "198.18.0.1", "ipv4Settings": {"addresses": ["198.18.0.2", "198.18.0.3"], "subnetMasks": ["255.255.255.0", "255.255.255.0"], "includedRoutes": ["10.0.0.0/8"]}, "ipv6Settings": {"addresses": ["fd00:8::2", "fd00:9::2"], "networkPrefixLengths": [64, 128]}, "carrierEndpoints": ["198.18.0.1:51820/udp"]}"#
        let settings = try TunnelSettings.parse(json: Array(json.utf8))
        let plan = TunnelPlan(settings: settings, slot: TunnelSlot(index: 1), carriers: try settings.pinCarrierEndpoints(using: Fixed()),
                              carrierIdentity: .user(64001))
        let table = plan.slot.table
        XCTAssertEqual(plan.routes(interfaceIndex: 7).map(\.description),
                       ["10.0.0.0/8 dev tg0 scope global table \(table) proto 72",
                        "198.18.0.0/24 dev tg0 scope global table \(table) proto 72"], "one subnet route for two addresses in it")
        XCTAssertTrue(plan.routesIntoTunnel(IPAddress("198.18.0.1")!), "the subnet route takes the carrier into the tunnel")
        XCTAssertEqual(plan.capturedCarriers.count, 1, "so its identity is exempt past T")
        XCTAssertEqual(plan.rules.count, 3, "exemption, lookup, nop")
        let added = plan.operations(interfaceIndex: 7).compactMap { op -> String? in
            if case .addAddress(let a) = op { return a.description }
            return nil
        }
        XCTAssertEqual(added, ["198.18.0.2/24 dev tg0 noprefixroute", "198.18.0.3/24 dev tg0 noprefixroute",
                               "fd00:8::2/64 dev tg0 nodad", "fd00:9::2/128 dev tg0 nodad"],
                       "IPv6 has no included routes: its subnet route stays the kernel's")

        // An included route to the subnet itself is not doubled (the kernel would refuse the second).
        let same = #"{"name": "tg0", "tunnelRemoteAddress": "198.18.0.1", "ipv4Settings": {"addresses": ["198.18.0.2"], "subnetMasks": ["255.255.255.0"], "includedRoutes": ["198.18.0.0/24"]}}"#
        let samePlan = TunnelPlan(settings: try TunnelSettings.parse(json: Array(same.utf8)), slot: TunnelSlot(index: 1), carrierAddresses: [])
        XCTAssertEqual(samePlan.routes(interfaceIndex: 7).map(\.destination.description), ["198.18.0.0/24"])
    }

    func testKillSwitchExemptsOnlyTheIdentityToTheCarrierPort() throws {
        let json = #"{"name": "tg0", "tunnelRemoteAddress": "198.18.0.10", "includeAllNetworks": true, "ipv4Settings": {"addresses": ["10.8.0.2"], "subnetMasks": ["255.255.255.0"], "includedRoutes": ["0.0.0.0/0"]}, "carrierEndpoints": ["198.18.0.10:51820/udp"]}"#
        let settings = try TunnelSettings.parse(json: Array(json.utf8))
        let plan = TunnelPlan(settings: settings, slot: TunnelSlot(index: 0), carriers: try settings.pinCarrierEndpoints(using: Fixed()))
        let output = try XCTUnwrap(plan.firewall?.chains.first { $0.name == "output" })
        let carrierRules = output.rules.filter { $0.comment.hasSuffix(" carrier") }
        XCTAssertEqual(carrierRules.map(\.matches), [
            [.mark(7460), .destination(IPPrefix("198.18.0.10/32")!), .transport(protocolNumber: 17, destinationPort: 51820)],
        ])
        // Nothing else lets a packet to the carrier's address out.
        XCTAssertFalse(output.rules.contains { $0.verdict == .accept && $0.matches == [.destination(IPPrefix("198.18.0.10/32")!)] })
    }

    /// A provider's plane (`.userAnywhere`) gets out past the tunnel to every destination, carrier or not:
    /// one uidrange rule without a destination per routed family, one `meta skuid` accept in the kill
    /// switch ahead of the DNS drops, and all its packets' connections keep the tunnel's mark for the
    /// replies. Nobody else is let out: no rule or accept without the uid, beyond what a `.user` plan has.
    func testProviderPlaneIsExemptToEveryDestination() throws {
        let json = #"{"name": "tg0", "tunnelRemoteAddress": "198.18.0.10", "includeAllNetworks": true, "ipv4Settings": {"addresses": ["10.8.0.2"], "subnetMasks": ["255.255.255.0"], "includedRoutes": ["0.0.0.0/0"]}, "ipv6Settings": {"addresses": ["fd00:8::2"], "networkPrefixLengths": [64], "includedRoutes": ["::/0"]}, "dnsSettings": {"servers": ["10.8.0.53"]}}"#
        let settings = try TunnelSettings.parse(json: Array(json.utf8))
        let carriers = try settings.pinCarrierEndpoints(using: Fixed())
        let plan = TunnelPlan(settings: settings, slot: TunnelSlot(index: 1), carriers: carriers, carrierIdentity: .userAnywhere(64001))
        XCTAssertEqual(plan.rules.map(\.description), [
            "pref 7413 uidrange 64001-64001 goto 7416 proto 72",
            "pref 7415 not fwmark 0x1d25/0xffffffff lookup 7461 proto 72",
            "pref 7416 from all nop proto 72",
            "pref 7413 uidrange 64001-64001 goto 7416 proto 72",
            "pref 7415 not fwmark 0x1d25/0xffffffff lookup 7461 proto 72",
            "pref 7416 from all nop proto 72",
        ])
        XCTAssertEqual(plan.rules.filter { $0.uidRange != nil }.map { [$0.family == .ipv4 ? 4 : 6, $0.priority] }, [[4, 7413], [6, 7413]])
        for rule in plan.rules where rule.uidRange != nil {
            XCTAssertEqual(rule.uidRange, 64001...64001)
            XCTAssertNil(rule.destination, "any destination")
            XCTAssertNil(rule.ipProtocol)
            XCTAssertNil(rule.destinationPorts)
            XCTAssertEqual(rule.action, .goto(7416))
        }
        XCTAssertEqual(plan.rules.filter { $0.action == .nop }.count, 2)

        let table = try XCTUnwrap(plan.firewall)
        let output = try XCTUnwrap(table.chains.first { $0.name == "output" })
        let accepts = output.rules.filter { $0.comment.hasSuffix(" carrier") }
        XCTAssertEqual(accepts.map(\.matches), [[.socketUser(64001)]])
        let first = try XCTUnwrap(output.rules.firstIndex { $0.matches == [.socketUser(64001)] })
        let dnsDrop = try XCTUnwrap(output.rules.firstIndex { $0.comment.hasSuffix("dns elsewhere") })
        XCTAssertLessThan(first, dnsDrop, "the plane's own DNS queries (CarrierResolver) are accepted before the DNS drops")
        XCTAssertFalse(output.rules.contains { $0.verdict == .accept && $0.matches.isEmpty }, "nobody else is let out")
        let save = try XCTUnwrap(table.chains.first { $0.name == "carrier-save" })
        XCTAssertEqual(save.rules.map(\.matches), [[.socketUser(64001)]])
        XCTAssertNotNil(table.chains.first { $0.name == "carrier-restore" })
        XCTAssertTrue(plan.sysctls.contains { $0.path == "net/ipv4/conf/all/src_valid_mark" && $0.value == "1" })
        XCTAssertTrue(plan.carrierExemption.hasPrefix("packets of uid 64001 (the provider's packet plane) to any address"), plan.carrierExemption)

        // The rules go into the journal and come back the same, so down, recovery and the sweep remove them.
        let path = "/tmp/tg-journal-anywhere-\(getpid())"
        defer { unlink(path) }
        let journal = try Journal(path: path, name: "tg0", slot: plan.slot)
        try journal.record(routes: [], rules: plan.rules)
        XCTAssertEqual(try Journal.read(path: path)?.rules, plan.rules.map { var r = $0; r.protocolID = 72; return r })

        // Isolate mode: no exemption in the tunnel's namespace, as for every identity.
        let isolated = TunnelPlan(settings: settings, slot: TunnelSlot(index: 1), carriers: carriers,
                                  carrierIdentity: .userAnywhere(64001), isolatedIn: "ns")
        XCTAssertFalse(isolated.rules.contains { $0.uidRange != nil })
        XCTAssertFalse(try XCTUnwrap(isolated.firewall).chains.flatMap(\.rules).contains { $0.matches.contains(.socketUser(64001)) })
    }
}
