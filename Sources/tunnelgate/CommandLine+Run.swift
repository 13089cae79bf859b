import Engine
import Session
import LinuxSystem
import TunnelgateSettings

let version = "0.1.0"

/// Exit codes: 0 success, 1 an operation failed, 64 a usage error (EX_USAGE).
enum ExitCode {
    static let success: Int32 = 0
    static let failure: Int32 = 1
    static let usage: Int32 = 64
}

struct UsageError: Error {
    let message: String
    let command: Command?
}

enum Command: String, CaseIterable {
    case validate, plan, up, exec, down, status, list, message, secret, metrics, onDemand = "on-demand", help

    var usage: String {
        switch self {
        case .validate: "tunnelgate validate CONFIG"
        case .plan: "tunnelgate plan CONFIG [--netns NS]"
        case .up: "tunnelgate up CONFIG [--netns NS] [--detach] [--restart POLICY]"
        case .exec: "tunnelgate exec CONFIG [--user USER] -- CMD [ARGS...]"
        case .down: "tunnelgate down NAME [--netns NS] [--keep-kill-switch]"
        case .status: "tunnelgate status [NAME] [--netns NS] [--json]  |  tunnelgate status NAME [--netns NS] --watch"
        case .list: "tunnelgate list [--json]"
        case .message: "tunnelgate message NAME DATA [--netns NS]"
        case .secret: "tunnelgate secret add NAME [--replace] < SECRET  |  tunnelgate secret remove NAME  |  tunnelgate secret list"
        case .metrics: "tunnelgate metrics [--listen ADDR:PORT] [--allow-non-loopback] [--netns NS]... [--all-namespaces]"
        case .onDemand: "tunnelgate on-demand [--clean]"
        case .help: "tunnelgate help [SUBCOMMAND]"
        }
    }

    var summary: String {
        switch self {
        case .validate: "Check a configuration; print every problem with its key path."
        case .plan: "Print the kernel changes `up` would make. Changes nothing."
        case .up: "Apply a configuration, verify it, and keep the tunnel up."
        case .exec: "Run one command in a namespace of its own behind the tunnel; remove everything when it ends."
        case .down: "Stop a tunnel and remove everything it created (also after a crash)."
        case .status: "Show tunnels of this network namespace: state, interface, routes, counters, the runtime's own status."
        case .list: "List the configured tunnels and the running tunnels of every network namespace."
        case .message: "Send DATA to the tunnel's runtime (app_message) and print its reply."
        case .secret: "Keep the secrets a provider's passwordReference and identityReference name (root only)."
        case .metrics: "Serve the tunnels' state and counters as Prometheus metrics over HTTP."
        case .onDemand: "Connect and disconnect the saved on-demand VPN configurations as their rules say, on network changes."
        case .help: "Show help for a subcommand."
        }
    }

