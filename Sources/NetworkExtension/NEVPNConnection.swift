import Session
import Foundation
import Engine
import LinuxSystem
import Synchronization

/// NEVPNConnection: the connection of one manager's configuration.
///
/// Linux: the tunnel is found by its interface name
/// (`NETunnelProviderProtocol.tunnelgateInterfaceName`) in the state directory
/// of the calling process's network namespace, where the provider host's
/// engine keeps the owner's pid and status (`NAME.state`) and its control
/// socket (`NAME.sock`). `status` follows that file: a watcher polls it every
/// 50 ms for as long as the connection object exists, and posts
/// `NEVPNStatusDidChange` (object: this connection) on each change. A tunnel
/// started by another process (or `tunnelgate`) is seen the same way.
open class NEVPNConnection: @unchecked Sendable {
    // @unchecked Sendable: every mutable field is inside `state` (a Mutex).

    /// The manager's configuration as last saved or loaded: what startVPNTunnel runs.
    struct Configuration: Sendable {
        var isEnabled: Bool
        var executable: String?
        var arguments: [String]
        var interfaceName: String
        var serverAddress: String?
        /// providerConfiguration as JSON.
        var providerConfiguration: String?
        var includeAllNetworks: Bool
        var excludeLocalNetworks: Bool
        /// The whole protocol as the provider reads it (`tunnelgateEncoded()`); nil when it holds a
        /// value that is not a property-list value (saveToPreferences refuses those).
        var protocolJSON: String?

        init(_ m: NEVPNManager) {
            isEnabled = m.isEnabled
            let p = m.protocolConfiguration
            let t = p as? NETunnelProviderProtocol
            executable = t?.providerBundleIdentifier
            arguments = t?.tunnelgateArguments ?? []
            interfaceName = t?.tunnelgateInterfaceName ?? "tg0"
            serverAddress = p?.serverAddress
            if let c = t?.providerConfiguration, JSONSerialization.isValidJSONObject(c),
               let data = try? JSONSerialization.data(withJSONObject: c, options: [.sortedKeys]) {
                providerConfiguration = String(decoding: data, as: UTF8.self)
            }
            includeAllNetworks = p?.includeAllNetworks ?? false
            excludeLocalNetworks = p?.excludeLocalNetworks ?? false
            protocolJSON = (try? t?.tunnelgateEncoded()).map { String(decoding: $0, as: UTF8.self) }
        }
    }

    enum Phase { case idle, starting, running, stopping }

    struct State {
        var status: NEVPNStatus = .invalid
        var phase: Phase = .idle
        /// The provider host this connection spawned, until it is reaped.
        var child: Int32?
        var connectedDate: Date?
        var directory: StateDirectory?
        /// nil while the configuration is not saved (status .invalid).
        var configuration: Configuration?
    }

    private let state = Mutex(State())
    /// Notifications are posted from here, one at a time, in the order the changes were seen.
    private let notifications = DispatchQueue(label: "tunnelgate.NEVPNConnection.notifications")
    private let timer: DispatchSourceTimer

    /// How often the state directory is read (a poll is an open and a small read).
    static let pollInterval: DispatchTimeInterval = .milliseconds(50)

    init(_ configuration: Configuration?) {
        state.withLock { $0.configuration = configuration }
        timer = DispatchSource.makeTimerSource(queue: DispatchQueue(label: "tunnelgate.NEVPNConnection.watcher"))
        refresh(post: false)
        timer.schedule(deadline: .now() + Self.pollInterval, repeating: Self.pollInterval, leeway: .milliseconds(5))
        timer.setEventHandler { [weak self] in self?.refresh(post: true) }
        timer.resume()
    }

    deinit {
        timer.cancel()
    }

    /// The connection's status; `.invalid` while the configuration is not saved.
    public var status: NEVPNStatus { state.withLock { $0.status } }

    /// When the status last became `.connected` (as seen by this process).
    public var connectedDate: Date? { state.withLock { $0.connectedDate } }

    var interfaceName: String { state.withLock { $0.configuration?.interfaceName ?? "tg0" } }

    func update(_ configuration: Configuration?) {
        state.withLock { $0.configuration = configuration }
        refresh(post: true)
    }

