import DNSConfig
import Engine
import Foundation
import LinuxSystem
import Netlink
import Session
import TunnelgateSettings

/// The system's part of Connect On Demand, as iOS plays it for a saved, enabled configuration whose
/// `isOnDemandEnabled` is true: whenever the primary network changes (a link, an address or a route
/// of this namespace: rtnetlink's RTNLGRP_LINK, IPV4/IPV6_IFADDR and IPV4/IPV6_ROUTE groups, through
/// the Netlink module's monitoring socket, as the engine's carrier-path check listens), when the
/// preferences are saved, and every `recheckSeconds` (a resolver changed without a link change), each
/// such manager's `onDemandRules` are evaluated against the primary link (`TunnelgateOnDemand`), and:
///
/// - `.connect`: the tunnel is started (`startVPNTunnel()`) unless it is connecting, connected or
///   reasserting; not more often than once per `restartSeconds` (a provider that keeps failing).
/// - `.disconnect`: the tunnel is stopped (`stopVPNTunnel()`) unless it is disconnected.
/// - `.ignore`, no rule matching: nothing changes.
/// - `.evaluateConnection`: nothing (Linux tells nobody of a connection about to open); said once.
///
/// The primary link is the one the main table's default route leaves by (IPv4 first, then IPv6), up
/// and with carrier; without one there is no network and nothing is decided. Its type: wireless when
/// `/sys/class/net/IF/wireless` or `phy80211` exists, cellular when its uevent says `DEVTYPE=wwan`,
/// wired for other Ethernet-like links (ARPHRD_ETHER: physical, veth, macvlan, ipvlan), other for the
/// rest (a bridge, a bond, a VLAN, a tunnel). The SSID is not read (Linux exposes it through nl80211
/// or the supplicant; this kernel has no wireless stack to test against): an `ssidMatch` rule never
/// matches. DNS search domains and servers: the resolver the network gives
/// (`DNSConfigurator.underlyingResolvConf`, beneath any tunnel's DNS). A `probeURL` is fetched on the
/// primary link, outside any tunnel (TunnelgateOnDemandProbe), when a change is judged and again at
/// most every `reprobeSeconds`; 200 OK matches.
///
/// A user's disconnect (`tunnelgate down NAME`, the Settings switch's part) turns on-demand off for
/// the configuration (`userDisconnected`), as iOS does; an app's `stopVPNTunnel()` does not, so a
/// Connect rule starts the tunnel again at the next change, as on iOS.
public final class TunnelgateOnDemandWatcher {
    public static let recheckSeconds = 2.0
    public static let restartSeconds = 5.0
    /// Changes arriving within this time are judged together.
    public static let debounceSeconds = 0.1
    /// A probe URL's answer is kept this long for the periodic judgments; a change of the network
    /// fetches it again at once.
    public static let reprobeSeconds = 10.0

    private let log: (String) -> Void
    /// The managers as saved, kept across evaluations (their connections track the hosts they spawn).
    private var managers: [String: NETunnelProviderManager] = [:]
    private var lastSaid: [String: String] = [:]
    private var lastStart: [String: Double] = [:]
    /// The configurations whose rules decide `.evaluateConnection` now: their connection rules and the
    /// link they were judged on. While there is one, the DNS watch is armed.
    private var evaluating: [String: (manager: NETunnelProviderManager, name: String, rules: [NEEvaluateConnectionRule],
                                      link: String, network: TunnelgateOnDemand.Network)] = [:]
    private var dnsWatch: TunnelgateOnDemandDNSWatch?
    private var watchDirectory = ""
    /// When a query's name was last acted on, per configuration (an app asks A and AAAA, and retries).
    private var lastQuery: [String: Double] = [:]
    public static let querySeconds = 5.0
    /// At most this many names are resolved per wake-up (each may take up to the probe's 3 s); the
    /// rest of a burst waits for the app's retry.
    public static let resolutionsPerWake = 4
    /// Probe answers by link and URL, with when they were fetched (monotonic seconds).
    private var probes: [String: (outcome: TunnelgateOnDemandProbe.Outcome, at: Double)] = [:]
    private let routes: NetlinkSocket

    public init(log: @escaping (String) -> Void) throws(SystemCallError) {
        self.log = log
        routes = try NetlinkSocket()
    }

    // MARK: The loop

