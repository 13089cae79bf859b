import Foundation
import Engine
import LinuxSystem
import Synchronization

/// The saved managers: one JSON file, read and rewritten whole (atomically) on each change.
///
///   {"managers": [{"identifier": UUID, "localizedDescription": …, "isEnabled": …,
///                  "protocol": {"providerBundleIdentifier": …, "serverAddress": …, "username": …,
///                               "providerConfiguration": {…}, "interfaceName": "tg0", "arguments": […],
///                               "includeAllNetworks": …, "excludeLocalNetworks": …}}]}
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
            if let p = m.protocolConfiguration {
                var po: [String: Any] = ["includeAllNetworks": p.includeAllNetworks, "excludeLocalNetworks": p.excludeLocalNetworks]
                if let s = p.serverAddress { po["serverAddress"] = s }
                if let u = p.username { po["username"] = u }
                if let t = p as? NETunnelProviderProtocol {
                    if let b = t.providerBundleIdentifier { po["providerBundleIdentifier"] = b }
                    if let c = t.providerConfiguration {
                        guard JSONSerialization.isValidJSONObject(c) else {
                            throw NEVPNError(.configurationInvalid, "providerConfiguration: a value is not representable in JSON")
                        }
                        po["providerConfiguration"] = c
                    }
                    po["interfaceName"] = t.tunnelgateInterfaceName
                    po["arguments"] = t.tunnelgateArguments
                }
                o["protocol"] = po
            }
            object = o
        }

        init?(object: [String: Any]) {
            guard let id = object["identifier"] as? String else { return nil }
            identifier = id
            self.object = object
        }

        func apply(to m: NEVPNManager) {
            m.localizedDescription = object["localizedDescription"] as? String
            m.isEnabled = object["isEnabled"] as? Bool ?? false
            guard let po = object["protocol"] as? [String: Any] else { m.protocolConfiguration = nil; return }
            let p = NETunnelProviderProtocol()
            p.serverAddress = po["serverAddress"] as? String
            p.username = po["username"] as? String
            p.includeAllNetworks = po["includeAllNetworks"] as? Bool ?? false
            p.excludeLocalNetworks = po["excludeLocalNetworks"] as? Bool ?? false
            p.providerBundleIdentifier = po["providerBundleIdentifier"] as? String
            p.providerConfiguration = po["providerConfiguration"] as? [String: Any]
            if let n = po["interfaceName"] as? String { p.tunnelgateInterfaceName = n }
            p.tunnelgateArguments = po["arguments"] as? [String] ?? []
            m.protocolConfiguration = p
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
        return list.compactMap(Entry.init(object:))
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