    var help: String {
        var text = "OVERVIEW: \(summary)\n\nUSAGE: \(usage)\n"
        switch self {
        case .validate:
            text += "\nARGUMENTS:\n  CONFIG          A configuration: a path, or a NAME (see below).\n"
            text += "\nExits 0 when the configuration is valid and its host names resolve; otherwise\nprints one line per problem (`key.path: reason`) and exits 1.\n"
        case .plan:
            text += "\nARGUMENTS:\n  CONFIG          A configuration: a path, or a NAME (see `tunnelgate help up`).\n\nOPTIONS:\n  --netns NS      Plan isolate mode into NS (the forms of `tunnelgate help up`).\n"
            text += "\nPrints the TUN, link settings, addresses, routes (table T) and policy rules in\nip(8) words. Reads the kernel to choose a free table; changes nothing.\n"
        case .up:
            text += "\nARGUMENTS:\n  CONFIG          A configuration: a path, or a NAME (see below).\n\nOPTIONS:\n  --netns NS      Isolate mode: move the TUN into namespace NS and configure it\n                  there; NS can then reach nothing but the tunnel, while tunnelgate\n                  and its carrier sockets stay here. NS is a name under /run/netns\n                  (`ip netns add NS`), a path to a namespace file (/proc/PID/ns/net,\n                  /var/run/docker/netns/ID), pid:PID, docker:NAME or podman:NAME.\n                  The tunnel ends when NS goes (the process exits, the file or name\n                  is removed).\n  --detach        Return once the settings are applied and verified; the tunnel\n                  keeps running in the background until `tunnelgate down NAME`.\n  --restart POLICY\n                  What to do when the packet plane fails: never (the default),\n                  on-failure or on-failure:ATTEMPTS (start it again with the same\n                  TUN, at most ATTEMPTS times in a row, 5 by default). Overrides\n                  the configuration's restart.\n"
            text += "\nWithout --detach, runs until SIGINT, SIGTERM or `tunnelgate down NAME`, then\nremoves everything it created. Residue of a crashed run of the same name is\nremoved first. Under systemd (Type=notify) it sends READY=1 once the settings\nare applied and verified, STATUS= at every status change, STOPPING=1 when it\nstops, and WATCHDOG=1 from its event loop when WatchdogSec= is set.\n"
        case .down:
            text += "\nARGUMENTS:\n  NAME            The tunnel (its interface name, `name` in the configuration).\n\nOPTIONS:\n  --netns NS      The tunnel was started with `up --netns NS` (any of its forms\n                  naming the same namespace).\n  --keep-kill-switch\n                  When its process died: remove everything but its kill switch\n                  (includeAllNetworks), which stays until the next `up` of NAME\n                  or `down` without this. The units' ExecStopPost= uses it.\n"
            text += "\nAsks the running tunnel to stop and waits until it has; if its process died,\nremoves what its journal records. Exits 1 when there is no such tunnel.\n"
        case .status:
            text += "\nARGUMENTS:\n  NAME            Only this tunnel.\n\nOPTIONS:\n  --netns NS      The tunnels put into namespace NS with `up --netns NS` (any of its\n                  forms naming the same namespace).\n  --json          Machine-readable output.\n"
            text += "  --watch         Print every transition of NAME as a JSON line until it is disconnected.\n"
            text += "\nStates are NEVPNStatus names: disconnected, connecting, connected, reasserting,\ndisconnecting.\n"
        case .message:
            text += "\nARGUMENTS:\n  NAME            A running tunnel.\n  DATA            The message (its UTF-8 bytes).\n\nOPTIONS:\n  --netns NS      The tunnel was started with `up --netns NS`.\n"
            text += "\nThe equivalent of sendProviderMessage: DATA goes through the tunnel's control\nsocket to the runtime's app_message; its reply is printed.\n"
        case .list:
            text += "\nOPTIONS:\n  --json          Machine-readable output.\n"
            text += "\nConfigured: the names in /etc/tunnelgate (NAME.json, NAME.conf) and\n/etc/wireguard (NAME.conf), with the namespaces each runs in. Running: the\ntunnels of this namespace and of every named namespace (/run/netns) with\ntunnel state, also those put there with `up --netns NS`. Changes nothing.\n"
        case .exec:
            text += CommandLine.execHelpText
        case .secret:
            text += "\nARGUMENTS:\n  NAME            The secret's name: 1-64 letters, digits, '.', '_', '-'.\n\nOPTIONS:\n  --replace       add: replace a secret of that name (else it is an error).\n"
            text += "\nThe store is /etc/tunnelgate/secrets: a directory only root may enter, one file\nof mode 0600 per secret. add reads the secret from standard input (never an\nargument or the environment; a terminal is refused), at most 64 KB, and drops one\ntrailing newline. list prints the names, never a secret. A provider's\nconfiguration refers to one as TunnelgateSecretStore.reference(named: NAME); the\nengine reads it and hands it to the provider's packet plane, which cannot read\nthe store itself.\n"
        case .metrics:
            text += metricsHelpText
        case .onDemand:
            text += onDemandHelpText
        case .help:
            break
        }
        if self == .validate || self == .plan || self == .up || self == .exec { text += configurationNameHelp }
        text += "\nRun inside a network namespace with `ip netns exec NS tunnelgate …`.\n"
        return text
    }
}

/// How CONFIG is found, for validate, plan and up.
let configurationNameHelp = """

CONFIG is a path when it has a '/' or ends in .json or .conf. Otherwise it is a
NAME (an interface name) looked up, as wg-quick does, in
/etc/tunnelgate/NAME.json, /etc/tunnelgate/NAME.conf and /etc/wireguard/NAME.conf;
when more than one exists it is refused, naming them. `tunnelgate list` shows
the configured names.

"""

