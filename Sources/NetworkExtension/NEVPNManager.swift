import Foundation
import Synchronization

/// NEVPNManager: one VPN configuration and its connection. On Linux only its
/// subclass NETunnelProviderManager is useful (there is no built-in IKEv2
/// client); `shared()` is not offered.
///
/// Preferences are a JSON file (NEVPNManager+Preferences.swift): by default
/// `/run/tunnelgate/net-INODE/preferences.json`, one per network namespace like
/// the tunnels themselves, gone at reboot. Completion handlers run on a
/// background queue (iOS: the main queue).
open class NEVPNManager: NSObject, @unchecked Sendable {
    // @unchecked Sendable: the configuration properties are set by their owner, as on iOS; what other
    // threads touch (the saved configuration, the connection) is behind the two mutexes.
    /// The saved configuration's key in the preferences file.
    let identifier: String
    open var localizedDescription: String?
    open var isEnabled = false
    open var protocolConfiguration: NEVPNProtocol?
    /// Saved (NEOnDemandRule.swift); evaluated by `TunnelgateOnDemand.evaluate` on network changes.
    open var isOnDemandEnabled = false
    open var onDemandRules: [NEOnDemandRule]?

    /// What was last saved or loaded: what the connection starts (as on iOS, unsaved changes are not used).
    private let saved = Mutex<NEVPNConnection.Configuration?>(nil)
    /// Separate from `saved`: a new connection reads the saved configuration while this one is held.
    private let connectionLock = Mutex<NEVPNConnection?>(nil)

    public override init() {
        identifier = UUID().uuidString
        super.init()
    }

    init(identifier: String) {
        self.identifier = identifier
        super.init()
    }

    /// True once this configuration was saved to or loaded from the preferences.
    var isSaved: Bool { saved.withLock { $0 != nil } }

    /// Records what was saved (nil: removed) and hands it to the connection.
    func markSaved(_ isSaved: Bool) {
        let configuration = isSaved ? NEVPNConnection.Configuration(self) : nil
        saved.withLock { $0 = configuration }
        connectionLock.withLock { $0 }?.update(configuration)
    }

    /// The connection of this configuration (an NETunnelProviderSession for an NETunnelProviderManager).
    /// Its status follows the tunnel in the state directory from the moment it is first asked for; it
    /// keeps working after the manager object is gone.
    public var connection: NEVPNConnection {
        let configuration = saved.withLock { $0 }
        return connectionLock.withLock { connection in
            if let c = connection { return c }
            let c = makeConnection(configuration)
            connection = c
            return c
        }
    }

    func makeConnection(_ configuration: NEVPNConnection.Configuration?) -> NEVPNConnection {
        NEVPNConnection(configuration)
    }

    // MARK: Preferences

    /// Reloads this configuration from the preferences (nothing changes when it was never saved).
    open func loadFromPreferences(completionHandler: @escaping (Error?) -> Void) {
        nonisolated(unsafe) let handler = completionHandler
        DispatchQueue.global().async { [self] in
            do throws(NEVPNError) { try loadFromPreferencesNow(); handler(nil) } catch { handler(error) }
        }
    }

    open func loadFromPreferences() async throws {
        try await withCheckedThrowingContinuation { (c: CheckedContinuation<Void, any Error>) in
            loadFromPreferences { error in if let error { c.resume(throwing: error) } else { c.resume() } }
        }
    }

    /// Writes this configuration (replacing the saved one of the same manager). Fails with
    /// `.configurationInvalid` without a protocolConfiguration.
    open func saveToPreferences(completionHandler: ((Error?) -> Void)? = nil) {
        nonisolated(unsafe) let handler = completionHandler
        DispatchQueue.global().async { [self] in
            do throws(NEVPNError) { try saveToPreferencesNow(); handler?(nil) } catch { handler?(error) }
        }
    }

    open func saveToPreferences() async throws {
        try await withCheckedThrowingContinuation { (c: CheckedContinuation<Void, any Error>) in
            saveToPreferences { error in if let error { c.resume(throwing: error) } else { c.resume() } }
        }
    }

    /// Removes this configuration from the preferences (a running tunnel keeps running).
    open func removeFromPreferences(completionHandler: ((Error?) -> Void)? = nil) {
        nonisolated(unsafe) let handler = completionHandler
        DispatchQueue.global().async { [self] in
            do throws(NEVPNError) {
                try NEVPNPreferences.update { $0.removeAll { $0.identifier == identifier } }
                markSaved(false)
                handler?(nil)
            } catch { handler?(error) }
        }
    }

    open func removeFromPreferences() async throws {
        try await withCheckedThrowingContinuation { (c: CheckedContinuation<Void, any Error>) in
            removeFromPreferences { error in if let error { c.resume(throwing: error) } else { c.resume() } }
        }
    }

    func loadFromPreferencesNow() throws(NEVPNError) {
        guard let entry = try NEVPNPreferences.read().first(where: { $0.identifier == identifier }) else { return }
        entry.apply(to: self)
        markSaved(true)
    }

    func saveToPreferencesNow() throws(NEVPNError) {
        guard protocolConfiguration != nil else {
            throw NEVPNError(.configurationInvalid, "the configuration has no protocolConfiguration")
        }
        let entry = try NEVPNPreferences.Entry(self)
        try NEVPNPreferences.update { entries in
            if let i = entries.firstIndex(where: { $0.identifier == identifier }) { entries[i] = entry } else { entries.append(entry) }
        }
        markSaved(true)
        // A running tunnel's provider sees the saved protocol before the save completes.
        if let saved = saved.withLock({ $0 }) { connection.deliverSaved(saved) }
    }
}

/// NETunnelProviderManager: a configuration that runs a packet-tunnel provider.
open class NETunnelProviderManager: NEVPNManager, @unchecked Sendable {
    // @unchecked Sendable: as NEVPNManager.
    public override init() { super.init() }

    override init(identifier: String) { super.init(identifier: identifier) }

    override func makeConnection(_ configuration: NEVPNConnection.Configuration?) -> NEVPNConnection {
        NETunnelProviderSession(configuration)
    }

    /// Every saved NETunnelProviderManager, as new objects, in the order saved.
    open class func loadAllFromPreferences(completionHandler: @escaping ([NETunnelProviderManager]?, Error?) -> Void) {
        nonisolated(unsafe) let handler = completionHandler
        DispatchQueue.global().async {
            do throws(NEVPNError) { handler(try loadAllFromPreferencesNow(), nil) } catch { handler(nil, error) }
        }
    }

    open class func loadAllFromPreferences() async throws -> [NETunnelProviderManager] {
        try await withCheckedThrowingContinuation { (c: CheckedContinuation<[NETunnelProviderManager], any Error>) in
            loadAllFromPreferences { managers, error in
                if let error { c.resume(throwing: error) } else { c.resume(returning: managers ?? []) }
            }
        }
    }

    static func loadAllFromPreferencesNow() throws(NEVPNError) -> [NETunnelProviderManager] {
        try NEVPNPreferences.read().map { entry in
            let m = NETunnelProviderManager(identifier: entry.identifier)
            entry.apply(to: m)
            m.markSaved(true)
            return m
        }
    }
}
