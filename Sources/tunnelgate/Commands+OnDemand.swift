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
Disconnect stops it, Ignore and no match change nothing. A probeURL is fetched
on the primary link, outside any tunnel (200 OK matches). While a rule decides
evaluateConnection, the namespace's DNS queries are watched (an nftables table,
inet tunnelgate-on-demand, copying them to nfnetlink_log; no packet changed) and
a lookup of a name a connection rule with connectIfNeeded holds starts the
tunnel when the name does not resolve on the network (or its probe fails).
An ssidMatch never matches (the SSID is not read).
`tunnelgate down NAME` is the user's disconnect: it turns on-demand off for that
configuration, as iOS does. Runs until SIGTERM or SIGINT; the tunnels it started
keep running. One per namespace: a second is refused. Needs root.

--clean removes what a watcher that did not stop left (the DNS watch's table,
by its journal) and exits; refused while a watcher runs.

"""

extension CommandLine {
    static func onDemand() throws -> Int32 {
        let signals = try TerminationSignals.block()  // before any thread starts
        let watcher = try TunnelgateOnDemandWatcher { line in printError("tunnelgate: \(line)") }
        return try watcher.run(signals: signals)
    }

    /// on-demand --clean: a dead watcher's DNS watch removed.
    static func onDemandClean() throws -> Int32 {
        print(try TunnelgateOnDemandWatcher.clean() ?? "nothing to clean")
        return 0
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
