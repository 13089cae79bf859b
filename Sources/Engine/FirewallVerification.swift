import LinuxSystem
import Nftables

/// A tunnel's nftables table compared with the kernel's by content: the
/// table's flags and comment, every chain's hook, type, priority, policy,
/// flags and devices, every rule's expressions in order (libnftnl's reading
/// of the kernel's answer against libnftnl's reading of the messages that
/// made the plan's table: `NftTable.contents`), every set's key and flags
/// and every element. Generic over any `NftTable`: nothing here knows what
/// the rules of `Firewall.table` are.
///
/// Each difference is one line, "nftables: …". Outside the table nothing is
/// compared: a chain of another table cannot let through what this one drops
/// (in nf_tables a drop in any base chain of a hook is final, an accept is not).
public enum FirewallVerification {
    /// At most this many lines for one chain's rules and for one set's elements; then a count.
    static let linesPerObject = 6

    /// Every difference of the kernel's table (`actual`, nil when it has none of that name) from
    /// `expected`.
    public static func differences(expected: NftTableContents, actual: NftTableContents?) -> [String] {
        guard let actual else { return ["nftables table inet \(expected.name) is missing"] }
        var out: [String] = []
        if actual.flags != expected.flags {
            out.append("nftables: table inet \(expected.name) has flags \(tableFlags(actual.flags)), not \(tableFlags(expected.flags))")
        }
        if actual.comment != expected.comment {
            out.append("nftables: table inet \(expected.name) has \(actual.comment.map { "comment \"\($0)\"" } ?? "no comment"), "
                       + "not \(expected.comment.map { "comment \"\($0)\"" } ?? "no comment")")
        }
        out += actual.unreadable.map { "nftables: table inet \(expected.name) has \($0)" }
        let prefix = expected.comment.map { $0 + " " }
        for chain in expected.chains {
            guard let found = actual.chain(chain.name) else {
                out.append("nftables: chain \(chain.name) is missing")
                continue
            }
            out += chainDifferences(found, chain)
            out += ruleDifferences(chain: chain.name, actual: found.rules, expected: chain.rules, commentPrefix: prefix)
        }
        for chain in actual.chains where expected.chain(chain.name) == nil {
            var what = chain.hook.map { "hook \(hookName($0)), priority \(chain.priority ?? 0), policy \(policyName(chain.policy))" } ?? "a regular chain"
            what += ", \(chain.rules.count) rule\(chain.rules.count == 1 ? "" : "s")"
            out.append("nftables: chain \(chain.name) is not in the plan (\(what))")
        }
        for set in expected.sets {
            guard let found = actual.set(set.name) else {
                out.append("nftables: set \(set.name) is missing")
                continue
            }
            out += setDifferences(found, set)
        }
        for set in actual.sets where expected.set(set.name) == nil {
            out.append("nftables: set \(set.name) is not in the plan (\(set.elements.count) element\(set.elements.count == 1 ? "" : "s"))")
        }
        return out
    }

    static func chainDifferences(_ actual: NftChainContents, _ expected: NftChainContents) -> [String] {
        let name = "nftables: chain \(expected.name)"
        var out: [String] = []
        if actual.hook != expected.hook {
            out.append("\(name) \(actual.hook.map { "hook is \(hookName($0))" } ?? "is a regular chain"), "
                       + "not \(expected.hook.map { hookName($0) } ?? "a regular chain")")
        }
        if actual.type != expected.type { out.append("\(name) type is \(actual.type ?? "none"), not \(expected.type ?? "none")") }
        if actual.priority != expected.priority {
            out.append("\(name) priority is \(actual.priority.map(String.init) ?? "none"), not \(expected.priority.map(String.init) ?? "none")")
        }
        if actual.policy != expected.policy { out.append("\(name) policy is \(policyName(actual.policy)), not \(policyName(expected.policy))") }
        if actual.flags != expected.flags { out.append("\(name) has flags 0x\(String(actual.flags, radix: 16)), not 0x\(String(expected.flags, radix: 16))") }
        if actual.devices != expected.devices {
            out.append("\(name) is bound to \(actual.devices.isEmpty ? "no device" : actual.devices.joined(separator: ", ")), "
                       + "not \(expected.devices.isEmpty ? "no device" : expected.devices.joined(separator: ", "))")
        }
        return out
    }

    /// The rules of one chain, aligned by their longest common subsequence: a rule
    /// the kernel has in a place the plan has another is "differs"; one only the
    /// kernel has is "not in the plan"; one only the plan has is "missing". A
    /// reordered rule shows as one of those where it left and where it went.
    static func ruleDifferences(chain: String, actual: [NftRuleContents], expected: [NftRuleContents],
                                commentPrefix: String?) -> [String] {
        if actual.isEmpty && !expected.isEmpty {
            return ["nftables: chain \(chain) has no rules; the plan has \(expected.count)"]
        }
        func label(_ i: Int) -> String {
            var text = "rule \(i + 1) of chain \(chain)"
            if var comment = expected[i].comment {
                if let commentPrefix, comment.hasPrefix(commentPrefix) { comment.removeFirst(commentPrefix.count) }
                text += " (\(comment))"
            }
            return text
        }
        let n = actual.count, m = expected.count
        // lcs[i][j]: the longest common subsequence of actual[i...] and expected[j...].
        var lcs = [[Int]](repeating: [Int](repeating: 0, count: m + 1), count: n + 1)
        for i in stride(from: n - 1, through: 0, by: -1) {
            for j in stride(from: m - 1, through: 0, by: -1) {
                lcs[i][j] = actual[i].sameContent(as: expected[j]) ? lcs[i + 1][j + 1] + 1 : max(lcs[i + 1][j], lcs[i][j + 1])
            }
        }
        var out: [String] = []
        var i = 0, j = 0
        var extra: [Int] = [], missing: [Int] = []
        func flushGap() {
            let paired = min(extra.count, missing.count)
            for k in 0..<paired { out.append("nftables: \(label(missing[k])) differs: \(ruleChange(actual[extra[k]], expected[missing[k]]))") }
            for k in extra.dropFirst(paired) {
                out.append("nftables: chain \(chain) has a rule the plan does not have at position \(k + 1): \(clip(actual[k].description))")
            }
            for k in missing.dropFirst(paired) { out.append("nftables: \(label(k)) is missing: \(clip(expected[k].description))") }
            extra = []
            missing = []
        }
        while i < n || j < m {
            if i < n, j < m, actual[i].sameContent(as: expected[j]) {
                flushGap()
                i += 1
                j += 1
            } else if j >= m || (i < n && lcs[i + 1][j] >= lcs[i][j + 1]) {
                extra.append(i)
                i += 1
            } else {
                missing.append(j)
                j += 1
            }
        }
        flushGap()
        if out.count > linesPerObject {
            let more = out.count - (linesPerObject - 1)
            out = Array(out.prefix(linesPerObject - 1)) + ["nftables: chain \(chain): \(more) more rule differences"]
        }
        return out
    }

    /// What differs between two rules, at the first expression where they part.
    static func ruleChange(_ actual: NftRuleContents, _ expected: NftRuleContents) -> String {
        if let why = actual.unreadable { return "it cannot be read (\(why))" }
        let a = actual.expressions, e = expected.expressions
        if let k = (0..<min(a.count, e.count)).first(where: { a[$0] != e[$0] }) {
            return "\(a[k].description) where the plan has \(e[k].description)"
        }
        if a.count > e.count { return "it has \(clip(a[e.count...].map(\.description).joined(separator: " "))) the plan does not have" }
        if e.count > a.count { return "it lacks \(clip(e[a.count...].map(\.description).joined(separator: " ")))" }
        return "its comment is \(actual.comment.map { "\"\($0)\"" } ?? "none"), not \(expected.comment.map { "\"\($0)\"" } ?? "none")"
    }

    static func setDifferences(_ actual: NftSetContents, _ expected: NftSetContents) -> [String] {
        let name = "nftables: set \(expected.name)"
        var out: [String] = []
        if actual.keyType != expected.keyType || actual.keyLength != expected.keyLength {
            out.append("\(name) has keys of type \(actual.keyType) and \(actual.keyLength) bytes, not type \(expected.keyType) and \(expected.keyLength) bytes")
        }
        if actual.flags != expected.flags {
            out.append("\(name) has flags 0x\(String(actual.flags, radix: 16)), not 0x\(String(expected.flags, radix: 16))")
        }
        if actual.dataType != expected.dataType || actual.dataLength != expected.dataLength {
            out.append("\(name) is \(actual.dataType == nil ? "a set" : "a map"), not \(expected.dataType == nil ? "a set" : "a map") as planned")
        }
        let have = Set(actual.elements), want = Set(expected.elements)
        var elements = actual.elements.filter { !want.contains($0) }.map { "\(name) has element \(actual.describe($0)) the plan does not have" }
        elements += expected.elements.filter { !have.contains($0) }.map { "\(name) lacks element \(expected.describe($0))" }
        if elements.count > linesPerObject {
            let more = elements.count - (linesPerObject - 1)
            elements = Array(elements.prefix(linesPerObject - 1)) + ["\(name): \(more) more elements differ"]
        }
        return out + elements
    }

    static func clip(_ text: String) -> String {
        text.count <= 240 ? text : String(text.prefix(237)) + "…"
    }

    static func hookName(_ hook: UInt32) -> String {
        switch hook {
        case 0: "prerouting"
        case NftHook.input.rawValue: "input"
        case NftHook.forward.rawValue: "forward"
        case NftHook.output.rawValue: "output"
        case NftHook.postrouting.rawValue: "postrouting"
        case 5: "ingress"
        default: "hook \(hook)"
        }
    }

    static func policyName(_ policy: UInt32?) -> String {
        switch policy {
        case nil: "none"
        case 0?: "drop"
        case 1?: "accept"
        case let p?: "verdict \(p)"
        }
    }

    static func tableFlags(_ flags: UInt32) -> String {
        guard flags != 0 else { return "none" }
        var names: [String] = []
        if flags & 1 != 0 { names.append("dormant") }
        if flags & 2 != 0 { names.append("owner") }
        if flags & ~3 != 0 { names.append("0x\(String(flags & ~3, radix: 16))") }
        return names.joined(separator: ",")
    }

    // MARK: - Failing closed

    /// The table a tunnel falls back to when repairs cannot win (`Monitor`): it
    /// drops everything but loopback on the output, input and forward hooks
    /// (policy drop, priority 0). It has the name and comment of the table it
    /// replaces, so teardown, `down` and the next `up` treat it as the tunnel's.
    public static func failClosedTable(name: String, comment: String) -> NftTable {
        let tag = comment + " failed closed:"
        return NftTable(name: name, comment: comment, sets: [], chains: [
            NftChain(name: "output", hook: .output, priority: 0, policy: .drop, rules: [
                NftRule([.outputInterface("lo")], .accept, comment: "\(tag) loopback"),
            ]),
            NftChain(name: "input", hook: .input, priority: 0, policy: .drop, rules: [
                NftRule([.inputInterface("lo")], .accept, comment: "\(tag) loopback"),
            ]),
            NftChain(name: "forward", hook: .forward, priority: 0, policy: .drop, rules: []),
        ])
    }

    /// The name of the second block-all table, made when the kernel refuses to replace the tunnel's own.
    public static func fallbackTableName(_ table: String) -> String { table + "-closed" }
}