    /// The manager saved `configuration`. While the tunnel runs, its protocol goes to the provider at
    /// once, before the save completes, as iOS updates `protocolConfiguration`: through the control
    /// socket as an app message with `protocolUpdateMarker` before it, which the provider host takes
    /// (never the provider's handleAppMessage). Not running: nothing to do (the next start hands it over).
    func deliverSaved(_ configuration: Configuration) {
        refresh(post: false)
        guard let json = configuration.protocolJSON, status == .connected || status == .reasserting,
              let directory = state.withLock({ $0.directory }) else { return }
        let message = Self.protocolUpdateMarker + Data(json.utf8)
        _ = try? ControlServer.request(directory.controlPath(interfaceName), "message " + message.base64EncodedString())
    }

    /// What starts an app message that carries a new protocolConfiguration for the provider host
    /// (a NUL first: no text message a container app sends starts so).
    static let protocolUpdateMarker = Data("\u{0}tunnelgate:protocolConfiguration\n".utf8)

    // MARK: Start and stop

    /// Where providers are registered under their bundle identifiers: a symbolic link (or the
    /// executable itself) named after the identifier, made by the administrator
    /// (`ln -s /usr/libexec/example-vpn/provider /etc/tunnelgate/providers/com.example.vpn.tunnel`).
    /// `TUNNELGATE_PROVIDERS` names another directory (tests).
    static var providerDirectory: String {
        ProcessInfo.processInfo.environment["TUNNELGATE_PROVIDERS"] ?? "/etc/tunnelgate/providers"
    }

