import TunnelgateTestSupport
import LinuxSystem
import Nftables
import TunnelgateSettings
import XCTest

/// The read-back of a whole table (NftablesSocket.contents) against what the plan's table makes
/// (NftTable.contents): equal after `replace`, and different after each kind of outside change.
final class TableContentsTests: XCTestCase {
    typealias Expect = NftablesSocketTests

    static var table: NftTable { NftablesSocketTests.table(carriers: [IPAddress("198.18.0.10")!, IPAddress("2001:db8::10")!]) }

    /// Every difference between two contents, one line each (a small stand-in for the engine's comparison,
    /// so a failure here says where the read-back and the plan part).
    static func differences(_ a: NftTableContents, _ b: NftTableContents) -> [String] {
        var out: [String] = []
        if a.flags != b.flags { out.append("flags \(a.flags) vs \(b.flags)") }
        if a.comment != b.comment { out.append("comment \(a.comment ?? "-") vs \(b.comment ?? "-")") }
        for c in a.chains {
            guard let d = b.chain(c.name) else { out.append("chain \(c.name) only in the first"); continue }
            if c.hook != d.hook || c.priority != d.priority || c.type != d.type || c.policy != d.policy
                || c.flags != d.flags || c.devices != d.devices {
                out.append("chain \(c.name): \(c) vs \(d)")
            }
            if c.rules.count != d.rules.count { out.append("chain \(c.name): \(c.rules.count) rules vs \(d.rules.count)") }
            for (x, y) in zip(c.rules, d.rules) where !x.sameContent(as: y) {
                out.append("chain \(c.name): \(x) (\(x.expressions.map(\.attributes))) vs \(y) (\(y.expressions.map(\.attributes)))")
            }
        }
        for c in b.chains where a.chain(c.name) == nil { out.append("chain \(c.name) only in the second") }
        for s in a.sets {
            guard let t = b.set(s.name) else { out.append("set \(s.name) only in the first"); continue }
            if s != t { out.append("set \(s.name): \(s) vs \(t)") }
        }
        for s in b.sets where a.set(s.name) == nil { out.append("set \(s.name) only in the second") }
        return out + a.unreadable + b.unreadable
    }

    /// A set of several elements (a tunnel's two DNS servers) is several elements in the plan's contents
    /// and in the read-back: public providers with two DNS servers failed their verification when the
    /// plan's side read none.
    func testASetOfSeveralElementsIsReadWholeFromThePlanAndFromTheKernel() {
        inPrivateNetworkNamespace {
            let table = NftablesSocketTests.table(carriers: ["198.18.0.10", "198.18.0.11", "198.18.0.12", "2001:db8::10", "2001:db8::11"].map { IPAddress($0)! })
            let planned = table.contents
            try Expect.expect(planned.set("carriers4")?.elements.count == 3, "the plan's contents hold 3 IPv4 elements: \(String(describing: planned.set("carriers4")))")
            try Expect.expect(planned.set("carriers6")?.elements.count == 2, "the plan's contents hold 2 IPv6 elements: \(String(describing: planned.set("carriers6")))")
            let nft = try NftablesSocket()
            try nft.replace(table)
            let read = try nft.contents(of: table.name)
            try Expect.expect(read?.set("carriers4")?.elements.count == 3, "the kernel's answer holds 3 IPv4 elements")
            let differences = read.map { Self.differences($0, planned) } ?? ["no table read back"]
            try Expect.expect(differences.isEmpty, "read back equals the plan: \(differences)")
        }
    }

