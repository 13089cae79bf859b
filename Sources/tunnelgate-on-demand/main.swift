import LinuxSystem
import NetworkExtension
import Session

// The on-demand watcher (TunnelgateOnDemandWatcher), which links NetworkExtension and so Foundation:
// `tunnelgate on-demand [--clean]` becomes this program (execveat, same pid), and `tunnelgate down
// NAME` runs it with `--user-disconnected NAME` when a saved configuration has on-demand on for NAME.
// Kept apart so that tunnelgate itself, every tunnel's engine, links neither (docs/architecture.md).
// Its arguments are tunnelgate's; it is not a command of its own (not on PATH when installed).

func printError(_ text: String) {
    _ = try? FileDescriptor.standardError.writeAll(Array(LogFormat.current.line(text).utf8))
}

func run(_ arguments: [String]) throws -> Int32 {
    var arguments = arguments
    do throws(LogFormat.Unknown) { try LogFormat.take(from: &arguments) } catch {
        printError("Error: \(error.message)")
        return 64
    }
    switch arguments {
    case []:
        let signals = try TerminationSignals.block()  // before any thread starts
        let watcher = try TunnelgateOnDemandWatcher { line in printError("tunnelgate: \(line)") }
        return try watcher.run(signals: signals)
    case ["--clean"]:
        print(try TunnelgateOnDemandWatcher.clean() ?? "nothing to clean")
        return 0
    case let a where a.count == 2 && a[0] == "--user-disconnected":
        // `down NAME` is the user's disconnect: on-demand goes off for NAME's saved configuration, as
        // iOS turns Connect On Demand off when the user disconnects in Settings.
        let name = a[1]
        do {
            for configuration in try TunnelgateOnDemandWatcher.userDisconnected(name: name) {
                print("\(name): on demand turned off for \(configuration) (a user's disconnect, as on iOS)")
            }
        } catch {
            printError("tunnelgate: \(name): the saved configurations were not read: \(error)")
        }
        return 0
    default:
        printError("Error: tunnelgate-on-demand is run by tunnelgate (`tunnelgate on-demand [--clean]`), not by itself")
        return 64
    }
}

do {
    ProcessControl.exit(try run(Array(CommandLine.arguments.dropFirst())))
} catch {
    printError("Error: \(error)")
    ProcessControl.exit(1)
}
