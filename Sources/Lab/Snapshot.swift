import LinuxSystem
import Netlink
import Nftables
import TunnelgateSettings

/// The state of a network namespace a tunnel may change, as text in sections, for `lab diff`:
/// policy rules, routes of every table, addresses, links, the nftables ruleset, the resolv.conf its
/// processes read, and its net.* sysctls. Volatile fields (counters, timestamps, handles) are left out.
public struct Snapshot: Sendable, Equatable {
    public var title: String
    public var sections: [(name: String, lines: [String])]

    public static func == (a: Snapshot, b: Snapshot) -> Bool {
        a.sections.map(\.name) == b.sections.map(\.name) && a.sections.map(\.lines) == b.sections.map(\.lines)
    }

    /// Sysctls that count or change on their own. The TCP Fast Open key is made by the kernel the
    /// first time a socket of the namespace uses Fast Open (a resolver's TCP query does), so it is
    /// zero before and random after without anyone configuring anything.
    static let volatileSysctls: Set<String> = ["net.netfilter.nf_conntrack_count", "net.ipv4.route.flush", "net.ipv6.route.flush",
                                               "net.ipv6.conf.all.stable_secret", "net.ipv6.conf.default.stable_secret",
                                               "net.ipv4.tcp_fastopen_key"]

    /// Takes a snapshot of the calling thread's namespace; `namespaceName` names its /etc/netns
    /// directory (nil: the host's resolv.conf).
    public static func take(title: String, namespaceName: String?) throws -> Snapshot {
        var sections: [(String, [String])] = []
        do {
            let nl = try NetlinkSocket()
            sections.append(("rules ipv4", try nl.ruleListing(family: .ipv4)))
            sections.append(("rules ipv6", try nl.ruleListing(family: .ipv6)))
            sections.append(("routes ipv4", try nl.routeListing(family: .ipv4)))
            sections.append(("routes ipv6", try nl.routeListing(family: .ipv6)))
            sections.append(("addresses", try nl.addressListing()))
            sections.append(("links", try nl.linkListing()))
            let nft = try NftablesProgramSocket()
            // The lab's own leak sets fill with traffic: their elements are not the node's configuration.
            sections.append(("nftables", try nft.rulesetListing().filter { !$0.hasPrefix("element \(LeakWatch.table) ") }))
        } catch {
            throw LabError("snapshot: \(error)")
        }
        var resolv = "/etc/resolv.conf"
        if let namespaceName, FileSystem.exists("/etc/netns/\(namespaceName)/resolv.conf") { resolv = "/etc/netns/\(namespaceName)/resolv.conf" }
        let text = ((try? FileSystem.read(resolv)) ?? nil).map { String(decoding: $0, as: UTF8.self) } ?? ""
        sections.append(("resolv.conf (\(resolv))", text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init).filter { !$0.isEmpty }))
        sections.append(("sysctl", sysctls(under: "/proc/sys/net", key: "net")))
        return Snapshot(title: title, sections: sections)
    }

    static func sysctls(under path: String, key: String) -> [String] {
        var out: [String] = []
        for name in FileSystem.list(path).sorted() {
            let p = "\(path)/\(name)", k = "\(key).\(name)"
            if FileSystem.isDirectory(p) {
                out += sysctls(under: p, key: k)
            } else if !volatileSysctls.contains(k), let bytes = try? FileSystem.read(p) {
                let v = String(decoding: bytes, as: UTF8.self).trimmingCharacters(in: "\n").replacing("\t", with: " ")
                out.append("\(k) = \(v)")
            }
        }
        return out
    }

    public var text: String {
        var s = "# tunnelgate-lab snapshot: \(title)\n"
        for (name, lines) in sections {
            s += "### \(name)\n"
            for l in lines { s += l + "\n" }
        }
        return s
    }

    public static func parse(_ text: String) -> Snapshot {
        var title = ""
        var sections: [(name: String, lines: [String])] = []
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("# tunnelgate-lab snapshot: ") { title = String(line.dropFirst(27)); continue }
            if line.hasPrefix("### ") { sections.append((String(line.dropFirst(4)), [])); continue }
            if line.isEmpty && sections.isEmpty { continue }
            if sections.isEmpty { sections.append(("", [])) }
            if !line.isEmpty { sections[sections.count - 1].lines.append(String(line)) }
        }
        return Snapshot(title: title, sections: sections)
    }

    /// The differences, section by section: `-` lines only in `self`, `+` lines only in `other`.
    public func difference(to other: Snapshot) -> [String] {
        var out: [String] = []
        let names = sections.map(\.name) + other.sections.map(\.name).filter { n in !sections.contains { $0.name == n } }
        for name in names {
            let a = sections.first { $0.name == name }?.lines ?? []
            let b = other.sections.first { $0.name == name }?.lines ?? []
            var countsB: [String: Int] = [:]
            for l in b { countsB[l, default: 0] += 1 }
            var countsA: [String: Int] = [:]
            for l in a { countsA[l, default: 0] += 1 }
            var removed: [String] = [], added: [String] = []
            var seenA: [String: Int] = [:]
            for l in a {
                seenA[l, default: 0] += 1
                if seenA[l]! > countsB[l, default: 0] { removed.append(l) }
            }
            var seenB: [String: Int] = [:]
            for l in b {
                seenB[l, default: 0] += 1
                if seenB[l]! > countsA[l, default: 0] { added.append(l) }
            }
            if removed.isEmpty && added.isEmpty { continue }
            out.append("### \(name)")
            out += removed.map { "-" + $0 } + added.map { "+" + $0 }
        }
        return out
    }
}

extension String {
    func trimmingCharacters(in set: Character) -> String {
        var s = Substring(self)
        while s.last == set { s.removeLast() }
        while s.first == set { s.removeFirst() }
        return String(s)
    }
}
