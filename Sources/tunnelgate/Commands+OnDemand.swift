import LinuxSystem
import NetworkExtension
import Session

/// on-demand: the system's part of Connect On Demand for the saved configurations of this namespace
/// (TunnelgateOnDemandWatcher), until SIGTERM or SIGINT.
let onDemandHelpText = """

Watches this network namespace (links, addresses, routes: rtnetlink) and the saved
VPN configurations (preferences.json of the namespace's state directory, or
TUNNELGATE_PREFERENCES). Each configuration that is enabled and has
isOnDemandEnabled is judged by its onDemandRules against the primary link (the
main table's default route: wired, wireless, cellular or other; the DNS search
domains and servers of the network's resolver) whenever they change, and at
least every 2 s: Connect starts its provider (as startVPNTunnel does),
Disconnect stops it, Ignore and no match change nothing. evaluateConnection, an
ssidMatch and a probeURL are not acted on (never match) on Linux yet.
`tunnelgate down NAME` is the user's disconnect: it turns on-demand off for that
configuration, as iOS does. Runs until SIGTERM or SIGINT; the tunnels it started
keep running. One per namespace: a second is refused. Needs root.

"""

extension CommandLine {
    static func onDemand() throws -> Int32 {
        let signals = try TerminationSignals.block()  // before any thread starts
        let watcher = try TunnelgateOnDemandWatcher { line in printError("tunnelgate: \(line)") }
        return try watcher.run(signals: signals)
    }

    /// `down NAME` is the user's disconnect: on-demand goes off for NAME's saved configuration, as iOS
    /// turns Connect On Demand off when the user disconnects in Settings. A preferences file that cannot
    /// be read is said and changes nothing else.
    static func userDisconnected(_ name: String) {
        do {
            for configuration in try TunnelgateOnDemandWatcher.userDisconnected(name: name) {
                print("\(name): on demand turned off for \(configuration) (a user's disconnect, as on iOS)")
            }
        } catch {
            printError("tunnelgate: \(name): the saved configurations were not read: \(error)")
        }
    }
}
