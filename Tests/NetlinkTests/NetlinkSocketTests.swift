import Glibc
import TunnelgateTestSupport
import LinuxSystem
import Netlink
import TunnelgateSettings
import XCTest

/// Real rtnetlink requests against a private namespace's kernel.
final class NetlinkSocketTests: XCTestCase {
    struct Expectation: Error, CustomStringConvertible { let description: String }
    static func expect(_ condition: Bool, _ message: @autoclosure () -> String) throws {
        if !condition { throw Expectation(description: message()) }
    }

    static func loopback(_ nl: NetlinkSocket) throws -> LinkInfo {
        guard let lo = try nl.link(named: "lo") else { throw Expectation(description: "no lo") }
        try nl.execute([.setLink(index: lo.index, name: "lo", mtu: nil, up: true)])
        return lo
    }

    func testRoutesAddListFindDeleteLeavesTheFirstList() {
        inPrivateNetworkNamespace {
            let nl = try NetlinkSocket()
            let lo = try Self.loopback(nl)
            let before4 = try nl.routes(family: .ipv4, table: 100)
            let before6 = try nl.routes(family: .ipv6, table: 100)
            try Self.expect(before4.isEmpty && before6.isEmpty, "table 100 starts empty")
            let routes = [
                RouteSpec(destination: IPPrefix("198.18.0.0/15")!, table: 100, outputInterface: lo.index),
                RouteSpec(destination: IPPrefix("198.18.0.10/32")!, type: .throw, table: 100),
                RouteSpec(destination: IPPrefix("2001:db8::/32")!, table: 100, outputInterface: lo.index),
                RouteSpec(destination: IPPrefix("2001:db8::10/128")!, type: .throw, table: 100),
            ]
            try nl.execute(routes.map { .addRoute($0) })
            let listed = try nl.routes(family: .ipv4, table: 100) + nl.routes(family: .ipv6, table: 100)
            try Self.expect(listed.count == 4, "4 routes listed, got \(listed)")
            for r in routes {
                try Self.expect(listed.contains { $0.sameRoute(as: r) && $0.protocolID == tunnelgateRouteProtocol }, "\(r) listed")
            }
            try nl.execute(routes.map { .deleteRoute($0) })
            try Self.expect(try nl.routes(family: .ipv4, table: 100) == before4, "IPv4 table back to the first list")
            try Self.expect(try nl.routes(family: .ipv6, table: 100) == before6, "IPv6 table back to the first list")
        }
    }

    func testErrorsNameTheOperationAndErrno() {
        inPrivateNetworkNamespace {
            let nl = try NetlinkSocket()
            let lo = try Self.loopback(nl)
            let route = RouteSpec(destination: IPPrefix("10.0.0.0/8")!, table: 100, outputInterface: lo.index, interfaceName: "lo")
            try nl.execute([.addRoute(route)])
            do {
                // The second request of the batch fails; the first and third still succeed.
                try nl.execute([.addRoute(RouteSpec(destination: IPPrefix("10.1.0.0/16")!, table: 100, outputInterface: lo.index)),
                                .addRoute(route),
                                .addRoute(RouteSpec(destination: IPPrefix("10.2.0.0/16")!, table: 100, outputInterface: lo.index))])
                throw Expectation(description: "adding an existing route succeeded")
            } catch let error as NetlinkBatchError {
                try Self.expect(error.failures.count == 1 && error.failures[0].index == 1, "one failure, at index 1: \(error)")
                try Self.expect(error.failures[0].error.errno == .exists, "EEXIST: \(error)")
                try Self.expect(error.failures[0].error.description.hasPrefix("ip -4 route add 10.0.0.0/8 dev lo table 100 proto 72: File exists (17)"),
                                "readable error: \(error.failures[0].error.description)")
            }
            try Self.expect(try nl.routes(family: .ipv4, table: 100).count == 3, "the rest of the batch was applied")
            // A missing object: ENOENT/ESRCH, or tolerated when asked.
            let rule = RuleSpec(family: .ipv4, priority: 9999, table: 100)
            do {
                try nl.execute([.deleteRule(rule)])
                throw Expectation(description: "deleting a missing rule succeeded")
            } catch let error as NetlinkBatchError {
                try Self.expect(error.failures[0].error.errno == .noSuchEntry, "ENOENT: \(error)")
            }
            try nl.execute([.deleteRule(rule)], tolerating: [.noSuchEntry])
            // A route through a device that does not exist.
            do {
                try nl.execute([.addRoute(RouteSpec(destination: IPPrefix("10.9.0.0/16")!, table: 100, outputInterface: 4242))])
                throw Expectation(description: "route via a missing device succeeded")
            } catch let error as NetlinkBatchError {
                try Self.expect(error.failures[0].error.errno == .noSuchDevice, "ENODEV: \(error)")
            }
        }
    }

