import Lab
import LinuxSystem
import Netlink
import TunnelgateSettings

enum LabCommandLine {
    static func run(_ arguments: [String]) -> Int32 {
        var args = arguments
        // --run RUN may stand anywhere before a `--`.
        var runID: String?
        if let i = args.prefix(while: { $0 != "--" }).firstIndex(of: "--run") {
            guard i + 1 < args.count, args[i + 1] != "--" else { return usage(UsageError(message: "--run needs a run id", command: nil)) }
            runID = args[i + 1]
            args.removeSubrange(i...(i + 1))
        }
        guard let first = args.first else { return usage(UsageError(message: "no subcommand given", command: nil)) }
        if first == "-h" || first == "--help" { print(overview, terminator: ""); return ExitCode.success }
        if first == "--version" { print("tunnelgate-lab \(version)"); return ExitCode.success }
        if first == "help" {
            if args.count == 1 { print(overview, terminator: ""); return ExitCode.success }
            guard let c = LabCommand(rawValue: args[1]) else { return usage(UsageError(message: "unknown subcommand \(JSONValue.quoted(args[1]))", command: nil)) }
            print(c.help, terminator: "")
            return ExitCode.success
        }
        guard let command = LabCommand(rawValue: first) else {
            return usage(UsageError(message: "unknown subcommand \(JSONValue.quoted(first))", command: nil))
        }
        let rest = Array(args.dropFirst())
        if command != .exec, command != .run, rest.prefix(while: { $0 != "--" }).contains(where: { $0 == "-h" || $0 == "--help" }) {
            print(command.help, terminator: "")
            return ExitCode.success
        }
        do {
            return try Commands(runID: runID).dispatch(command, rest)
        } catch let e as UsageError {
            return usage(e)
        } catch let e as ConfigurationError {
            ProcessControl.writeStandardError(e.problems.map { "tunnelgate-lab: \($0)\n" }.joined())
            return ExitCode.failure
        } catch {
            ProcessControl.writeStandardError("tunnelgate-lab: \(error)\n")
            return ExitCode.failure
        }
    }

    static func usage(_ e: UsageError) -> Int32 {
        ProcessControl.writeStandardError("Error: \(e.message)\nUsage: \(e.command?.usage ?? "tunnelgate-lab <subcommand> (see --help)")\n")
        return ExitCode.usage
    }
}

/// Options and positional arguments of one subcommand.
struct Arguments {
    var positional: [String] = []
    var options: [String: [String]] = [:]
    var flags: Set<String> = []

    init(_ args: [String], command: LabCommand, valued: Set<String>, flags known: Set<String> = []) throws {
        var i = 0
        while i < args.count {
            let a = args[i]
            if valued.contains(a) {
                guard i + 1 < args.count else { throw UsageError(message: "\(a) needs a value", command: command) }
                options[a, default: []].append(args[i + 1])
                i += 2
                continue
            }
            if known.contains(a) { flags.insert(a); i += 1; continue }
            if a.hasPrefix("--") || (a.hasPrefix("-") && a.count > 1 && Double(a) == nil) {
                throw UsageError(message: "unknown option \(a)", command: command)
            }
            positional.append(a)
            i += 1
        }
    }

    func one(_ name: String) -> String? { options[name]?.last }

    func expect(_ count: ClosedRange<Int>, _ command: LabCommand) throws {
        if positional.count < count.lowerBound { throw UsageError(message: "missing arguments", command: command) }
        if positional.count > count.upperBound {
            throw UsageError(message: "unexpected argument \(JSONValue.quoted(positional[count.upperBound]))", command: command)
        }
    }
}
