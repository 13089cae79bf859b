import LinuxSystem
import Nftables

/// What `.evaluateConnection` needs on Linux: to know that an app is about to connect to a host. iOS
/// knows it from its resolver; here the watcher sees the namespace's outgoing DNS queries. While a
/// configuration's rules decide `.evaluateConnection`, one nftables table of its own,
/// `inet tunnelgate-on-demand`, copies each unmarked packet to port 53 (UDP and TCP) to nfnetlink_log
/// group `group`, and this watch reads the copies (NetfilterLogSocket) and parses their QNAME
/// (LoggedDNSQuery). No packet is changed, delayed or dropped (the rule has no verdict; the chain's
/// policy is accept), nothing is spawned.
///
/// The table is journaled first: `on-demand.dns-watch` beside the preferences says which table
/// exists, so a watcher killed before it removed it has it removed by the next `tunnelgate on-demand`
/// in the namespace (`recover`) or `tunnelgate on-demand --clean` (the unit's ExecStopPost=).
final class TunnelgateOnDemandDNSWatch {
    static let table = "tunnelgate-on-demand"
    /// The nfnetlink_log group (per namespace): 7460, the base of Tunnelgate's tables and marks.
    static let group: UInt16 = 7460
    /// Bytes copied of each query: an IPv6 header, a TCP header with options and a longest name fit.
    static let snaplen: UInt32 = 512

    let socket: NetfilterLogSocket
    private let journal: String

    static func journalPath(directory: String) -> String { "\(directory)/on-demand.dns-watch" }

    /// The table, as `nft list table inet tunnelgate-on-demand` shows it. Pure.
    static var rules: NftTable {
        let log = NftStatement.log(group: group, snaplen: snaplen)
        let queries = [UInt8(17), 6].map { proto in
            NftRule([.mark(0), .transport(protocolNumber: proto, destinationPort: 53)], .next, statements: [log],
                    comment: "tunnelgate on-demand: DNS queries (\(proto == 17 ? "udp" : "tcp")) for evaluateConnection")
        }
        // Before every filter chain (priority 0) so a kill switch's drop does not hide a query.
        let chain = NftChain(name: "dns-queries", hook: .output, priority: -200, policy: .accept, rules: queries)
        return NftTable(name: table, comment: "tunnelgate on-demand: evaluateConnection's DNS watch (no packet changed)",
                        sets: [], chains: [chain])
    }

    /// Journals, binds the log group, then makes the table.
    init(directory: String) throws(SystemCallError) {
        journal = Self.journalPath(directory: directory)
        try FileSystem.writeAtomically(journal, Array("nft table inet \(Self.table)\n".utf8), mode: 0o600)
        do throws(NftablesError) {
            socket = try NetfilterLogSocket(group: Self.group, copyRange: Self.snaplen)
        } catch {
            FileSystem.remove(journal)
            throw SystemCallError(refusing: "the DNS watch: \(error)")
        }
        let nft: NftablesSocket
        do throws(SystemCallError) { nft = try NftablesSocket() } catch {
            FileSystem.remove(journal)
            throw error
        }
        do throws(NftablesError) { try nft.replace(Self.rules) } catch {
            Self.remove(journal: journal)
            throw SystemCallError(refusing: "the DNS watch: \(error)")
        }
    }

    /// Removes the table, then its journal.
    func close() { Self.remove(journal: journal) }

    /// A table a crashed watcher left (its journal exists): removed, with the journal. Says what it did,
    /// nil when there was nothing.
    static func recover(directory: String) -> String? {
        let path = journalPath(directory: directory)
        guard FileSystem.exists(path) else { return nil }
        return remove(journal: path)
    }

    @discardableResult
    private static func remove(journal: String) -> String? {
        let nft: NftablesSocket
        do throws(SystemCallError) { nft = try NftablesSocket() } catch {
            return "the DNS watch's table inet \(table) was not removed: \(error); the journal \(journal) stays"
        }
        do throws(NftablesError) { try nft.delete(table: table) } catch {
            return "the DNS watch's table inet \(table) was not removed: \(error); the journal \(journal) stays"
        }
        FileSystem.remove(journal)
        return "removed the DNS watch's table inet \(table) (journal \(journal))"
    }

    /// The names of the queries copied since the last call (at most 256 packets).
    func names() -> [String] { socket.receive().compactMap(LoggedDNSQuery.name(inPacket:)) }
}