    func testRulesRoundTrip() {
        inPrivateNetworkNamespace {
            let nl = try NetlinkSocket()
            for family in IPFamily.allCases {
                let before = try nl.rules(family: family)
                let rule = RuleSpec(family: family, priority: 7405, table: 7460, fwmark: 0x1d24, fwmask: 0xffff_ffff, invert: true)
                try nl.execute([.addRule(rule)])
                let found = try nl.rules(family: family).filter { $0.spec.priority == 7405 }
                try Self.expect(found.count == 1, "one rule at 7405: \(found)")
                let r = found[0].spec
                try Self.expect(r.table == 7460 && r.fwmark == 0x1d24 && r.invert && r.protocolID == tunnelgateRouteProtocol,
                                "rule read back as written: \(r)")
                try nl.execute([.deleteRule(rule)])
                try Self.expect(try nl.rules(family: family) == before, "\(family) rules back to the first list")
            }
        }
    }

    func testLargeBatchIsFullyAcknowledged() {
        inPrivateNetworkNamespace {
            let nl = try NetlinkSocket()
            let lo = try Self.loopback(nl)
            // 5,000 routes: several sendmsg batches, one ack each.
            let routes = (0..<5000).map { i in
                RouteSpec(destination: IPPrefix(address: .v4(IPv4Address(0x0a00_0000 | UInt32(i) << 8)), length: 24)!,
                          table: 200, outputInterface: lo.index)
            }
            try nl.execute(routes.map { .addRoute($0) })
            try Self.expect(try nl.routes(family: .ipv4, table: 200).count == 5000, "5000 routes in table 200")
            try nl.execute(routes.map { .deleteRoute($0) })
            try Self.expect(try nl.routes(family: .ipv4, table: 200).isEmpty, "table 200 empty again")
        }
    }

    func testRouteLookupCarriesTheMarkThroughThePolicyRules() {
        inPrivateNetworkNamespace {
            let nl = try NetlinkSocket()
            let lo = try Self.loopback(nl)
            let carrier4 = IPAddress("198.18.0.10")!, carrier6 = IPAddress("2001:db8::10")!
            // Nothing routes there: refused with ENETUNREACH, in ip(8) words.
            do {
                _ = try nl.lookupRoute(to: carrier4, mark: 0x1d24)
                throw Expectation(description: "a lookup without any route succeeded")
            } catch let error as NetlinkError {
                try Self.expect(error.errno == Errno(rawValue: ENETUNREACH), "ENETUNREACH: \(error)")
                try Self.expect(error.description.hasPrefix("ip -4 route get 198.18.0.10 mark 0x1d24 ipproto udp: Network is unreachable (101)"),
                                "readable error: \(error)")
            }
            let before = try nl.rules(family: .ipv4) + nl.rules(family: .ipv6)
            // Only packets carrying the mark look up table 100, which has the routes.
            let routes = [RouteSpec(destination: IPPrefix("198.18.0.0/15")!, table: 100, outputInterface: lo.index),
                          RouteSpec(destination: IPPrefix("2001:db8::/32")!, table: 100, outputInterface: lo.index)]
            let rules = IPFamily.allCases.map { RuleSpec(family: $0, priority: 100, table: 100, fwmark: 0x1d24, fwmask: 0xffff_ffff) }
            try nl.execute(routes.map { .addRoute($0) } + rules.map { .addRule($0) })
            for carrier in [carrier4, carrier6] {
                let found = try nl.lookupRoute(to: carrier, mark: 0x1d24)
                try Self.expect(found.kind == .unicast && found.outputInterface == lo.index && found.table == 100
                                && found.destination == carrier, "\(carrier) with the mark: dev lo table 100, got \(found)")
                do {
                    _ = try nl.lookupRoute(to: carrier)
                    throw Expectation(description: "\(carrier) without the mark found a route")
                } catch let error as NetlinkError {
                    try Self.expect(error.errno == Errno(rawValue: ENETUNREACH), "\(carrier) without the mark: ENETUNREACH, got \(error)")
                }
            }
            // A throw route ends the lookup in table 100; main has nothing either.
            let thrown = RouteSpec(destination: IPPrefix("198.18.0.10/32")!, type: .throw, table: 100)
            try nl.execute([.addRoute(thrown)])
            do {
                _ = try nl.lookupRoute(to: carrier4, mark: 0x1d24)
                throw Expectation(description: "a thrown lookup found a route")
            } catch let error as NetlinkError {
                try Self.expect(error.errno == Errno(rawValue: ENETUNREACH), "thrown: ENETUNREACH, got \(error)")
            }
            try nl.execute([.deleteRoute(thrown)] + rules.map { .deleteRule($0) } + routes.map { .deleteRoute($0) })
            try Self.expect(try nl.rules(family: .ipv4) + nl.rules(family: .ipv6) == before, "rules back to the first list")
            try Self.expect(try nl.routes(family: .ipv4, table: 100).isEmpty && nl.routes(family: .ipv6, table: 100).isEmpty,
                            "table 100 empty again")
        }
    }

    func testLinkByIndex() {
        inPrivateNetworkNamespace {
            let nl = try NetlinkSocket()
            let lo = try Self.loopback(nl)
            let found = try nl.link(index: lo.index)
            try Self.expect(found?.name == "lo" && found?.isUp == true && found?.hasCarrier == true && found?.isRunning == true,
                            "lo by index: up, carrier, running: \(String(describing: found))")
            try Self.expect(try nl.link(index: 4242) == nil, "no link 4242: nil")
        }
    }
}
