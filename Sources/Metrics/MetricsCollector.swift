import Engine
import LinuxSystem

/// Which network namespaces' tunnels a collector serves.
public enum NamespaceSelection: Sendable, Equatable {
    /// The namespace the collector runs in.
    case current
    /// These namespaces, by their names under /run/netns (`ip netns add NAME`).
    case named([String])
    /// The collector's own namespace and every named namespace (/run/netns) that has a state directory
    /// (/run/tunnelgate/net-INODE), looked up again at every scrape.
    case all
}

/// Reads, at each scrape, what `tunnelgate status --json` reads: for every tunnel of each selected
/// namespace its state record (NAME.state), its last error (NAME.lasterror) and the kernel (the TUN's
/// link counters, the nftables table compared by content), through `Engine.reports`. Nothing is kept
/// between scrapes but the label of the collector's own namespace.
public final class MetricsCollector {
    public let selection: NamespaceSelection
    /// The `namespace` label of the collector's own namespace.
    public let currentLabel: String
    private let currentInode: UInt64

    public init(selection: NamespaceSelection) throws(SystemCallError) {
        self.selection = selection
        currentInode = try ProcessControl.networkNamespaceIdentity()
        currentLabel = NamespaceLabel.label(inode: currentInode)
    }

    /// Every selected namespace, each with its tunnels or why they could not be read.
    public func collect() -> [NamespaceSnapshot] {
        switch selection {
        case .current:
            return [snapshot(label: currentLabel, named: nil)]
        case .named(let names):
            return names.map { snapshot(label: $0, named: $0) }
        case .all:
            var out = [snapshot(label: currentLabel, named: nil)]
            var seen: Set<UInt64> = [currentInode]
            for name in NamedNetworkNamespaces.names() {
                guard let inode = NamedNetworkNamespaces.inode(name), seen.insert(inode).inserted,
                      FileSystem.exists("\(StateDirectory.root)/net-\(inode)") else { continue }
                out.append(snapshot(label: name, named: name))
            }
            return out
        }
    }

    private func snapshot(label: String, named name: String?) -> NamespaceSnapshot {
        let engine: Engine
        do {
            if let name {
                let namespace: NetworkNamespace
                do { namespace = try NetworkNamespace(named: name) } catch {
                    return NamespaceSnapshot(name: label, error: "no network namespace named \(name) (\(error))")
                }
                engine = try Engine(readOnly: true, namespace: namespace)
            } else {
                engine = try Engine(readOnly: true)
            }
        } catch {
            return NamespaceSnapshot(name: label, error: error.description)
        }
        let reports: [TunnelReport]
        do { reports = try engine.reports() } catch {
            return NamespaceSnapshot(name: label, error: error.description)
        }
        // The record's CLOCK_MONOTONIC times, as Unix time: the collector and the owners share the clock.
        let offset = ProcessControl.realtimeSeconds() - ProcessControl.monotonicSeconds()
        let tunnels = reports.map { report -> TunnelSnapshot in
            var snapshot = TunnelSnapshot(report: report)
            // Only the running owner's record: a dead owner's times describe a run that is over.
            if let pid = report.pid, !report.residue, let record = TunnelRecord.read(from: engine.state.statePath(report.name)),
               record.pid == pid {
                snapshot.startedAt = record.since + offset
                snapshot.lastReassertAt = record.lastReasserting.map { $0 + offset }
            }
            return snapshot
        }
        return NamespaceSnapshot(name: label, tunnels: tunnels)
    }
}

/// The `namespace` label: the namespace's name under /run/netns when it has one (the first, sorted,
/// when several names are bound to it), else `net-INODE`, the name of its state directory
/// (/run/tunnelgate/net-INODE), as for the initial namespace.
public enum NamespaceLabel {
    public static func label(inode: UInt64) -> String {
        NamedNetworkNamespaces.names().first { NamedNetworkNamespaces.inode($0) == inode } ?? "net-\(inode)"
    }
}