    /// Watches until a termination signal arrives on `signals` (TerminationSignals.block()).
    public func run(signals: FileDescriptor) throws(SystemCallError) -> Int32 {
        // Links, addresses, routes (and rules: a tunnel's own come and go; judged the same, harmlessly).
        let events = try NetlinkSocket(monitoring: NetlinkSocket.linkAddressRuleAndRouteGroups)
        let preferencesDirectory = try Self.preferencesDirectory()
        // One watcher per namespace: two would each start the same tunnels.
        let lockPath = Self.lockPath(in: preferencesDirectory)
        guard let lock = try FileLock.tryAcquire(lockPath) else {
            throw SystemCallError(refusing: "another `tunnelgate on-demand` watches this namespace's configurations (it holds \(lockPath))")
        }
        defer { lock.releaseAndRemove() }
        watchDirectory = preferencesDirectory
        if let said = TunnelgateOnDemandDNSWatch.recover(directory: preferencesDirectory) {
            log("on demand: \(said), left by a watcher that did not stop")
        }
        defer { disarmDNSWatch() }
        let saves = try DirectoryChanges(watching: preferencesDirectory)
        defer { saves.close() }
        log("on demand: watching the network of this namespace and \(preferencesDirectory)")
        // While the host sleeps nothing is judged (iOS does not start VPNs in its sleep): a tunnel that
        // disconnectOnSleep stopped is started again after the wake, not on its way down.
        var sleep: SleepWatch?
        do throws(SleepWatch.Unavailable) { sleep = try SleepWatch() } catch {
            log("on demand: the host's sleep is not followed: \(error)")
        }
        var asleep = false, saidAsleep = false
        evaluate()
        var due: Double?
        var nextCheck = ProcessControl.monotonicSeconds() + Self.recheckSeconds
        while true {
            let now = ProcessControl.monotonicSeconds()
            var set = PollSet()
            set.add(signals, .readable)
            set.add(FileDescriptor(rawValue: events.fileDescriptor), .readable)
            set.add(saves.descriptor, .readable)
            let sleepIndex = sleep.map { set.add($0.descriptor, .readable) }
            let watchIndex = dnsWatch.map { set.add(FileDescriptor(rawValue: $0.socket.fileDescriptor), .readable) }
            let timeout = min(due ?? nextCheck, nextCheck) - now
            _ = try? set.wait(timeoutMilliseconds: Int32(max(0, min(timeout, 1)) * 1000))
            if set.events(at: 0).contains(.readable), TerminationSignals.read(signals) != 0 {
                log("on demand: stopping (signal); the tunnels it started keep running")
                return 0
            }
            if set.events(at: 1) != [] { if events.drainNotifications() > 0 { due = due ?? now + Self.debounceSeconds } }
            if set.events(at: 2) != [] { saves.drain(); due = due ?? now + Self.debounceSeconds }
            if let sleepIndex, set.events(at: sleepIndex) != [], let watch = sleep {
                do throws(SystemBusError) {
                    for announced in try watch.next() where announced != asleep {
                        asleep = announced
                        saidAsleep = false
                        log(asleep ? "on demand: the host is about to sleep (logind's PrepareForSleep): nothing is judged until it wakes"
                                   : "on demand: the host woke: judging again")
                        if !asleep { due = ProcessControl.monotonicSeconds() }
                    }
                } catch {
                    log("on demand: the host's sleep is no longer followed: \(error)")
                    sleep = nil
                    asleep = false
                }
            }
            if let watchIndex, set.events(at: watchIndex) != [], let watch = dnsWatch {
                let names = watch.names()
                if !asleep { queried(names) }
            }
            if asleep {
                if due != nil, !saidAsleep { log("on demand: a change while the host sleeps: not judged"); saidAsleep = true }
                due = nil
                nextCheck = ProcessControl.monotonicSeconds() + Self.recheckSeconds
                continue
            }
            let later = ProcessControl.monotonicSeconds()
            if let d = due, later >= d {
                due = nil
                evaluate(networkChanged: true)
                nextCheck = later + Self.recheckSeconds
            } else if later >= nextCheck {
                evaluate(networkChanged: false)
                nextCheck = later + Self.recheckSeconds
            }
        }
    }

    // MARK: One evaluation