extension NftTableContents {
    /// True when the table has a base chain on the output hook: a kill switch, not only forwarding rules.
    public var isKillSwitch: Bool { chains.contains { $0.hook == NftHook.output.rawValue } }
}

extension StateDirectory {
    /// The nftables table the tunnel's owner enforces (the plan's, or the fail-closed one), as the
    /// nf_tables messages that make it; there while the tunnel's journal is, for `status` to compare
    /// the kernel's table with.
    public func firewallPath(_ name: String) -> String { "\(path)/\(name).firewall" }
}

extension Engine {
    /// Reads the table back and lists how it differs from `table`, content for content.
    public func firewallDifferences(_ table: NftTable) -> [String] {
        firewallDifferences(expected: table.contents)
    }

    func firewallDifferences(expected: NftTableContents) -> [String] {
        do {
            let actual = try nft().contents(of: expected.name)
            return FirewallVerification.differences(expected: expected, actual: actual)
        } catch {
            return ["nftables: reading back table inet \(expected.name): \(error)"]
        }
    }

    /// Records `table` as the one the owner of tunnel `name` enforces (NAME.firewall); nil removes the record.
    func recordEnforcedFirewall(_ table: NftTable?, tunnel name: String) {
        let path = state.firewallPath(name)
        guard let table else { return FileSystem.remove(path) }
        let bytes = table.messages
        if (try? FileSystem.read(path)) == bytes { return }
        try? FileSystem.writeAtomically(path, bytes)
    }

