import TunnelgateTestSupport
import LinuxSystem
import Nftables
import TunnelgateSettings
import XCTest

final class NftablesSocketTests: XCTestCase {
    struct Expectation: Error, CustomStringConvertible { let description: String }
    static func expect(_ condition: Bool, _ message: @autoclosure () -> String) throws {
        if !condition { throw Expectation(description: message()) }
    }

    static func table(carriers: [IPAddress]) -> NftTable {
        NftTable(name: "tunnelgate-test", comment: "tunnelgate:test", sets: [
            NftSet(name: "carriers4", family: .ipv4, elements: carriers.filter { $0.family == .ipv4 }),
            NftSet(name: "carriers6", family: .ipv6, elements: carriers.filter { $0.family == .ipv6 }),
        ], chains: [
            NftChain(name: "output", hook: .output, priority: 0, policy: .accept, rules: [
                NftRule([.outputInterface("lo")], .accept, comment: "tunnelgate:test loopback"),
                NftRule([.destinationInSet("carriers4", .ipv4)], .accept, comment: "tunnelgate:test carriers"),
                NftRule([.destinationInSet("carriers6", .ipv6)], .accept, comment: "tunnelgate:test carriers"),
                NftRule([.destination(IPPrefix("10.0.0.0/8")!)], .accept, comment: "tunnelgate:test lan"),
                NftRule([.destination(IPPrefix("fe80::/10")!)], .accept, comment: "tunnelgate:test link-local"),
                NftRule([.transport(protocolNumber: 17, destinationPort: 53)], .drop, comment: "tunnelgate:test dns"),
                NftRule([.icmpv6Type(135)], .accept, comment: "tunnelgate:test nd"),
                NftRule([.establishedOrRelated], .accept, comment: "tunnelgate:test ct"),
                NftRule([.mark(0x1d24), .family(.ipv4)], .accept, comment: "tunnelgate:test mark"),
            ]),
            NftChain(name: "postrouting", hook: .postrouting, kind: .nat, priority: 100, policy: .accept, rules: [
                NftRule([.outputInterface("tg0"), .source(IPPrefix("192.168.0.0/16")!)], .masquerade, comment: "tunnelgate:test masquerade"),
            ]),
        ])
    }

    func testReplaceReadBackAndDelete() {
        inPrivateNetworkNamespace {
            let nft = try NftablesSocket()
            let table = Self.table(carriers: [IPAddress("198.18.0.10")!, IPAddress("2001:db8::10")!])
            try nft.replace(table)
            try nft.replace(table) // replacing is idempotent: one table, not two copies of the rules
            let tables = try nft.tables()
            try Self.expect(tables.filter { $0.name == "tunnelgate-test" }.count == 1, "one table: \(tables)")
            try Self.expect(tables.first { $0.name == "tunnelgate-test" }?.comment == "tunnelgate:test", "table comment read back")
            let rules = try nft.rules(table: "tunnelgate-test")
            try Self.expect(rules.count == table.ruleCount, "\(table.ruleCount) rules read back, got \(rules.count)")
            try Self.expect(rules.allSatisfy { $0.comment?.hasPrefix("tunnelgate:test") == true }, "every rule carries the marker")
            try Self.expect(Set(rules.map(\.chain)) == ["output", "postrouting"], "rules in their chains")
            try nft.replaceElements(of: NftSet(name: "carriers4", family: .ipv4, elements: [IPAddress("198.18.0.11")!]), in: "tunnelgate-test")
            try nft.delete(table: "tunnelgate-test")
            try Self.expect(!(try nft.tables()).contains { $0.name == "tunnelgate-test" }, "table gone")
            try nft.delete(table: "tunnelgate-test") // deleting what is not there is not an error
        }
    }

    func testAFailedTransactionChangesNothingAndNamesTheOperation() {
        inPrivateNetworkNamespace {
            let nft = try NftablesSocket()
            var table = Self.table(carriers: [])
            table.chains[0].rules.append(NftRule([.destinationInSet("no-such-set", .ipv4)], .accept, comment: "tunnelgate:test bad"))
            do {
                try nft.replace(table)
                throw Expectation(description: "a rule on a missing set was accepted")
            } catch let error as NftablesError {
                try Self.expect(error.errno == .noSuchEntry, "ENOENT: \(error)")
                try Self.expect(error.operation.contains("nft add rule inet tunnelgate-test output"), "names the rule: \(error)")
            }
            try Self.expect(!(try nft.tables()).contains { $0.name == "tunnelgate-test" }, "the transaction left nothing")
        }
    }
}