let overview = """
OVERVIEW: Apply NetworkExtension packet-tunnel settings on Linux.

USAGE: tunnelgate <subcommand>

OPTIONS:
  -h, --help      Show help information.
  --version       Show the version.
  --log-format F  Log lines on standard error as text (default), json (one object a line) or
                  journal (text with syslog priorities; chosen by itself under journald).

SUBCOMMANDS:
\(Command.allCases.map { "  " + $0.rawValue.padding(14) + $0.summary }.joined(separator: "\n"))

  See 'tunnelgate help <subcommand>' for detailed help.

"""

extension String {
    func padding(_ width: Int) -> String { count >= width ? self + " " : self + String(repeating: " ", count: width - count) }
}

func printError(_ text: String) {
    _ = try? FileDescriptor.standardError.writeAll(Array(LogFormat.current.line(text).utf8))
}

extension CommandLine {
    static func run(_ arguments: [String]) -> Int32 {
        var arguments = arguments
        do {
            do throws(LogFormat.Unknown) { try LogFormat.take(from: &arguments) } catch {
                throw UsageError(message: error.message, command: nil)
            }
            return try dispatch(arguments)
        } catch let error as UsageError where LogFormat.current == .json {
            let usage = error.command?.usage ?? "tunnelgate <subcommand>"
            _ = try? FileDescriptor.standardError.writeAll(Array(LogFormat.json.line("Error: \(error.message)", usage: usage).utf8))
            return ExitCode.usage
        } catch let error as UsageError {
            printError("Error: \(error.message)")
            printError("Usage: \(error.command?.usage ?? "tunnelgate <subcommand>")")
            printError("See 'tunnelgate \(error.command.map { "help \($0.rawValue)" } ?? "--help")'.")
            return ExitCode.usage
        } catch {
            printError("Error: \(error)")
            return ExitCode.failure
        }
    }

    static func dispatch(_ arguments: [String]) throws -> Int32 {
        guard let first = arguments.first else { throw UsageError(message: "missing subcommand", command: nil) }
        if first == "-h" || first == "--help" { print(overview, terminator: ""); return ExitCode.success }
        if first == "--version" { print(version); return ExitCode.success }
        // `exec`'s command, entering its namespace: started by `tunnelgate exec` only (not in the help).
        if first == "exec-enter" { return execEnter(Array(arguments.dropFirst())) }
        // The drop-in for wireguard-go (docs/wireguard.md): its own usage, not a configuration's.
        if first == "wireguard" {
            let rest = Array(arguments.dropFirst())
            if rest.contains("-h") || rest.contains("--help") { print("Usage: \(wireGuardUsage)"); return ExitCode.success }
            do { return try wireGuard(rest) } catch let error as WireGuardUsage {
                printError("Error: \(error.description)")
                return ExitCode.usage
            }
        }
        guard let command = Command(rawValue: first) else {
            throw UsageError(message: "unknown subcommand '\(first)'", command: nil)
        }
        var rest = Array(arguments.dropFirst())
        // exec's command has options of its own: only those before `--` are tunnelgate's.
        let own = command == .exec ? Array(rest.prefix(while: { $0 != "--" })) : rest
        if own.contains("-h") || own.contains("--help") {
            print(command.help, terminator: "")
            return ExitCode.success
        }
        switch command {
        case .help:
            guard let topic = rest.first else { print(overview, terminator: ""); return ExitCode.success }
            guard rest.count == 1, let sub = Command(rawValue: topic) else {
                throw UsageError(message: "unknown subcommand '\(topic)'", command: .help)
            }
            print(sub.help, terminator: "")
            return ExitCode.success
        case .validate:
            let config = try takePositional(&rest, "CONFIG", command)
            try noMore(rest, command)
            return try validate(try ConfigurationName.resolve(config, command: command))
        case .plan:
            let netns = try takeNamespace(&rest, command)
            let config = try takePositional(&rest, "CONFIG", command)
            try noMore(rest, command)
            return try plan(try ConfigurationName.resolve(config, command: command), netns: netns)
        case .up:
            let netns = try takeNamespace(&rest, command)
            let detach = takeFlag(&rest, "--detach")
            let restart = try takeOption(&rest, "--restart", command)
            let readyFD = try takeOption(&rest, "--ready-fd", command).map { value -> Int32 in
                guard let fd = Int32(value), fd > 2 else { throw UsageError(message: "--ready-fd takes a descriptor number", command: command) }
                return fd
            }
            let config = try takePositional(&rest, "CONFIG", command)
            try noMore(rest, command)
            return try up(try ConfigurationName.resolve(config, command: command), netns: netns, detach: detach, readyFD: readyFD, restart: restart)
        case .exec:
            var (own, cmd) = try splitExec(rest)
            let user = try takeOption(&own, "--user", command)
            let config = try takePositional(&own, "CONFIG", command)
            try noMore(own, command)
            return try exec(try ConfigurationName.resolve(config, command: command), user: user, command: cmd)
        case .down:
            let netns = try takeNamespace(&rest, command)
            let keep = takeFlag(&rest, "--keep-kill-switch")
            let name = try takePositional(&rest, "NAME", command)
            try noMore(rest, command)
            return try down(name, netns: netns, keepKillSwitch: keep)
        case .message:
            let netns = try takeNamespace(&rest, command)
            let name = try takePositional(&rest, "NAME", command)
            let data = try takePositional(&rest, "DATA", command)
            try noMore(rest, command)
            return try message(name, data, netns: netns)
        case .metrics:
            return try metrics(&rest)
        case .secret:
            return try secret(&rest)
        case .onDemand:
            let clean = takeFlag(&rest, "--clean")
            try noMore(rest, command)
            return try onDemand(clean: clean)
        case .list:
            let json = takeFlag(&rest, "--json")
            try noMore(rest, command)
            return try list(json: json)
        case .status:
            let netns = try takeNamespace(&rest, command)
            let json = takeFlag(&rest, "--json")
            let watch = takeFlag(&rest, "--watch")
            let name = rest.first.flatMap { $0.hasPrefix("-") ? nil : $0 }
            if name != nil { rest.removeFirst() }
            try noMore(rest, command)
            if watch {
                guard let name else { throw UsageError(message: "--watch needs a tunnel NAME", command: command) }
                if json { throw UsageError(message: "--watch prints JSON lines already; drop --json", command: command) }
                return try watchStatus(name, netns: netns)
            }
            return try status(name, netns: netns, json: json)
        }
    }