    /// Evaluates every enabled on-demand manager once, and acts. `networkChanged`: probe URLs are
    /// fetched again (else an answer younger than `reprobeSeconds` is reused).
    public func evaluate(networkChanged: Bool = true) {
        if networkChanged { probes = [:] }
        let entries: [NEVPNPreferences.Entry]
        do throws(NEVPNError) { entries = try NEVPNPreferences.read() } catch {
            say("preferences", "on demand: cannot read the preferences: \(error.message)")
            return
        }
        var seen = Set<String>()
        let network = primaryNetwork()
        defer { armOrDisarmDNSWatch() }
        evaluating = [:]
        for entry in entries {
            seen.insert(entry.identifier)
            let manager = managers[entry.identifier] ?? NETunnelProviderManager(identifier: entry.identifier)
            managers[entry.identifier] = manager
            entry.apply(to: manager)
            manager.markSaved(true)
            let name = (manager.protocolConfiguration as? NETunnelProviderProtocol)?.tunnelgateInterfaceName ?? "tg0"
            guard manager.isEnabled, manager.isOnDemandEnabled, let rules = manager.onDemandRules, !rules.isEmpty else {
                say(entry.identifier, "on demand: \(name): off (\(manager.isEnabled ? "isOnDemandEnabled is false or there are no rules" : "not enabled"))")
                continue
            }
            guard let (link, network) = network else {
                say(entry.identifier, "on demand: \(name): no primary network (no default route up with carrier): nothing decided")
                continue
            }
            let where_ = "\(link) (\(network.interfaceType)\(network.dnsSearchDomains.isEmpty ? "" : ", search \(network.dnsSearchDomains.joined(separator: " "))"))"
            let probe = { (url: URL) -> Bool in self.probe(url, link: link, network: network, for: entry.identifier, name: name) }
            guard let decision = TunnelgateOnDemand.evaluate(rules, on: network, probe: probe) else {
                say(entry.identifier, "on demand: \(name): no rule matches \(where_): nothing changes")
                continue
            }
            let rule = "rule \(decision.ruleIndex) (\(Self.word(decision.action)))"
            let connection = manager.connection
            connection.refresh(post: false)
            let status = connection.status
            switch decision.action {
            case .connect:
                if [.connecting, .connected, .reasserting, .disconnecting].contains(status) {
                    say(entry.identifier, "on demand: \(name): \(rule) matches \(where_): \(Self.word(status)), nothing to do")
                    continue
                }
                let now = ProcessControl.monotonicSeconds()
                if let last = lastStart[entry.identifier], now - last < Self.restartSeconds { continue }
                lastStart[entry.identifier] = now
                do {
                    try connection.startVPNTunnel()
                    log("on demand: \(name): \(rule) matches \(where_): starting the tunnel")
                    lastSaid[entry.identifier] = nil
                } catch {
                    say(entry.identifier, "on demand: \(name): \(rule) matches \(where_): the start failed: \(error)")
                }
            case .disconnect:
                if status == .disconnected || status == .invalid || status == .disconnecting {
                    say(entry.identifier, "on demand: \(name): \(rule) matches \(where_): disconnected, nothing to do")
                    continue
                }
                connection.stopVPNTunnel()
                log("on demand: \(name): \(rule) matches \(where_): stopping the tunnel")
                lastSaid[entry.identifier] = nil
            case .ignore:
                say(entry.identifier, "on demand: \(name): \(rule) matches \(where_): ignored, the tunnel stays \(Self.word(status))")
            case .evaluateConnection:
                let connectionRules = (decision.rule as? NEOnDemandRuleEvaluateConnection)?.connectionRules ?? []
                evaluating[entry.identifier] = (manager, name, connectionRules, link, network)
                say(entry.identifier, "on demand: \(name): \(rule) matches \(where_): evaluating connections by the names "
                    + "this namespace looks up (\(connectionRules.count) connection rules); the tunnel stays \(Self.word(status))")
            }
        }
        for gone in Set(managers.keys).subtracting(seen) { managers[gone] = nil; lastSaid[gone] = nil }
    }

    // MARK: evaluateConnection

    /// The directory of this namespace's saved configurations, where the watcher's lock and journal live.
    static func preferencesDirectory() throws(SystemCallError) -> String {
        do throws(NEVPNError) { return (try NEVPNPreferences.path as NSString).deletingLastPathComponent } catch {
            throw SystemCallError(refusing: "the preferences: \(error.message)")
        }
    }

    /// The lock the one watcher of a namespace holds.
    static func lockPath(in directory: String) -> String { "\(directory)/on-demand.lock" }

    /// What a watcher that did not stop left in this namespace (the DNS watch's table, by its journal)
    /// removed; nil when there was nothing. Refused while a watcher runs (it holds the lock).
    public static func clean() throws(SystemCallError) -> String? {
        let directory = try Self.preferencesDirectory()
        let lockPath = Self.lockPath(in: directory)
        guard let lock = try FileLock.tryAcquire(lockPath) else {
            throw SystemCallError(refusing: "a `tunnelgate on-demand` runs in this namespace (it holds \(lockPath)); it removes its own")
        }
        defer { lock.releaseAndRemove() }
        return TunnelgateOnDemandDNSWatch.recover(directory: directory)
    }

