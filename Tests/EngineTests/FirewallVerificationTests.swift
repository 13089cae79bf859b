import Session
import Foundation
import Engine
import Glibc
import LinuxSystem
import Nftables
import TunnelgateSettings
import XCTest

/// The kill switch compared by content (FirewallVerification through Engine.verifyFirewall), repaired,
/// reported, and failed closed by the monitor, against the kernel of a private namespace. The changes are
/// made by a second netfilter socket, as another program would make them.
final class FirewallVerificationTests: XCTestCase {
    static let carrier = IPAddress("198.18.0.10")!

    static func killSwitchSettings(name: String = "tgks0") throws -> TunnelSettings {
        let json = """
        {"name": "\(name)", "tunnelRemoteAddress": "198.18.0.10", "mtu": 1400,
         "ipv4Settings": {"addresses": ["10.8.0.2"], "subnetMasks": ["255.255.255.0"], "includedRoutes": ["0.0.0.0/0"]},
         "carrierEndpoints": ["198.18.0.10"], "includeAllNetworks": true}
        """
        return try TunnelSettings.parse(json: Array(json.utf8))
    }

    /// The index of the plan's rule in `chain` whose comment ends with `why`.
    static func index(_ table: NftTable, _ chain: String, _ why: String) throws -> (Int, Int) {
        let c = try XCTUnwrap(table.chains.firstIndex { $0.name == chain })
        let r = try XCTUnwrap(table.chains[c].rules.firstIndex { $0.comment.hasSuffix(" " + why) })
        return (c, r)
    }

