import FoundationEssentials
import LinuxSystem

/// The runs on this host: one directory each under /run/tunnelgate-lab.
public struct RunRegistry: Sendable {
    public static let defaultRoot = "/run/tunnelgate-lab"
    /// Every lab namespace is named `tgl-RUN-NODE`.
    public static let namespacePrefix = "tgl-"

    public let root: String

    public init(root: String = RunRegistry.defaultRoot) { self.root = root }

    public func directory(_ id: String) -> String { "\(root)/\(id)" }
    public func statePath(_ id: String) -> String { "\(directory(id))/run.json" }
    public func topologyPath(_ id: String) -> String { "\(directory(id))/topology.json" }

    public static func namespaceName(run: String, node: String) -> String { "\(namespacePrefix)\(run)-\(node)" }

    /// A run id: 1 to 16 lower-case letters or digits (no '-': it ends the id in `tgl-RUN-NODE`).
    public static func idProblem(_ id: String) -> String? {
        let ok = !id.isEmpty && id.count <= 16
            && id.unicodeScalars.allSatisfy { ("a"..."z").contains($0) || ("0"..."9").contains($0) }
        return ok ? nil : "a run id is 1 to 16 lower-case letters and digits, not \(JSONValueQuote.quote(id))"
    }

    /// A fresh id: six random hex digits.
    public static func newID() -> String {
        var g = SystemRandomNumberGenerator()
        let n = UInt32.random(in: 0...0xFFFFFF, using: &g)
        let hex = String(n, radix: 16)
        return String(repeating: "0", count: 6 - hex.count) + hex
    }

    public func ids() -> [String] {
        FileSystem.list(root).filter { FileSystem.isDirectory(directory($0)) }.sorted()
    }

    public func load(_ id: String) throws(LabError) -> RunState {
        let bytes: [UInt8]?
        do { bytes = try FileSystem.read(statePath(id)) } catch { throw LabError("cannot read \(statePath(id)): \(error)") }
        guard let bytes else { throw LabError("no lab run \(JSONValueQuote.quote(id)) (no \(statePath(id)))") }
        do {
            return try JSONDecoder().decode(RunState.self, from: Data(bytes))
        } catch {
            throw LabError("\(statePath(id)) is not a lab run's state: \(error)")
        }
    }

    public func save(_ state: RunState) throws(LabError) {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        do {
            let data = try encoder.encode(state)
            try FileSystem.writeAtomically(statePath(state.id), Array(data), mode: 0o644)
        } catch let e as SystemCallError {
            throw LabError("cannot write \(statePath(state.id)): \(e)")
        } catch {
            throw LabError("cannot encode the run's state: \(error)")
        }
    }

    /// The run a command acts on: the one named, else $TUNNELGATE_LAB_RUN, else the only run there is.
    public func resolve(_ named: String?) throws(LabError) -> String {
        if let named { return named }
        if let env = ProcessControl.environmentValue("TUNNELGATE_LAB_RUN"), !env.isEmpty { return env }
        let all = ids()
        if all.count == 1 { return all[0] }
        if all.isEmpty { throw LabError("no lab run is up (start one with `tunnelgate-lab up TOPOLOGY`)") }
        throw LabError("\(all.count) lab runs are up (\(all.joined(separator: ", "))): name one with --run RUN or TUNNELGATE_LAB_RUN")
    }
}

/// A failure of a lab command: one clear line.
public struct LabError: Error, Sendable, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

enum JSONValueQuote {
    static func quote(_ s: String) -> String { "\"" + s.replacing("\"", with: "\\\"") + "\"" }
}