    func testTheReadBackOfAReplacedTableEqualsThePlansContents() {
        inPrivateNetworkNamespace {
            let nft = try NftablesSocket()
            let table = Self.table
            try Expect.expect(try nft.contents(of: table.name) == nil, "no table before replace")
            try nft.replace(table)
            guard let read = try nft.contents(of: table.name) else { throw Expect.Expectation(description: "table not read back") }
            let expected = table.contents
            try Expect.expect(expected.chains.map(\.rules.count) == [9, 1], "the plan's rules: \(expected.chains.map(\.rules.count))")
            try Expect.expect(expected.sets.map(\.elements.count) == [1, 1], "the plan's elements: \(expected.sets)")
            let d = Self.differences(read, expected)
            try Expect.expect(d.isEmpty, "read back differs from the plan:\n" + d.joined(separator: "\n"))
            try Expect.expect(read == expected, "read back == plan (handles are not content)")
            try Expect.expect(read.chain("output")?.rules.allSatisfy { $0.handle != 0 } == true, "the kernel's handles are read")
            try Expect.expect(read.chain("output")?.policy == 1 && read.chain("output")?.hook == 3
                              && read.chain("postrouting")?.type == "nat" && read.chain("postrouting")?.priority == 100,
                              "hooks, types, priorities, policies read: \(read.chains)")
            try Expect.expect(read.set("carriers4")?.keyLength == 4 && read.set("carriers6")?.keyType == 8, "set keys read: \(read.sets)")
        }
    }

    func testOutsideChangesShowInTheReadBack() {
        inPrivateNetworkNamespace {
            let nft = try NftablesSocket()
            let table = Self.table
            let expected = table.contents
            func read() throws -> NftTableContents {
                guard let c = try nft.contents(of: table.name) else { throw Expect.Expectation(description: "table gone") }
                return c
            }

            // An element added to a set.
            try nft.replace(table)
            try nft.replaceElements(of: NftSet(name: "carriers4", family: .ipv4,
                                               elements: [IPAddress("198.18.0.10")!, IPAddress("198.18.0.99")!]), in: table.name)
            var c = try read()
            try Expect.expect(c.set("carriers4")?.elements == [[198, 18, 0, 10], [198, 18, 0, 99]], "the added element is read: \(String(describing: c.set("carriers4")))")
            try Expect.expect(c != expected, "an added element is a difference")

            // A verdict changed, a match value changed, a policy changed, a rule added, a chain added.
            var changed = table
            changed.chains[0].rules[5].verdict = .accept
            try nft.replace(changed)
            c = try read()
            try Expect.expect(!c.chain("output")!.rules[5].sameContent(as: expected.chain("output")!.rules[5]), "a changed verdict differs")
            try Expect.expect(c.chain("output")!.rules[4].sameContent(as: expected.chain("output")!.rules[4]), "the rule before it does not")

            changed = table
            changed.chains[0].rules[3].matches = [.destination(IPPrefix("10.0.0.0/9")!)]
            try nft.replace(changed)
            c = try read()
            try Expect.expect(!c.chain("output")!.rules[3].sameContent(as: expected.chain("output")!.rules[3]), "a changed prefix differs")

            changed = table
            changed.chains[0].policy = .drop
            changed.chains[1].priority = 99
            try nft.replace(changed)
            c = try read()
            try Expect.expect(c.chain("output")?.policy == 0 && c.chain("postrouting")?.priority == 99, "policy and priority read: \(c.chains)")

            changed = table
            changed.chains.append(NftChain(name: "extra", hook: .input, priority: -5, policy: .accept, rules: []))
            try nft.replace(changed)
            c = try read()
            try Expect.expect(c.chain("extra")?.hook == 1 && c.chain("extra")?.priority == -5, "an extra chain is read: \(c.chains)")

            changed = table
            changed.sets.append(NftSet(name: "extra", family: .ipv4, elements: []))
            try nft.replace(changed)
            c = try read()
            try Expect.expect(c.set("extra") != nil, "an extra set is read")

            try nft.replace(table)
            try Expect.expect(try read() == expected, "replacing again gives the plan's contents")
            try nft.delete(table: table.name)
        }
    }

    /// The recorded form of a table (its messages) reads back as the same contents.
    func testTheMessagesOfATableParseToItsContents() throws {
        let table = Self.table
        let again = NftTableContents(messages: table.messages, table: table.name)
        try Expect.expect(again == table.contents && again.chains.count == 2 && again.sets.count == 2, "messages round-trip")
        try Expect.expect(NftTableContents(messages: table.messages, table: "other").chains.isEmpty, "another table's messages are skipped")
        try Expect.expect(NftTableContents(messages: [1, 2, 3], table: table.name).chains.isEmpty, "garbage parses to nothing")
    }
}
