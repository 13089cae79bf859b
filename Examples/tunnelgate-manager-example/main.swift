import Foundation
import NetworkExtension

// tunnelgate-manager-example: the container app's side (seeds/003's VPNManager) as a command.
//
//   start --provider PATH [--name IFNAME] [--server ADDRESS] [--username NAME] [--plist] [--password-secret NAME] [-- HOST-ARGUMENT...]
//                      save the configuration, startVPNTunnel, print each NEVPNStatusDidChange until connected;
//                      --plist saves a providerConfiguration of every property-list type (a string, a
//                      number, a date, data, an array of booleans, a nested dictionary)
//   save --provider PATH [--name IFNAME] [--server ADDRESS] [--on-demand RULE]... [--disconnect-on-sleep] [-- HOST-ARGUMENT...]
//                      save the configuration (enabled) without starting it; with --on-demand, isOnDemandEnabled
//                      and onDemandRules in order. RULE: ACTION[:CRITERION]... with ACTION connect, disconnect,
//                      ignore or evaluate, and CRITERION ethernet, wifi, cellular, any, search=D[,D...],
//                      server=A[,A...], ssid=S[,S...], probe=URL (last)  (`disconnect:search=corp.example`,
//                      `connect:ethernet`, `connect:ethernet:probe=http://198.18.0.1/ok`); an evaluate rule's
//                      connection rules, in order: if-needed=D[,D...] (connectIfNeeded), never=D[,D...]
//                      (neverConnect)  (`evaluate:ethernet:never=www.corp.example:if-needed=corp.example`)
//   status [--name IFNAME]          print connection.status
//   set-username [--username NAME] [--name IFNAME]   change the saved protocol's username and save it again
//   message TEXT [--name IFNAME]    sendProviderMessage, print the reply
//   stop [--name IFNAME]            stopVPNTunnel, print each NEVPNStatusDidChange until disconnected
//   watch [--name IFNAME]           print each NEVPNStatusDidChange; exit once disconnected after another status
//   last-error [--name IFNAME]      fetchLastDisconnectError: "DOMAIN CODE: MESSAGE", or "none"
//
// Exit 0 on success, 1 when the operation failed or timed out (20 s), 64 on a usage error.
// Notification lines: "NEVPNStatusDidChange: connecting".

    let usage = """
    usage: tunnelgate-manager-example start --provider PATH [--name IFNAME] [--server ADDRESS] [--username NAME] [--plist] [-- HOST-ARGUMENT...]
           tunnelgate-manager-example save --provider PATH [--name IFNAME] [--server ADDRESS] [--on-demand RULE]... [--disconnect-on-sleep] [-- HOST-ARGUMENT...]
           tunnelgate-manager-example status|stop|watch|last-error [--name IFNAME]
           tunnelgate-manager-example set-username [--username NAME] [--name IFNAME]
           tunnelgate-manager-example message TEXT [--name IFNAME]
    """

func say(_ line: String) { FileHandle.standardOutput.write(Data((line + "\n").utf8)) }
func fail(_ line: String, _ code: Int32 = 1) -> Never {
    FileHandle.standardError.write(Data("tunnelgate-manager-example: \(line)\n".utf8))
    exit(code)
}

func name(_ s: NEVPNStatus) -> String {
    switch s {
    case .invalid: "invalid"
    case .disconnected: "disconnected"
    case .connecting: "connecting"
    case .connected: "connected"
    case .reasserting: "reasserting"
    case .disconnecting: "disconnecting"
    }
}

var arguments = Array(CommandLine.arguments.dropFirst())
guard let command = arguments.first else { fail("Error: no command\n\(usage)", 64) }
arguments.removeFirst()
var interfaceName = "tg0"
var providerPath: String?
var serverAddress = "198.18.0.10"
var hostArguments: [String] = []
var username: String?
var passwordSecret: String?
var plist = false
var text: String?
var onDemandRules: [NEOnDemandRule] = []
var disconnectOnSleep = false

