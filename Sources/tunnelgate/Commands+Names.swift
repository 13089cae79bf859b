import Engine
import LinuxSystem
import TunnelgateSettings

/// `tunnelgate up NAME`: where a configuration's name is looked up, as wg-quick looks up its own.
enum ConfigurationName {
    /// The places NAME is looked for, in this order: /etc/tunnelgate/NAME.json, /etc/tunnelgate/NAME.conf,
    /// /etc/wireguard/NAME.conf.
    static let places: [(directory: String, suffix: String)] = [
        ("/etc/tunnelgate", ".json"), ("/etc/tunnelgate", ".conf"), ("/etc/wireguard", ".conf"),
    ]

    /// An argument is a path when it has a '/' or ends in .json or .conf; anything else is a name.
    static func isPath(_ argument: String) -> Bool {
        argument.contains("/") || argument.hasSuffix(".json") || argument.hasSuffix(".conf")
    }

    /// The files NAME could be, in the order they are looked for.
    static func candidates(_ name: String, places: [(directory: String, suffix: String)] = places) -> [String] {
        places.map { "\($0.directory)/\(name)\($0.suffix)" }
    }

    /// CONFIG as given (a path), or the one file the name NAME finds. Refused in one line when NAME is
    /// not an interface-style name, when no file has it, or when more than one does (never a guess).
    static func resolve(_ argument: String, places: [(directory: String, suffix: String)] = places,
                        command: Command) throws -> String {
        if isPath(argument) { return argument }
        if let problem = InterfaceName.problem(argument) {
            throw UsageError(message: "CONFIG '\(argument)' is neither a path (no '/', no .json or .conf) nor a tunnel name: \(problem)",
                             command: command)
        }
        let looked = candidates(argument, places: places)
        let found = looked.filter { FileSystem.exists($0) }
        if found.count > 1 {
            throw Failure("the name \(argument) is configured twice: \(found.joined(separator: " and ")); "
                          + "remove one or give the file's path")
        }
        if let one = found.first { return one }
        let here = FileSystem.exists(argument) ? "; to use the file in this directory, give ./\(argument)" : ""
        throw Failure("no configuration named \(argument): looked for \(looked.joined(separator: ", "))\(here)")
    }

    /// Every configured name (files NAME.json / NAME.conf in the places), with the files that have it.
    static func configured(places: [(directory: String, suffix: String)] = places) -> [(name: String, files: [String])] {
        var out: [(name: String, files: [String])] = []
        for place in places {
            for entry in FileSystem.list(place.directory).sorted() where entry.hasSuffix(place.suffix) {
                let name = String(entry.dropLast(place.suffix.count))
                guard InterfaceName.problem(name) == nil else { continue }
                let file = "\(place.directory)/\(entry)"
                if let i = out.firstIndex(where: { $0.name == name }) { out[i].files.append(file) }
                else { out.append((name, [file])) }
            }
        }
        return out.sorted { $0.name < $1.name }
    }
}

/// One line of `tunnelgate list --json`: a configured tunnel and where it runs.
struct ListedConfiguration: Encodable {
    var name: String
    /// The files that configure it (more than one: `up NAME` refuses it).
    var files: [String]
    /// The namespaces it runs in ("" for this one).
    var runningIn: [String]
}

/// A running tunnel (one with state) of some namespace.
struct ListedTunnel: Encodable {
    var name: String
    /// nil: this namespace; else the name under /run/netns.
    var namespace: String?
    var status: TunnelStatus
    var pid: Int32?
    var residue: Bool
    var configured: Bool
}

extension CommandLine {
    /// `tunnelgate list`: the configured tunnels and the tunnels of this namespace and of every named
    /// namespace with a state directory (as `metrics --all-namespaces` finds them).
    static func list(json: Bool) throws -> Int32 {
        let configured = ConfigurationName.configured()
        var running: [ListedTunnel] = []
        var problems: [String] = []
        func add(_ reports: [TunnelReport], namespace: String?) {
            for r in reports {
                running.append(ListedTunnel(name: r.name, namespace: namespace, status: r.status, pid: r.pid,
                                            residue: r.residue, configured: configured.contains { $0.name == r.name }))
            }
        }
        do { add(try Engine(readOnly: true).reports(), namespace: nil) } catch { problems.append("this namespace: \(error)") }
        var seen: Set<UInt64> = []
        if let here = try? ProcessControl.networkNamespaceIdentity() { seen.insert(here) }
        for ns in NamedNetworkNamespaces.names() {
            guard let inode = NamedNetworkNamespaces.inode(ns), seen.insert(inode).inserted,
                  FileSystem.exists("\(StateDirectory.root)/net-\(inode)") else { continue }
            do {
                add(try Engine(readOnly: true, namespace: try NetworkNamespace(named: ns)).reports(), namespace: ns)
            } catch {
                problems.append("namespace \(ns): \(error)")
            }
        }
        let listed = configured.map { c in
            ListedConfiguration(name: c.name, files: c.files,
                                runningIn: running.filter { $0.name == c.name && !$0.residue }.map { $0.namespace ?? "" })
        }
        for p in problems { printError("tunnelgate: list: \(p)") }
        if json {
            struct Listing: Encodable { var configured: [ListedConfiguration]; var running: [ListedTunnel] }
            print(try JSONCoding.encodeValue(Listing(configured: listed, running: running)).prettyPrintedSorted())
            return ExitCode.success
        }
        func place(_ ns: String?) -> String { ns.map { "namespace \($0)" } ?? "this namespace" }
        print("configured (\(ConfigurationName.places.map { "\($0.directory)/NAME\($0.suffix)" }.joined(separator: ", "))):")
        if listed.isEmpty { print("  none") }
        for c in listed {
            let where_ = c.runningIn.isEmpty ? "not running"
                : "running in " + c.runningIn.map { $0.isEmpty ? "this namespace" : "namespace \($0)" }.joined(separator: ", ")
            let files = c.files.count > 1 ? "\(c.files.joined(separator: " and ")) (configured twice: `up \(c.name)` refuses it)" : c.files[0]
            print("  \(c.name.padding(15)) \(files); \(where_)")
        }
        print("running:")
        if running.isEmpty { print("  none") }
        for t in running {
            let state = t.residue ? "residue of a run that did not stop cleanly" : t.status.rawValue + (t.pid.map { " (pid \($0))" } ?? "")
            print("  \(t.name.padding(15)) \(place(t.namespace)): \(state)\(t.configured ? "" : "; not a configured name")")
        }
        return problems.isEmpty ? ExitCode.success : ExitCode.failure
    }
}