    private func armOrDisarmDNSWatch() {
        if evaluating.isEmpty { disarmDNSWatch(); return }
        guard dnsWatch == nil, !watchDirectory.isEmpty else { return }
        do throws(SystemCallError) {
            dnsWatch = try TunnelgateOnDemandDNSWatch(directory: watchDirectory)
            say("dns watch", "on demand: watching this namespace's DNS queries (nftables table inet \(TunnelgateOnDemandDNSWatch.table), "
                + "nfnetlink_log group \(TunnelgateOnDemandDNSWatch.group))")
        } catch {
            say("dns watch", "on demand: evaluateConnection cannot see this namespace's DNS queries: \(error)")
        }
    }

    private func disarmDNSWatch() {
        guard let watch = dnsWatch else { return }
        watch.close()
        dnsWatch = nil
        say("dns watch", "on demand: no longer watching DNS queries (no configuration evaluates connections)")
    }

    /// Names this namespace looked up: each configuration that evaluates connections acts on the first
    /// connection rule whose matchDomains hold the name, as iOS does for a connection to that host.
    func queried(_ names: [String]) {
        let start = ProcessControl.monotonicSeconds()
        lastQuery = lastQuery.filter { start - $0.value < Self.querySeconds }
        var resolutions = 0
        for host in Set(names).sorted() {
            for (identifier, e) in evaluating.sorted(by: { $0.key < $1.key }) {
                guard let index = e.rules.firstIndex(where: { TunnelgateOnDemand.evaluateConnection(toHost: host, rules: [$0]) != nil }) else {
                    say("\(identifier) query", "on demand: \(e.name): lookup of \(host): no connection rule matches, nothing to do")
                    continue
                }
                let rule = e.rules[index]
                let now = ProcessControl.monotonicSeconds()
                let key = "\(identifier) \(host)"
                if let last = lastQuery[key], now - last < Self.querySeconds { continue }
                lastQuery[key] = now
                let what = "lookup of \(host): connection rule \(index)"
                guard rule.action == .connectIfNeeded else {
                    say("\(identifier) query", "on demand: \(e.name): \(what) (neverConnect): the tunnel is not started")
                    continue
                }
                let connection = e.manager.connection
                connection.refresh(post: false)
                if [.connecting, .connected, .reasserting, .disconnecting].contains(connection.status) { continue }
                if let last = lastStart[identifier], now - last < Self.restartSeconds { continue }
                guard resolutions < Self.resolutionsPerWake else { continue }
                resolutions += 1
                // Needed when the name cannot be resolved on the network (with useDNSServers, else its
                // own servers), or when the probe does not answer 200 OK.
                let servers = (rule.useDNSServers ?? []).compactMap { SocketAddress.numeric($0, port: 53) }
                let fetcher = TunnelgateOnDemandProbe(interface: e.link,
                                                      nameservers: servers.isEmpty ? e.network.dnsServers.compactMap { SocketAddress.numeric($0, port: 53) } : servers)
                var needed: String?
                switch fetcher.resolve(host, port: 0, deadline: now + TunnelgateOnDemandProbe.timeoutSeconds) {
                case .failure(let why): needed = "\(why.description) on \(e.link)\(servers.isEmpty ? "" : " (useDNSServers)")"
                case .success:
                    if let url = rule.probeURL {
                        let outcome = fetcher.fetch(url)
                        if !outcome.matches { needed = "probe \(url.absoluteString): \(outcome)" }
                    }
                }
                guard let needed else {
                    say("\(identifier) query", "on demand: \(e.name): \(what) (connectIfNeeded): reachable on \(e.link) without the tunnel, not started")
                    continue
                }
                lastStart[identifier] = now
                do {
                    try connection.startVPNTunnel()
                    log("on demand: \(e.name): \(what) (connectIfNeeded): \(needed): starting the tunnel")
                    lastSaid["\(identifier) query"] = nil
                } catch {
                    say("\(identifier) query", "on demand: \(e.name): \(what) (connectIfNeeded): the start failed: \(error)")
                }
            }
        }
    }

    /// Logs `line` for `key` only when it differs from what was last said (a steady state is one line).
    private func say(_ key: String, _ line: String?) {
        guard lastSaid[key] != line else { return }
        lastSaid[key] = line
        if let line { log(line) }
    }

    // MARK: The primary network