/// `ACTION[:CRITERION]...` as a rule (see the header); nil when the text is not one.
func rule(_ text: String) -> NEOnDemandRule? {
    var parts = text.split(separator: ":", omittingEmptySubsequences: false).map(String.init)
    let r: NEOnDemandRule
    switch parts.removeFirst() {
    case "connect": r = NEOnDemandRuleConnect()
    case "disconnect": r = NEOnDemandRuleDisconnect()
    case "ignore": r = NEOnDemandRuleIgnore()
    case "evaluate": r = NEOnDemandRuleEvaluateConnection()
    default: return nil
    }
    for (i, part) in parts.enumerated() {
        let list = { (prefix: String) in part.dropFirst(prefix.count).split(separator: ",").map(String.init) }
        switch part {
        case _ where part.hasPrefix("probe="):
            // The URL holds colons: it is the rest of the text.
            guard let url = URL(string: String(parts[i...].joined(separator: ":").dropFirst("probe=".count))) else { return nil }
            r.probeURL = url
            return r
        case "ethernet": r.interfaceTypeMatch = .ethernet
        case "wifi": r.interfaceTypeMatch = .wiFi
        case "cellular": r.interfaceTypeMatch = .cellular
        case "any": r.interfaceTypeMatch = .any
        case _ where part.hasPrefix("search="): r.dnsSearchDomainMatch = list("search=")
        case _ where part.hasPrefix("server="): r.dnsServerAddressMatch = list("server=")
        case _ where part.hasPrefix("ssid="): r.ssidMatch = list("ssid=")
        case _ where part.hasPrefix("if-needed=") || part.hasPrefix("never="):
            // A connection rule of an evaluate rule, in order.
            guard let evaluate = r as? NEOnDemandRuleEvaluateConnection else { return nil }
            let ifNeeded = part.hasPrefix("if-needed=")
            let rule = NEEvaluateConnectionRule(matchDomains: list(ifNeeded ? "if-needed=" : "never="),
                                                andAction: ifNeeded ? .connectIfNeeded : .neverConnect)
            evaluate.connectionRules = (evaluate.connectionRules ?? []) + [rule]
        default: return nil
        }
    }
    return r
}

while !arguments.isEmpty {
    let a = arguments.removeFirst()
    switch a {
    case "--name": interfaceName = arguments.isEmpty ? "" : arguments.removeFirst()
    case "--provider": providerPath = arguments.isEmpty ? nil : arguments.removeFirst()
    case "--server": serverAddress = arguments.isEmpty ? "" : arguments.removeFirst()
    case "--username": username = arguments.isEmpty ? "" : arguments.removeFirst()
    case "--plist": plist = true
    case "--on-demand":
        let text = arguments.isEmpty ? "" : arguments.removeFirst()
        guard let r = rule(text) else { fail("Error: '\(text)' is not an on-demand rule\n\(usage)", 64) }
        onDemandRules.append(r)
    case "--disconnect-on-sleep": disconnectOnSleep = true
    case "--password-secret": passwordSecret = arguments.isEmpty ? "" : arguments.removeFirst()
    case "--": hostArguments = arguments; arguments = []
    case "-h", "--help": say(usage); exit(0)
    default:
        if command == "message" && text == nil { text = a } else { fail("Error: unknown argument '\(a)'\n\(usage)", 64) }
    }
}

/// The manager whose tunnel is `interfaceName`, as the seed's VPNManager.load() finds its own.
func loadManager(_ interfaceName: String) -> NETunnelProviderManager {
    let done = DispatchSemaphore(value: 0)
    nonisolated(unsafe) var result: Result<[NETunnelProviderManager], Error> = .success([])
    NETunnelProviderManager.loadAllFromPreferences { managers, error in
        result = error.map { .failure($0) } ?? .success(managers ?? [])
        done.signal()
    }
    done.wait()
    let managers: [NETunnelProviderManager]
    do { managers = try result.get() } catch { fail("loadAllFromPreferences: \(error)") }
    return managers.first(where: {
        ($0.protocolConfiguration as? NETunnelProviderProtocol)?.tunnelgateInterfaceName == interfaceName
    }) ?? NETunnelProviderManager()
}

/// Prints every NEVPNStatusDidChange of `connection`; signals `until` when `stop(status)` is true.
func observe(_ connection: NEVPNConnection, stop: @escaping @Sendable (NEVPNStatus) -> Bool, until: DispatchSemaphore) -> NSObjectProtocol {
    NotificationCenter.default.addObserver(forName: .NEVPNStatusDidChange, object: connection, queue: nil) { note in
        guard let c = note.object as? NEVPNConnection else { return }
        let s = c.status
        say("NEVPNStatusDidChange: \(name(s))")
        if stop(s) { until.signal() }
    }
}

