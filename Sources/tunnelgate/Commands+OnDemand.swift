import Engine
import LinuxSystem
import Session
import TunnelgateSettings

/// on-demand: the system's part of Connect On Demand for the saved configurations of this namespace
/// (TunnelgateOnDemandWatcher), until SIGTERM or SIGINT. The watcher links NetworkExtension and so
/// Foundation; it is its own program, tunnelgate-on-demand (installed beside the packet plane), which
/// this process becomes, so that tunnelgate, every tunnel's engine, links neither.
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
    static let onDemandExecutableName = "tunnelgate-on-demand"

    /// on-demand [--clean]: this process becomes tunnelgate-on-demand (same pid, environment,
    /// standard streams and namespace), found and trusted as the packet plane is (CompanionExecutable).
    static func onDemand(clean: Bool) throws -> Int32 {
        let executable = try CompanionExecutable.open(onDemandExecutableName, role: "the on-demand watcher's executable")
        let error = ProcessControl.execute(executable, [onDemandExecutableName] + (clean ? ["--clean"] : []))
        executable.close()
        throw Failure("starting the on-demand watcher: \(error)")
    }

    /// `down NAME` is the user's disconnect: on-demand goes off for NAME's saved configuration, as iOS
    /// turns Connect On Demand off when the user disconnects in Settings. Only when a saved
    /// configuration has on-demand on for NAME (or the file cannot be read here) is tunnelgate-on-demand
    /// run to change it (through NetworkExtension's preferences store, the one writer of that file); a
    /// problem is said and changes nothing else.
    static func userDisconnected(_ name: String) {
        guard savedOnDemand(for: name) else { return }
        do {
            let executable = try CompanionExecutable.open(onDemandExecutableName, role: "the on-demand watcher's executable")
            defer { executable.close() }
            let ended = try ProcessControl.run(executable, [onDemandExecutableName, "--user-disconnected", name])
            if ended != .exited(0) { printError("tunnelgate: \(name): turning on demand off ended with \(ended)") }
        } catch {
            printError("tunnelgate: \(name): on demand was not turned off: \(error)")
        }
    }

    /// Whether the preferences file (TUNNELGATE_PREFERENCES, or preferences.json in this namespace's
    /// state directory) may hold a configuration with isOnDemandEnabled for interface NAME: true too
    /// when it exists but cannot be read as JSON here, so that the watcher's reader says why.
    static func savedOnDemand(for name: String) -> Bool {
        let path: String
        if let p = ProcessControl.environmentValue("TUNNELGATE_PREFERENCES"), !p.isEmpty { path = p } else {
            guard let state = try? StateDirectory(create: false) else { return false }
            path = state.path + "/preferences.json"
        }
        let bytes: [UInt8]?
        do throws(SystemCallError) { bytes = try FileSystem.read(path) } catch { return true }
        guard let bytes else { return false }
        guard let top = try? JSONParser.parse(bytes), case .array(let managers)? = top.member("managers") else { return true }
        return managers.contains { manager in
            guard case .bool(true)? = manager.member("isOnDemandEnabled") else { return false }
            if case .string(let interface)? = manager.member("protocol")?.member("interfaceName") { return interface == name }
            return name == "tg0"  // the protocol's default interface name
        }
    }
}