    /// The link the main table's default route leaves by, and the network as the rules see it.
    func primaryNetwork() -> (String, TunnelgateOnDemand.Network)? {
        for family in [IPFamily.ipv4, .ipv6] {
            guard let table = try? routes.routes(family: family, table: 254) else { continue }
            for route in table where route.destination.length == 0 && route.type == .unicast {
                guard let index = route.outputInterface, let link = try? routes.link(index: index), link.isUp, link.hasCarrier else { continue }
                let resolver = DNSConfigurator.underlyingResolvConf(stateDirectory: Self.stateDirectory ?? "/nonexistent")
                let network = TunnelgateOnDemand.Network(
                    interfaceType: Self.interfaceType(name: link.name, index: link.index, kind: link.kind), ssid: nil, dnsSearchDomains: resolver.searchDomains,
                    dnsServers: resolver.nameservers.map { $0.address.description })
                return (link.name, network)
            }
        }
        return nil
    }

    static var stateDirectory: String? { try? StateDirectory(create: false).path }

    /// wired, wireless, cellular or other, from sysfs when it shows this namespace's link, else from
    /// the link's kind.
    static func interfaceType(name: String, index: Int32, kind: String?) -> TunnelgateOnDemand.Network.InterfaceType {
        let sys = "/sys/class/net/\(name)"
        let ownSysfs = (try? FileSystem.read("\(sys)/ifindex")).map { String(decoding: $0, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines) } == "\(index)"
        if ownSysfs {
            if FileSystem.exists("\(sys)/wireless") || FileSystem.exists("\(sys)/phy80211") { return .wireless }
            let uevent = (try? FileSystem.read("\(sys)/uevent")).map { String(decoding: $0, as: UTF8.self) } ?? ""
            if uevent.split(separator: "\n").contains("DEVTYPE=wwan") { return .cellular }
            let type = (try? FileSystem.read("\(sys)/type")).map { String(decoding: $0, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines) }
            if type != "1" { return .other }  // ARPHRD_ETHER
        }
        switch kind {
        case nil, "veth", "macvlan", "ipvlan", "macvtap": return .wired
        default: return .other
        }
    }

    /// A rule's probeURL, fetched on `link` outside the tunnel (TunnelgateOnDemandProbe): true for 200
    /// OK. Each answer that differs from the last for this URL is one line of the log.
    func probe(_ url: URL, link: String, network: TunnelgateOnDemand.Network, for identifier: String, name: String) -> Bool {
        let key = "\(link) \(url.absoluteString)"
        let now = ProcessControl.monotonicSeconds()
        if let kept = probes[key], now - kept.at < Self.reprobeSeconds { return kept.outcome.matches }
        let fetcher = TunnelgateOnDemandProbe(interface: link, nameservers: network.dnsServers.compactMap { SocketAddress.numeric($0, port: 53) })
        let outcome = fetcher.fetch(url)
        probes[key] = (outcome, ProcessControl.monotonicSeconds())
        say("\(identifier) probe \(url.absoluteString)",
            "on demand: \(name): probe \(url.absoluteString) on \(link): \(outcome) (\(outcome.matches ? "matches" : "does not match: only 200 OK does"))")
        return outcome.matches
    }

    static func word(_ action: NEOnDemandRuleAction) -> String {
        switch action {
        case .connect: "connect"
        case .disconnect: "disconnect"
        case .evaluateConnection: "evaluateConnection"
        case .ignore: "ignore"
        }
    }

    static func word(_ status: NEVPNStatus) -> String {
        switch status {
        case .invalid: "invalid"
        case .disconnected: "disconnected"
        case .connecting: "connecting"
        case .connected: "connected"
        case .reasserting: "reasserting"
        case .disconnecting: "disconnecting"
        @unknown default: "status \(status.rawValue)"
        }
    }

    // MARK: A user's disconnect

    /// The user disconnected the tunnel `name` (`tunnelgate down NAME`): as iOS does when the user
    /// turns an on-demand VPN off in Settings, on-demand is turned off for its configuration
    /// (`isOnDemandEnabled` saved false), so the watcher does not start it again. Returns the
    /// configurations changed (their localizedDescription or identifier).
    public static func userDisconnected(name: String) throws(NEVPNError) -> [String] {
        func wanted(_ entry: NEVPNPreferences.Entry) -> Bool {
            entry.object["isOnDemandEnabled"] as? Bool == true
                && ((entry.object["protocol"] as? [String: Any])?["interfaceName"] as? String ?? "tg0") == name
        }
        // Nothing to change: the file is not written (nor made, where there is none).
        guard try NEVPNPreferences.read().contains(where: wanted) else { return [] }
        var changed: [String] = []
        try NEVPNPreferences.update { entries in
            for i in entries.indices where wanted(entries[i]) {
                entries[i].object["isOnDemandEnabled"] = false
                changed.append(entries[i].object["localizedDescription"] as? String ?? entries[i].identifier)
            }
        }
        return changed
    }
}
