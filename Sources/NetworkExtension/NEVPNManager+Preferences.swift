import Foundation
import Engine
import LinuxSystem
import Synchronization

/// The saved managers: one JSON file, read and rewritten whole (atomically) on each change.
///
///   {"managers": [{"identifier": UUID, "localizedDescription": …, "isEnabled": …,
///                  "isOnDemandEnabled": …, "onDemandRules": [RULE, …],
///                  "protocol": {"providerBundleIdentifier": …, "serverAddress": …, "username": …,
///                               "passwordReference": BASE64, "identityReference": BASE64,
///                               "disconnectOnSleep": …, "providerConfigurationPlist": {…},
///                               "interfaceName": "tg0", "arguments": […],
///                               "includeAllNetworks": …, "excludeLocalNetworks": …}}]}
///
/// (the protocol object: NEVPNProtocol+Encoding.swift; the rules: NEOnDemandRule+Preferences.swift).
/// Keys missing from older files read as their defaults; their `providerConfiguration` (plain JSON)
/// is still read.
///
/// Writers in one process are serialised; two processes saving at the same moment can lose one's write
/// (last writer wins), which iOS's configuration daemon would prevent.
enum NEVPNPreferences {
    private static let override = Mutex<String?>(nil)
    private static let writing = Mutex<Void>(())

    /// Where the preferences live: `TUNNELGATE_PREFERENCES` when set, otherwise `preferences.json` in
    /// this network namespace's state directory (created when missing; needs root).
    static var path: String {
        get throws(NEVPNError) {
            if let p = override.withLock({ $0 }) { return p }
            if let p = ProcessInfo.processInfo.environment["TUNNELGATE_PREFERENCES"], !p.isEmpty { return p }
            do throws(SystemCallError) { return try StateDirectory(create: true).path + "/preferences.json" } catch {
                throw NEVPNError(.configurationReadWriteFailed, "the preferences' directory: \(error)")
            }
        }
    }

    static func setPath(_ path: String?) { override.withLock { $0 = path } }

    struct Entry {
        var identifier: String
        var object: [String: Any]

        init(_ m: NEVPNManager) throws(NEVPNError) {
            identifier = m.identifier
            var o: [String: Any] = ["identifier": m.identifier, "isEnabled": m.isEnabled]
            if let d = m.localizedDescription { o["localizedDescription"] = d }
            if let p = m.protocolConfiguration { o["protocol"] = try p.tunnelgateObject() }
            o["isOnDemandEnabled"] = m.isOnDemandEnabled
            if let rules = m.onDemandRules {
                let problems = rules.enumerated().flatMap { $0.element.tunnelgateProblems(keyPath: "onDemandRules[\($0.offset)]") }
                guard problems.isEmpty else { throw NEVPNError(.configurationInvalid, problems.joined(separator: "\n")) }
                o["onDemandRules"] = rules.map(\.tunnelgatePreference)
            }
            object = o
        }

        /// An entry of the file, checked whole (every value decodes), so that applying it cannot fail.
        /// nil for an object without an identifier (skipped, as before).
        init?(object: [String: Any], keyPath: String) throws(NEVPNError) {
            guard let id = object["identifier"] as? String else { return nil }
            identifier = id
            self.object = object
            _ = try decoded(keyPath: keyPath)
        }

        private func decoded(keyPath: String) throws(NEVPNError)
            -> (protocol: NETunnelProviderProtocol?, rules: [NEOnDemandRule]?) {
            var p: NETunnelProviderProtocol?
            if let po = object["protocol"] {
                guard let o = po as? [String: Any] else {
                    throw NEVPNError(.configurationReadWriteFailed, "\(keyPath).protocol: not an object")
                }
                p = try NEVPNProtocol.tunnelgateDecode(o, keyPath: keyPath + ".protocol")
            }
            var rules: [NEOnDemandRule]?
            if let list = object["onDemandRules"] {
                guard let array = list as? [Any] else {
                    throw NEVPNError(.configurationReadWriteFailed, "\(keyPath).onDemandRules: not an array")
                }
                var out: [NEOnDemandRule] = []
                for (i, item) in array.enumerated() {
                    out.append(try NEOnDemandRule.fromPreference(item, keyPath: "\(keyPath).onDemandRules[\(i)]"))
                }
                rules = out
            }
            return (p, rules)
        }

        func apply(to m: NEVPNManager) {
            m.localizedDescription = object["localizedDescription"] as? String
            m.isEnabled = object["isEnabled"] as? Bool ?? false
            m.isOnDemandEnabled = object["isOnDemandEnabled"] as? Bool ?? false
            // Checked when read (init): new objects for this manager, nothing left to fail.
            let values = try? decoded(keyPath: "")
            m.protocolConfiguration = values?.protocol
            m.onDemandRules = values?.rules
        }
    }

    static func read() throws(NEVPNError) -> [Entry] {
        let file = try path
        let bytes: [UInt8]?
        do throws(SystemCallError) { bytes = try FileSystem.read(file) } catch {
            throw NEVPNError(.configurationReadWriteFailed, "reading \(file): \(error)")
        }
        guard let bytes else { return [] }
        guard let top = (try? JSONSerialization.jsonObject(with: Data(bytes))) as? [String: Any],
              let list = top["managers"] as? [[String: Any]] else {
            throw NEVPNError(.configurationReadWriteFailed, "\(file) is not a preferences file")
        }
        var entries: [Entry] = []
        for (i, object) in list.enumerated() {
            do throws(NEVPNError) {
                if let entry = try Entry(object: object, keyPath: "managers[\(i)]") { entries.append(entry) }
            } catch {
                throw NEVPNError(.configurationReadWriteFailed, "\(file): \(error.message)")
            }
        }
        return entries
    }

    static func update(_ change: (inout [Entry]) -> Void) throws(NEVPNError) {
        try writing.withLock { _ throws(NEVPNError) in
            var entries = try read()
            change(&entries)
            let file = try path
            let data: Data
            do { data = try JSONSerialization.data(withJSONObject: ["managers": entries.map(\.object)], options: [.prettyPrinted, .sortedKeys]) } catch {
                throw NEVPNError(.configurationReadWriteFailed, "encoding the preferences: \(error)")
            }
            do throws(SystemCallError) { try FileSystem.writeAtomically(file, Array(data)) } catch {
                throw NEVPNError(.configurationReadWriteFailed, "writing \(file): \(error)")
            }
        }
    }
}

extension NEVPNManager {
    /// Linux only: use this preferences file instead of the state directory's (tests; nil restores the default).
    public static func tunnelgateSetPreferencesPath(_ path: String?) { NEVPNPreferences.setPath(path) }
}