    /// The table the owner of `name` enforces, as recorded; nil without a record, or without a journal
    /// (a record the tunnel's removal left behind).
    public func enforcedFirewall(_ name: String) -> NftTableContents? {
        guard FileSystem.exists(state.journalPath(name)), let bytes = try? FileSystem.read(state.firewallPath(name)),
              let table = NftTableContents.tableName(inMessages: bytes) else { return nil }
        return NftTableContents(messages: bytes, table: table)
    }

    /// Replaces the tunnel's table with `FirewallVerification.failClosedTable` in one transaction (and
    /// records it as the one enforced). When the kernel refuses that, a second block-all table
    /// (`fallbackTableName`, journaled first so teardown removes it) is made beside the tunnel's: a drop
    /// in any table is final. Returns the table in place, or nil, and what went wrong.
    public func failClosed(_ plan: TunnelPlan) -> (table: NftTable?, problems: [String]) {
        guard let planned = plan.firewall else { return (nil, ["the tunnel has no nftables table to close"]) }
        let name = plan.interfaceName
        let closed = FirewallVerification.failClosedTable(name: planned.name, comment: planned.comment)
        let socket: NftablesSocket
        do throws(EngineError) { socket = try nft() } catch { return (nil, [error.description]) }
        var problems: [String] = []
        recordEnforcedFirewall(closed, tunnel: name)
        do throws(NftablesError) {
            try socket.replace(closed)
            return (closed, [])
        } catch {
            problems.append("replacing table inet \(planned.name) with the block-all table: \(error)")
        }
        let fallback = FirewallVerification.failClosedTable(name: FirewallVerification.fallbackTableName(planned.name),
                                                            comment: planned.comment)
        do throws(SystemCallError) { try Journal.append(path: state.journalPath(name), ["nft inet \(fallback.name)"]) } catch {
            problems.append("journaling table inet \(fallback.name): \(error)")
            return (nil, problems)
        }
        recordEnforcedFirewall(fallback, tunnel: name)
        do throws(NftablesError) {
            try socket.replace(fallback)
            return (fallback, problems)
        } catch {
            problems.append("making the block-all table inet \(fallback.name): \(error)")
            return (nil, problems)
        }
    }
}