switch command {
case "start":
    guard let providerPath else { fail("Error: start needs --provider PATH\n\(usage)", 64) }
    let manager = loadManager(interfaceName)
    let proto = NETunnelProviderProtocol()
    proto.providerBundleIdentifier = providerPath
    proto.serverAddress = serverAddress
    proto.tunnelgateInterfaceName = interfaceName
    proto.tunnelgateArguments = hostArguments
    proto.username = username
    // A reference to a secret in Tunnelgate's store (tunnelgate secret add NAME), as an iOS app sets a
    // keychain item's persistent reference: never the secret itself.
    if let passwordSecret { proto.passwordReference = TunnelgateSecretStore.reference(named: passwordSecret) }
    if plist {
        proto.providerConfiguration = ["region": "eu-west", "port": 51820, "issued": Date(timeIntervalSince1970: 1_900_000_000),
                                       "token": Data([0xDE, 0xAD, 0xBE, 0xEF]), "flags": [true, false],
                                       "nested": ["mtu": 1380]]
    }
    manager.protocolConfiguration = proto
    manager.localizedDescription = "Tunnelgate example (\(interfaceName))"
    manager.isEnabled = true
    let saved = DispatchSemaphore(value: 0)
    nonisolated(unsafe) var saveError: Error?
    manager.saveToPreferences { saveError = $0; saved.signal() }
    saved.wait()
    if let saveError { fail("saveToPreferences: \(saveError)") }
    manager.loadFromPreferences { _ in saved.signal() }
    saved.wait()
    let connection = manager.connection
    let finished = DispatchSemaphore(value: 0)
    nonisolated(unsafe) var seenConnecting = false
    let token = observe(connection, stop: { s in
        if s == .connecting { seenConnecting = true }
        return s == .connected || (seenConnecting && s == .disconnected)
    }, until: finished)
    do { try connection.startVPNTunnel() } catch { fail("startVPNTunnel: \(error)") }
    if finished.wait(timeout: .now() + 20) == .timedOut { fail("not connected within 20 s (status \(name(connection.status)))") }
    NotificationCenter.default.removeObserver(token)
    guard connection.status == .connected else { fail("the tunnel did not connect (status \(name(connection.status)))") }
    exit(0)

case "save":
    // A container app that saves an on-demand configuration and leaves starting it to the system.
    guard let providerPath else { fail("Error: save needs --provider PATH\n\(usage)", 64) }
    let manager = loadManager(interfaceName)
    let proto = NETunnelProviderProtocol()
    proto.providerBundleIdentifier = providerPath
    proto.serverAddress = serverAddress
    proto.tunnelgateInterfaceName = interfaceName
    proto.tunnelgateArguments = hostArguments
    proto.disconnectOnSleep = disconnectOnSleep
    manager.protocolConfiguration = proto
    manager.localizedDescription = "Tunnelgate example (\(interfaceName))"
    manager.isEnabled = true
    manager.isOnDemandEnabled = !onDemandRules.isEmpty
    manager.onDemandRules = onDemandRules.isEmpty ? nil : onDemandRules
    let saved = DispatchSemaphore(value: 0)
    nonisolated(unsafe) var saveError: Error?
    manager.saveToPreferences { saveError = $0; saved.signal() }
    saved.wait()
    if let saveError { fail("saveToPreferences: \(saveError)") }
    say("saved \(interfaceName): \(onDemandRules.count) on-demand rules")
    exit(0)

case "status":
    say(name(loadManager(interfaceName).connection.status))
    exit(0)

case "set-username":
    // Loads the saved manager, changes the protocol's username (--username) and saves it again, as an
    // app's settings screen does while the tunnel runs.
    let manager = loadManager(interfaceName)
    guard let proto = manager.protocolConfiguration as? NETunnelProviderProtocol else { fail("no saved configuration for \(interfaceName)") }
    proto.username = username
    let saved = DispatchSemaphore(value: 0)
    nonisolated(unsafe) var saveError: Error?
    manager.saveToPreferences { saveError = $0; saved.signal() }
    saved.wait()
    if let saveError { fail("saveToPreferences: \(saveError)") }
    say("saved")
    exit(0)

case "message":
    guard let text else { fail("Error: message needs TEXT\n\(usage)", 64) }
    guard let session = loadManager(interfaceName).connection as? NETunnelProviderSession else { fail("not a tunnel provider session") }
    let answered = DispatchSemaphore(value: 0)
    nonisolated(unsafe) var reply: Data?
    do {
        try session.sendProviderMessage(Data(text.utf8)) { data in reply = data; answered.signal() }
    } catch { fail("sendProviderMessage: \(error)") }
    if answered.wait(timeout: .now() + 20) == .timedOut { fail("no reply within 20 s") }
    guard let reply else { fail("the provider sent no reply") }
    say(String(decoding: reply, as: UTF8.self))
    exit(0)

case "stop":
    let connection = loadManager(interfaceName).connection
    guard connection.status != .disconnected && connection.status != .invalid else { say("already \(name(connection.status))"); exit(0) }
    let finished = DispatchSemaphore(value: 0)
    let token = observe(connection, stop: { $0 == .disconnected }, until: finished)
    connection.stopVPNTunnel()
    if finished.wait(timeout: .now() + 20) == .timedOut { fail("not disconnected within 20 s (status \(name(connection.status)))") }
    NotificationCenter.default.removeObserver(token)
    exit(0)

case "last-error":
    let fetched = DispatchSemaphore(value: 0)
    nonisolated(unsafe) var lastError: Error?
    loadManager(interfaceName).connection.fetchLastDisconnectError { lastError = $0; fetched.signal() }
    fetched.wait()
    if let e = lastError as NSError? { say("\(e.domain) \(e.code): \(e.localizedDescription)") } else { say("none") }
    exit(0)

case "watch":
    let connection = loadManager(interfaceName).connection
    say("status: \(name(connection.status))")
    let finished = DispatchSemaphore(value: 0)
    nonisolated(unsafe) var seenOther = connection.status != .disconnected && connection.status != .invalid
    _ = observe(connection, stop: { s in
        if s != .disconnected && s != .invalid { seenOther = true; return false }
        return seenOther
    }, until: finished)
    finished.wait()
    exit(0)

default:
    fail("Error: unknown command '\(command)'\n\(usage)", 64)
}