    func testEachKindOfOutsideChangeIsOneLineAndRepairPutsItBack() {
        inPrivateNetworkNamespace {
            let gateway = try Engine()
            let tunnel = try gateway.up(try Self.killSwitchSettings(), resolver: Fixed(), configPath: nil)
            let table = try XCTUnwrap(tunnel.plan.firewall)
            try expect(gateway.verifyFirewall(table).isEmpty, "the applied table verifies: \(gateway.verifyFirewall(table))")
            let outsider = try NftablesSocket()
            let (output, blocked) = try Self.index(table, "output", "blocked")
            let (_, loopback) = try Self.index(table, "output", "loopback")

            /// Makes the kernel's table `changed`, returns what verification says, repairs, checks it is back.
            func after(_ what: String, _ change: (inout NftTable) -> Void) throws -> [String] {
                var changed = table
                change(&changed)
                try outsider.replace(changed)
                let found = gateway.verifyFirewall(table)
                let outcome = gateway.repair(tunnel.plan, interfaceIndex: tunnel.interfaceIndex)
                try expect(outcome.repaired == found && outcome.failed.isEmpty, "\(what): repair put back what was found: \(outcome)")
                try expect(gateway.verifyFirewall(table).isEmpty, "\(what): the table verifies after repair: \(gateway.verifyFirewall(table))")
                return found
            }

            // The DNS servers' set is empty without dnsSettings: an element added there is not the plan's.
            try outsider.replaceElements(of: NftSet(name: "dns4", family: .ipv4,
                                                    elements: [IPAddress("198.18.0.99")!]), in: table.name)
            var found = gateway.verifyFirewall(table)
            try expect(found == ["nftables: set dns4 has element 198.18.0.99 the plan does not have"], "element added: \(found)")
            try expect(gateway.repair(tunnel.plan, interfaceIndex: tunnel.interfaceIndex).repaired == found, "element repaired")
            try expect(gateway.verifyFirewall(table).isEmpty, "the element is gone")

            // The carrier's own rule: its address changed is one line, and repaired.
            let (_, carrier) = try Self.index(table, "output", "carrier")
            found = try after("carrier address") { $0.chains[output].rules[carrier].matches[1] = .destination(IPPrefix("198.18.0.99/32")!) }
            try expect(found.count == 1 && found[0].hasPrefix("nftables: rule \(carrier + 1) of chain output (carrier) differs"),
                       "carrier rule changed: \(found)")

            found = try after("verdict") { $0.chains[output].rules[blocked].verdict = .accept }
            try expect(found == ["nftables: rule \(blocked + 1) of chain output (blocked) differs: [ immediate reg 0 accept ] where the plan has [ immediate reg 0 drop ]"],
                       "verdict changed: \(found)")

            found = try after("match value") { $0.chains[output].rules[loopback].matches = [.outputInterface("lp")] }
            try expect(found.count == 1 && found[0].hasPrefix("nftables: rule \(loopback + 1) of chain output (loopback) differs: [ cmp eq reg 1 ")
                       && found[0].contains("where the plan has [ cmp eq reg 1 "), "match value changed: \(found)")

            found = try after("rule removed") { $0.chains[output].rules.remove(at: blocked) }
            try expect(found == ["nftables: rule \(blocked + 1) of chain output (blocked) is missing: [ counter ] [ immediate reg 0 drop ]"],
                       "the final drop deleted: \(found)")

            found = try after("rule added") { $0.chains[output].rules.insert(NftRule([], .accept, comment: "sneak"), at: 0) }
            try expect(found == ["nftables: chain output has a rule the plan does not have at position 1: [ counter ] [ immediate reg 0 accept ]"],
                       "an accept at the top: \(found)")

            found = try after("reordered") { $0.chains[output].rules.swapAt(loopback, blocked) }
            try expect(!found.isEmpty && found.allSatisfy { $0.contains("chain output") }, "two rules swapped: \(found)")

            found = try after("policy") { $0.chains[output].policy = .accept }
            try expect(found == ["nftables: chain output policy is accept, not drop"], "policy: \(found)")

            found = try after("priority") { $0.chains[output].priority = -10 }
            try expect(found == ["nftables: chain output priority is -10, not 0"], "priority: \(found)")

            found = try after("hook") { $0.chains[output].hook = .postrouting }
            try expect(found == ["nftables: chain output hook is postrouting, not output"], "hook: \(found)")

            found = try after("extra chain") { $0.chains.append(NftChain(name: "sneak", hook: .output, priority: -1, policy: .accept, rules: [])) }
            try expect(found == ["nftables: chain sneak is not in the plan (hook output, priority -1, policy accept, 0 rules)"], "extra chain: \(found)")

            found = try after("extra set") { $0.sets.append(NftSet(name: "sneak", family: .ipv4, elements: [])) }
            try expect(found == ["nftables: set sneak is not in the plan (0 elements)"], "extra set: \(found)")

            found = try after("flushed") { for i in $0.chains.indices { $0.chains[i].rules = [] } }
            try expect(found.contains("nftables: chain output has no rules; the plan has \(table.chains[output].rules.count)"), "flushed: \(found)")

            found = try after("comment") { $0.comment = "someone else's" }
            try expect(found == [#"nftables: table inet tunnelgate-tgks0 has comment "someone else's", not comment "tunnelgate:tgks0""#], "comment: \(found)")

            try outsider.delete(table: table.name)
            found = gateway.verifyFirewall(table)
            try expect(found == ["nftables table inet tunnelgate-tgks0 is missing"], "deleted: \(found)")
            try expect(gateway.repair(tunnel.plan, interfaceIndex: tunnel.interfaceIndex).repaired == found, "deleted table repaired")
            try expect(gateway.verifyFirewall(table).isEmpty, "the table is back")
            try tunnel.stop()
            try expect(!FileSystem.exists(gateway.state.firewallPath("tgks0")), "the enforced table's record goes with the tunnel")
        }
    }

    func testStatusSaysOnOnlyWhileTheContentMatches() {
        inPrivateNetworkNamespace {
            let gateway = try Engine()
            let tunnel = try gateway.up(try Self.killSwitchSettings(), resolver: Fixed(), configPath: nil)
            let table = try XCTUnwrap(tunnel.plan.firewall)
            var report = try gateway.report("tgks0")
            try expect(report.killSwitch && report.firewall == .asPlanned && report.firewallDifferences.isEmpty, "on after up: \(report)")
            try expect(report.firewallLines.contains { $0.hasPrefix("  kill switch: on (") }, "status text: \(report.firewallLines)")

            let outsider = try NftablesSocket()
            try outsider.replaceElements(of: NftSet(name: "dns4", family: .ipv4,
                                                    elements: [IPAddress("198.18.0.30")!]), in: table.name)
            report = try gateway.report("tgks0")
            try expect(!report.killSwitch && report.firewall == .tamperedWith
                       && report.firewallDifferences == ["nftables: set dns4 has element 198.18.0.30 the plan does not have"],
                       "tampered: \(report)")
            try expect(!report.firewallLines.contains { $0.contains("kill switch: on") }
                       && report.firewallLines.contains { $0.contains("kill switch: TAMPERED WITH") }
                       && report.firewallLines.contains("    nftables: set dns4 has element 198.18.0.30 the plan does not have"),
                       "status text says what differs: \(report.firewallLines)")

            try outsider.delete(table: table.name)
            report = try gateway.report("tgks0")
            try expect(!report.killSwitch && report.firewall == .missing, "missing: \(report)")

            _ = gateway.repair(tunnel.plan, interfaceIndex: tunnel.interfaceIndex)
            report = try gateway.report("tgks0")
            try expect(report.killSwitch && report.firewall == .asPlanned, "on again after repair: \(report)")
            try tunnel.stop()
        }
    }

    /// Polls the monitor as the owner's loop does until a pass did something (or `seconds` pass).
    static func nextPass(_ monitor: Monitor, _ tunnel: ActiveTunnel, seconds: Double = 2) -> Monitor.Pass? {
        let deadline = ProcessControl.monotonicSeconds() + seconds
        while ProcessControl.monotonicSeconds() < deadline {
            var fds = monitor.descriptors.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
            let timeout = monitor.timeoutMilliseconds()
            let ready = poll(&fds, nfds_t(fds.count), timeout < 0 ? 50 : min(timeout, 50))
            if ready > 0 { monitor.notificationsArrived() }
            let pass = monitor.runDueCheck(tunnel: tunnel)
            _ = monitor.runDueCarrierCheck(tunnel: tunnel)
            if !pass.isEmpty { return pass }
        }
        return nil
    }

    /// Runs passes until none is due (the confirming pass after a repair included).
    static func settle(_ monitor: Monitor, _ tunnel: ActiveTunnel) throws {
        for _ in 0..<100 {
            if monitor.timeoutMilliseconds() < 0 { return }
            let pass = nextPass(monitor, tunnel, seconds: 0.1)
            try expect(pass == nil, "nothing to repair while settling: \(String(describing: pass))")
        }
        throw Expectation(description: "the monitor did not settle")
    }

    func testTheMonitorRepairsWithoutPauseAndFailsClosedWhenRepairsAreUndoneAtOnce() {
        inPrivateNetworkNamespace {
            let gateway = try Engine()
            let tunnel = try gateway.up(try Self.killSwitchSettings(), resolver: Fixed(), configPath: nil)
            let table = try XCTUnwrap(tunnel.plan.firewall)
            let monitor = try gateway.makeMonitor()
            try Self.settle(monitor, tunnel)
            let outsider = try NftablesSocket()
            func addElement(_ last: UInt8) throws {
                try outsider.replaceElements(of: NftSet(name: "dns4", family: .ipv4,
                                                        elements: [IPAddress("198.18.1.\(last)")!]), in: table.name)
            }

            // More than the old limit of 10 repairs in 10 s, each a different element: every one is repaired.
            for i in 1...15 {
                try addElement(UInt8(i))
                let pass = try XCTUnwrap(Self.nextPass(monitor, tunnel), "change \(i) was not repaired within 2 s")
                try expect(pass.repaired == ["nftables: set dns4 has element 198.18.1.\(i) the plan does not have"] && !pass.failedClosed,
                           "change \(i): \(pass)")
            }
            try expect(monitor.repairs == 15 && monitor.failedClosed == nil, "15 repairs, not closed: \(monitor.repairs)")
            try expect(gateway.verifyFirewall(table).isEmpty, "the plan's table after the repairs")
            try Self.settle(monitor, tunnel)

            // The same element put back right after every repair, before the next pass: after recurrenceLimit
            // such repairs in a row, the tunnel fails closed.
            var passes = 0
            while monitor.failedClosed == nil, passes < 20 {
                try addElement(200)
                let pass = try XCTUnwrap(Self.nextPass(monitor, tunnel), "pass \(passes + 1) did not come")
                passes += 1
                try expect(pass.repaired == ["nftables: set dns4 has element 198.18.1.200 the plan does not have"], "pass \(passes): \(pass)")
                try expect(pass.failedClosed == (monitor.failedClosed != nil), "failedClosed is said by the pass that closed")
            }
            try expect(passes == Monitor.recurrenceLimit + 1, "closed on pass \(passes), after \(Monitor.recurrenceLimit) came back")
            let reason = try XCTUnwrap(monitor.failedClosed)
            try expect(reason.contains("undone before the next check") && reason.contains("198.18.1.200"), "why: \(reason)")
            let closed = FirewallVerification.failClosedTable(name: table.name, comment: table.comment)
            try expect(gateway.verifyFirewall(closed).isEmpty, "the block-all table is in place: \(gateway.verifyFirewall(closed))")
            try expect(gateway.enforcedFirewall("tgks0") == closed.contents, "recorded as the table enforced")
            try expect(gateway.lastDisconnectError("tgks0") == "failed closed: \(reason)", "recorded as the last disconnect error")
            let report = try gateway.report("tgks0")
            try expect(report.killSwitch && report.firewall == .asPlanned, "status compares with the block-all table: \(report)")

            // The block-all table is kept: changed, it is put back.
            var opened = closed
            opened.chains[0].policy = .accept
            try outsider.replace(opened)
            let pass = try XCTUnwrap(Self.nextPass(monitor, tunnel), "the changed block-all table was not repaired")
            try expect(pass.repaired == ["nftables: chain output policy is accept, not drop"], "block-all repaired: \(pass)")
            try expect(gateway.verifyFirewall(closed).isEmpty, "block-all again")

            try tunnel.stop()
            try expect((try outsider.tables()).isEmpty, "down removes the block-all table")
        }
    }
}