    /// The executable `providerBundleIdentifier` names: a path (with a '/') as it is; a bundle
    /// identifier (letters, digits, '.', '-', '_', as iOS's) through its registration in
    /// `providerDirectory`, which the TrustedFile walk then follows and checks like any path. A
    /// container app's unchanged identifier thus starts the provider registered for it.
    static func providerExecutable(_ identifier: String) throws(NEVPNError) -> String {
        if identifier.contains("/") { return identifier }
        let valid = identifier.utf8.count <= 255 && !identifier.hasPrefix(".") && identifier.utf8.allSatisfy {
            ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x41 && $0 <= 0x5A) || ($0 >= 0x61 && $0 <= 0x7A) || $0 == 0x2E || $0 == 0x2D || $0 == 0x5F
        }
        guard valid else {
            throw NEVPNError(.configurationInvalid, "providerBundleIdentifier: '\(identifier)' is neither a path nor a bundle identifier "
                             + "(letters, digits, '.', '-' and '_')")
        }
        let registration = providerDirectory + "/" + identifier
        guard (try? FileSystem.status(registration)) != nil else {
            throw NEVPNError(.configurationInvalid, "providerBundleIdentifier: no provider is registered as \(identifier) "
                             + "(\(registration) is missing: link it to the provider host executable)")
        }
        return registration
    }

    public func startVPNTunnel() throws {
        try startVPNTunnel(options: nil)
    }

    /// Runs the provider host (`providerBundleIdentifier`, a path on Linux) detached, in this process's
    /// network namespace, and returns at once; the status becomes `.connecting`, then follows the host.
    /// Does nothing while the tunnel is already connecting, connected or reasserting.
    ///
    /// The executable is opened once as a TrustedFile (refused, in one line, when anyone but root or
    /// this user could change it or a directory on the way to it) and that very file is run, through
    /// /proc/self/fd/N. The host gets the caller's environment without its TUNNELGATE_ variables (but
    /// the preferences' directory and the test suite's TUNNELGATE_PLANE_ hooks), and its configuration
    /// (interface name, server address, providerConfiguration, the start options, includeAllNetworks,
    /// excludeLocalNetworks) as its descriptor 3, a sealed anonymous file
    /// (`TunnelgateHostHandoff`), never in the environment; `TunnelgateHostConfiguration.fromManager()`
    /// reads it. Its output goes to `NAME.log` in the state directory.
    public func startVPNTunnel(options: [String: NSObject]?) throws {
        guard let configuration = state.withLock({ $0.configuration }) else {
            throw NEVPNError(.configurationInvalid, "the configuration is not saved (saveToPreferences first)")
        }
        guard configuration.isEnabled else { throw NEVPNError(.configurationDisabled, "the configuration is not enabled") }
        guard let identifier = configuration.executable, !identifier.isEmpty else {
            throw NEVPNError(.configurationInvalid, "providerBundleIdentifier: the path of the provider host executable is not set")
        }
        let executable = try Self.providerExecutable(identifier)
        let program: TrustedFile
        do { program = try TrustedFile.open(executable) } catch {
            if case .notFound = error {
                throw NEVPNError(.configurationInvalid, "providerBundleIdentifier: \(executable) is not an executable file")
            }
            throw NEVPNError(.configurationInvalid, "providerBundleIdentifier: \(error)")
        }
        defer { program.close() }
        guard program.status.permissions & 0o111 != 0 else {
            throw NEVPNError(.configurationInvalid, "providerBundleIdentifier: \(executable) is not an executable file")
        }
        refresh(post: true)
        let name = configuration.interfaceName
        switch status {
        case .connecting, .connected, .reasserting: return
        case .disconnecting: throw NEVPNError(.connectionFailed, "the tunnel \(name) is still disconnecting")
        case .invalid, .disconnected: break
        }
        // The preferences' file, the secret store's directory and the test suite's plane hooks go on;
        // nothing else of ours does.
        let environment = ProcessInfo.processInfo.environment.filter {
            !$0.key.hasPrefix("TUNNELGATE_") || $0.key == "TUNNELGATE_PREFERENCES" || $0.key == "TUNNELGATE_SECRETS"
                || $0.key.hasPrefix("TUNNELGATE_PLANE_")
        }
        let handoff = TunnelgateHostHandoff(
            configuration: TunnelgateHostConfiguration(interfaceName: name, includeAllNetworks: configuration.includeAllNetworks,
                                                       excludeLocalNetworks: configuration.excludeLocalNetworks),
            serverAddress: configuration.serverAddress, providerConfigurationJSON: configuration.providerConfiguration,
            startOptionsJSON: options.flatMap(Self.encodeOptions), protocolConfigurationJSON: configuration.protocolJSON)
        let pid: Int32
        do throws(SystemCallError) {
            let directory = try StateDirectory(create: true)
            let file = try handoff.makeDescriptor()
            defer { file.close() }
            // Out of the way of the child's 0–3, which the spawn's file actions set.
            let image = try program.descriptor.duplicate(atLeast: 10)
            defer { image.close() }
            pid = try ProcessControl.spawnDetached("/proc/self/fd/\(image.rawValue)", [executable] + configuration.arguments,
                                                   environment: environment.map { "\($0.key)=\($0.value)" }.sorted(),
                                                   logPath: directory.logPath(name), passing: file)
        } catch {
            throw NEVPNError(.connectionFailed, "starting \(executable): \(error)")
        }
        state.withLock { s in
            s.child = pid
            s.phase = .starting
        }
        refresh(post: true)
    }

    /// Asks the tunnel to stop and returns at once: `stop` on its control socket, or SIGTERM to its owner
    /// (the pid in the state directory, or the host this connection spawned) when the socket does not
    /// answer. The provider's stopTunnel runs once; the status becomes `.disconnecting`, then `.disconnected`.
    public func stopVPNTunnel() {
        let name = interfaceName
        let (directory, child) = state.withLock { s in
            s.phase = .stopping
            return (s.directory, s.child)
        }
        refresh(post: true)
        DispatchQueue.global().async {
            guard let directory else { return }
            if let answer = try? ControlServer.request(directory.controlPath(name), "stop"), answer.contains(#""ok":true"#) { return }
            if let pid = TunnelRecord.read(from: directory.statePath(name))?.pid ?? child, ProcessControl.exists(pid) {
                try? ProcessControl.signal(pid, Signal.terminate)
            }
        }
    }

    // MARK: The last disconnect error

    /// The error that ended the tunnel's most recent run, nil when it ended cleanly or has not ended
    /// yet: the NSError the provider gave (cancelTunnelWithError, or startTunnel's completion handler),
    /// with its domain and code; Tunnelgate's own failures (its settings could not be removed, a
    /// `tunnelgate up` runtime that failed) in `TunnelgateErrorDomain`, code 1. Read from the state
    /// directory's NAME.lasterror; the handler is called on a background queue.
    public func fetchLastDisconnectError(completionHandler handler: @escaping @Sendable ((any Error)?) -> Void) {
        let name = interfaceName
        let directory = state.withLock { s -> StateDirectory? in
            if s.directory == nil { s.directory = try? StateDirectory(create: false) }
            return s.directory
        }
        DispatchQueue.global().async {
            handler(directory.flatMap { Self.lastDisconnectError(directory: $0, name: name) })
        }
    }

    public func fetchLastDisconnectError() async throws {
        let error: (any Error)? = await withCheckedContinuation { continuation in
            fetchLastDisconnectError { continuation.resume(returning: $0) }
        }
        if let error { throw error }
    }

    static func lastDisconnectError(directory: StateDirectory, name: String) -> NSError? {
        guard let bytes = try? FileSystem.read(directory.lastErrorPath(name)), !bytes.isEmpty,
              let recorded = try? JSONDecoder().decode(DisconnectError.self, from: Data(bytes)) else { return nil }
        return NSError(domain: recorded.domain ?? TunnelgateErrorDomain, code: recorded.code ?? 1,
                       userInfo: [NSLocalizedDescriptionKey: recorded.message])
    }

    // MARK: Provider messages (NETunnelProviderSession)

    func send(_ message: Data, responseHandler: ((Data?) -> Void)?) throws {
        refresh(post: true)
        let current = status
        guard current == .connected || current == .reasserting else {
            throw NEVPNError(.connectionFailed, "the tunnel \(interfaceName) is not connected (\(current))")
        }
        guard let directory = state.withLock({ $0.directory }) else {
            throw NEVPNError(.connectionFailed, "no state directory")
        }
        let path = directory.controlPath(interfaceName)
        nonisolated(unsafe) let handler = responseHandler
        DispatchQueue.global().async {
            var reply: Data?
            if let answer = try? ControlServer.request(path, "message " + message.base64EncodedString()),
               let object = (try? JSONSerialization.jsonObject(with: Data(answer.utf8))) as? [String: Any],
               object["ok"] as? Bool == true, let text = object["reply"] as? String, let data = Data(base64Encoded: text), !data.isEmpty {
                reply = data
            }
            handler?(reply)
        }
    }

    // MARK: Watching the state directory

    /// Reads the tunnel's state, reaps a spawned host that ended, and posts NEVPNStatusDidChange when the
    /// status changed.
    func refresh(post: Bool) {
        state.withLock { s in
            let name = s.configuration?.interfaceName ?? "tg0"
            let saved = s.configuration != nil
            if s.directory == nil { s.directory = try? StateDirectory(create: false) }
            if let child = s.child {
                do throws(SystemCallError) {
                    if try ProcessControl.wait(for: child, block: false) != nil { s.child = nil }
                } catch {
                    s.child = nil
                }
            }
            var observed: NEVPNStatus?
            if let directory = s.directory, let record = TunnelRecord.read(from: directory.statePath(name)),
               ProcessControl.exists(record.pid) {
                observed = Self.status(record.status)
            }
            var new: NEVPNStatus
            if let observed, observed != .disconnected {
                new = observed
                if s.phase == .starting { s.phase = .running }
                if s.phase == .stopping { new = .disconnecting }
            } else if s.child != nil {
                new = s.phase == .starting ? .connecting : .disconnecting
            } else {
                new = .disconnected
                s.phase = .idle
            }
            if !saved && new == .disconnected { new = .invalid }
            guard new != s.status else { return }
            s.status = new
            if new == .connected && s.connectedDate == nil { s.connectedDate = Date() }
            if new == .disconnected || new == .invalid { s.connectedDate = nil }
            if post {
                notifications.async { NotificationCenter.default.post(name: .NEVPNStatusDidChange, object: self) }
            }
        }
    }

    static func status(_ s: TunnelStatus) -> NEVPNStatus {
        switch s {
        case .disconnected: .disconnected
        case .connecting: .connecting
        case .connected: .connected
        case .reasserting: .reasserting
        case .disconnecting: .disconnecting
        }
    }

    /// Start options as JSON: strings and numbers (NSString, NSNumber); other values are left out.
    static func encodeOptions(_ options: [String: NSObject]) -> String? {
        var out: [String: Any] = [:]
        for (key, value) in options {
            if let n = value as? NSNumber { out[key] = n } else if let s = value as? NSString { out[key] = s.description }
        }
        guard let data = try? JSONSerialization.data(withJSONObject: out, options: [.sortedKeys]) else { return nil }
        return String(decoding: data, as: UTF8.self)
    }
}

/// NETunnelProviderSession: the connection of an NETunnelProviderManager.
open class NETunnelProviderSession: NEVPNConnection, @unchecked Sendable {
    // @unchecked Sendable: as NEVPNConnection.

    /// As startVPNTunnel(options:).
    public func startTunnel(options: [String: Any]? = nil) throws {
        try startVPNTunnel(options: options?.compactMapValues { $0 as? NSObject })
    }

    /// As stopVPNTunnel().
    public func stopTunnel() {
        stopVPNTunnel()
    }

    /// Sends `messageData` to the provider's handleAppMessage through the tunnel's control socket and
    /// returns at once; `responseHandler` gets the reply (nil when the provider answered nil or nothing,
    /// or the request failed) on a background queue. Throws `NEVPNError.connectionFailed` when the
    /// tunnel is not connected (or reasserting).
    public func sendProviderMessage(_ messageData: Data, responseHandler: ((Data?) -> Void)? = nil) throws {
        try send(messageData, responseHandler: responseHandler)
    }
}
