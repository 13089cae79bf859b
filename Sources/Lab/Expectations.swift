import LinuxSystem
import Netlink
import TunnelgateSettings

/// Assertions, printed as TAP-like lines (`ok - [phase] NAME`, `not ok - …` with `#` detail lines)
/// and, inside `lab run`, appended to the run's results file ($TUNNELGATE_LAB_RESULTS).
public enum Expectations {
    public static func record(_ result: TestResult) {
        let phase = result.phase.isEmpty ? "" : "[\(result.phase)] "
        print("\(result.passed ? "ok" : "not ok") - \(phase)\(result.name)")
        if !result.detail.isEmpty, !result.passed || ProcessControl.environmentValue("TUNNELGATE_LAB_VERBOSE") != nil {
            for line in result.detail.split(separator: "\n", omittingEmptySubsequences: false) { print("#   \(line)") }
        }
        ProcessControl.flushStandardOutput()
        if let file = ProcessControl.environmentValue("TUNNELGATE_LAB_RESULTS"), !file.isEmpty {
            FileSystem.append(file, result.jsonLine + "\n")
        }
    }

    /// Whether `node` gets an echo reply from `address` (three requests, 0.2 s apart, 1 s each).
    public static func reaches(_ lab: Lab, node: String, address: IPAddress) throws -> (Bool, String) {
        let ns = try lab.namespace(of: node)
        let out = "\(lab.registry.directory(lab.state.id))/ping-\(ProcessControl.id).out"
        defer { FileSystem.remove(out) }
        let pid = try ns.perform { () throws -> Int32 in
            try ProcessControl.spawnProcess(["ping", "-n", "-c", "3", "-i", "0.2", "-W", "1", address.description],
                                            standardOutput: out, standardError: out)
        }
        let status = try ProcessControl.wait(for: pid)
        let text = String(decoding: ((try? FileSystem.read(out)) ?? nil) ?? [], as: UTF8.self)
        return (status == .exited(0), text.split(separator: "\n").suffix(3).joined(separator: "\n"))
    }

    /// The interface the node's kernel chooses for `address` (a UDP lookup from the node itself).
    public static func routeDevice(_ lab: Lab, node: String, address: IPAddress) throws -> (String?, String) {
        let nl = try lab.namespace(of: node).netlink()
        do {
            let answer = try nl.lookupRoute(to: address)
            let name = try answer.outputInterface.flatMap { try nl.link(index: $0)?.name }
            var words = "\(address) table \(answer.table) \(answer.kind)"
            if let g = answer.gateway { words += " via \(g)" }
            if let name { words += " dev \(name)" }
            return (name, words)
        } catch {
            return (nil, "route lookup: \(error)")
        }
    }
}

extension FileSystem {
    /// Appends `text` to a file (created 0644): one write(2) with O_APPEND, so that lines of
    /// processes appending at once do not interleave.
    public static func append(_ path: String, _ text: String) {
        guard let fd = try? FileDescriptor.open(path, [.writeOnly, .create, .append], mode: 0o644) else { return }
        defer { fd.close() }
        try? fd.writeAll(Array(text.utf8))
    }
}