    static func takeFlag(_ args: inout [String], _ flag: String) -> Bool {
        guard let i = args.firstIndex(of: flag) else { return false }
        args.remove(at: i)
        return true
    }

    static func takeOption(_ args: inout [String], _ option: String, _ command: Command) throws -> String? {
        guard let i = args.firstIndex(of: option) else { return nil }
        guard i + 1 < args.count else { throw UsageError(message: "\(option) needs a value", command: command) }
        let value = args[i + 1]
        args.removeSubrange(i...(i + 1))
        return value
    }

    /// `--netns NS`: a name under /run/netns, a path to a namespace file, pid:PID, docker:NAME or
    /// podman:NAME (NamespaceReference).
    static func takeNamespace(_ args: inout [String], _ command: Command) throws -> NamespaceReference? {
        guard let text = try takeOption(&args, "--netns", command) else { return nil }
        do { return try NamespaceReference.parse(text) } catch {
            throw UsageError(message: error.description, command: command)
        }
    }

    /// `--netns NS` of metrics: a name under /run/netns (the namespaces it scrapes are named ones).
    static func takeNamespaceName(_ args: inout [String], _ command: Command) throws -> String? {
        guard let name = try takeOption(&args, "--netns", command) else { return nil }
        guard !name.isEmpty, !name.contains("/"), name != ".", name != ".." else {
            throw UsageError(message: "--netns takes the name of a namespace under /run/netns", command: command)
        }
        return name
    }

    static func takePositional(_ args: inout [String], _ name: String, _ command: Command) throws -> String {
        guard let i = args.firstIndex(where: { !$0.hasPrefix("-") || $0 == "-" }) else {
            if let option = args.first { throw UsageError(message: "unknown option '\(option)'", command: command) }
            throw UsageError(message: "missing \(name)", command: command)
        }
        return args.remove(at: i)
    }

    static func noMore(_ args: [String], _ command: Command) throws {
        guard let extra = args.first else { return }
        throw UsageError(message: extra.hasPrefix("-") ? "unknown option '\(extra)'" : "unexpected argument '\(extra)'", command: command)
    }
}
