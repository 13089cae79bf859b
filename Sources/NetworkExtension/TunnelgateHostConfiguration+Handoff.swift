import Foundation
import LinuxSystem
import Synchronization

/// What a manager's `startVPNTunnel` hands the provider host it spawns: the host's configuration
/// (interface name, includeAllNetworks, excludeLocalNetworks), the server address, the saved
/// `providerConfiguration` and the start options.
///
/// Not through the environment: a process's environment is copied into everything it starts, stays
/// in its initial environment block for its whole life, and is what crash reporters, `ps e` and
/// container tools show; a providerConfiguration may hold a credential. The manager writes it as
/// JSON into a sealed anonymous file (`SealedFile`: a memfd nobody can change once written, on no
/// disk) and the host finds it as its descriptor 3, reads it once and closes it.
public struct TunnelgateHostHandoff: Sendable {
    public var configuration: TunnelgateHostConfiguration
    /// NEVPNProtocol.serverAddress (informational, as on iOS).
    public var serverAddress: String?
    /// NETunnelProviderProtocol.providerConfiguration as JSON, as the manager saved it.
    var providerConfigurationJSON: String?
    /// startVPNTunnel(options:)'s strings and numbers as JSON.
    var startOptionsJSON: String?
    /// The manager's whole NETunnelProviderProtocol (`tunnelgateEncoded()`, property-list types
    /// kept): what the provider reads as `protocolConfiguration`.
    var protocolConfigurationJSON: String?

    /// The host's descriptor the manager puts it at.
    public static let descriptor: Int32 = 3
    /// The memfd's name (/proc shows `/memfd:tunnelgate-host-configuration`).
    public static let fileName = "tunnelgate-host-configuration"
    static let limit = 1 << 20

    public init(configuration: TunnelgateHostConfiguration, serverAddress: String? = nil,
                providerConfigurationJSON: String? = nil, startOptionsJSON: String? = nil,
                protocolConfigurationJSON: String? = nil) {
        self.configuration = configuration
        self.serverAddress = serverAddress
        self.providerConfigurationJSON = providerConfigurationJSON
        self.startOptionsJSON = startOptionsJSON
        self.protocolConfigurationJSON = protocolConfigurationJSON
    }

    /// The providerConfiguration, as the host's provider reads it.
    public var providerConfiguration: [String: Any]? {
        providerConfigurationJSON.flatMap { (try? JSONSerialization.jsonObject(with: Data($0.utf8))) as? [String: Any] }
    }

    /// The start options as `run(_:options:)` takes them (strings as NSString, numbers as NSNumber).
    public var startOptions: [String: NSObject]? {
        guard let json = startOptionsJSON,
              let object = (try? JSONSerialization.jsonObject(with: Data(json.utf8))) as? [String: Any] else { return nil }
        var out: [String: NSObject] = [:]
        for (key, value) in object {
            if let s = value as? String { out[key] = NSString(string: s) } else if let n = value as? NSNumber { out[key] = n }
        }
        return out
    }

    // MARK: The file

    func encoded() -> [UInt8] {
        var object: [String: Any] = ["interfaceName": configuration.interfaceName,
                                     "includeAllNetworks": configuration.includeAllNetworks,
                                     "excludeLocalNetworks": configuration.excludeLocalNetworks]
        if !configuration.carrierEndpoints.isEmpty { object["carrierEndpoints"] = configuration.carrierEndpoints }
        if let serverAddress { object["serverAddress"] = serverAddress }
        if let providerConfigurationJSON { object["providerConfiguration"] = providerConfigurationJSON }
        if let startOptionsJSON { object["startOptions"] = startOptionsJSON }
        if let protocolConfigurationJSON { object["protocol"] = protocolConfigurationJSON }
        let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) ?? Data("{}".utf8)
        return Array(data)
    }

    static func decode(_ bytes: [UInt8]) -> TunnelgateHostHandoff? {
        guard let o = (try? JSONSerialization.jsonObject(with: Data(bytes))) as? [String: Any] else { return nil }
        var c = TunnelgateHostConfiguration()
        if let name = o["interfaceName"] as? String, !name.isEmpty { c.interfaceName = name }
        c.includeAllNetworks = o["includeAllNetworks"] as? Bool ?? false
        c.excludeLocalNetworks = o["excludeLocalNetworks"] as? Bool ?? false
        c.carrierEndpoints = o["carrierEndpoints"] as? [String] ?? []
        return TunnelgateHostHandoff(configuration: c, serverAddress: o["serverAddress"] as? String,
                                     providerConfigurationJSON: o["providerConfiguration"] as? String,
                                     startOptionsJSON: o["startOptions"] as? String,
                                     protocolConfigurationJSON: o["protocol"] as? String)
    }

    /// The manager's side: a sealed file holding this handoff, to pass as the host's descriptor 3.
    public func makeDescriptor() throws(SystemCallError) -> FileDescriptor {
        try SealedFile.make(name: Self.fileName, contents: encoded())
    }

    /// The host's side: the handoff at `descriptor` when it is one (a sealed file of that name), which
    /// is then closed; nil, and the descriptor left alone, when it is not (a host started by hand).
    public static func take(from descriptor: FileDescriptor) -> TunnelgateHostHandoff? {
        guard let bytes = SealedFile.read(descriptor, named: fileName, limit: limit),
              let handoff = decode(bytes) else { return nil }
        descriptor.close()
        return handoff
    }

    /// The handoff this process was started with, read once from descriptor 3 (then closed, so nothing
    /// the provider starts inherits it); nil when no manager started it. In a provider's packet plane
    /// (the sandboxed process the host's engine starts) it is what the engine forwarded: the first
    /// message on the plane's channel.
    public static var current: TunnelgateHostHandoff? {
        storage.withLock { stored in
            if let stored { return stored }
            let handoff = ProviderPlane.isPlane ? ProviderPlane.receiveHandoff() : readAtStart()
            stored = .some(handoff)
            return handoff
        }
    }

    private static let storage = Mutex<TunnelgateHostHandoff??>(nil)

    private static func readAtStart() -> TunnelgateHostHandoff? {
        let handoff = take(from: FileDescriptor(rawValue: descriptor))
        if handoff == nil {
            let ignored = ["TUNNELGATE_INTERFACE_NAME", "TUNNELGATE_INCLUDE_ALL_NETWORKS", "TUNNELGATE_EXCLUDE_LOCAL_NETWORKS",
                           "TUNNELGATE_PROVIDER_CONFIGURATION", "TUNNELGATE_START_OPTIONS", "TUNNELGATE_SERVER_ADDRESS"]
                .filter { ProcessControl.environmentValue($0) != nil }
            if !ignored.isEmpty {
                FileHandle.standardError.write(Data(("tunnelgate-provider: ignoring \(ignored.joined(separator: ", ")) in the environment: "
                    + "a manager hands the host its configuration on descriptor 3, never in the environment (docs/networkextension.md)\n").utf8))
            }
        }
        return handoff
    }

    /// The handoff as JSON, to forward to a packet plane.
    var json: String { String(decoding: encoded(), as: UTF8.self) }

    /// A handoff from its JSON (what a packet plane was forwarded).
    static func decode(json: String) -> TunnelgateHostHandoff? { decode(Array(json.utf8)) }
}

extension TunnelgateHostConfiguration {
    /// The configuration the manager's `startVPNTunnel` handed over (`TunnelgateHostHandoff.current`),
    /// or the defaults (interface `tg0`) when no manager started this process. A host written for the
    /// manager starts with `TunnelgateProviderHost(configuration: .fromManager())`.
    public static func fromManager() -> TunnelgateHostConfiguration {
        TunnelgateHostHandoff.current?.configuration ?? TunnelgateHostConfiguration()
    }

    /// startVPNTunnel(options:)'s options as the host's `run(_:options:)` takes them (strings as
    /// NSString, numbers as NSNumber), or nil when none were given.
    public static func startOptionsFromManager() -> [String: NSObject]? {
        TunnelgateHostHandoff.current?.startOptions
    }

    /// NETunnelProviderProtocol.providerConfiguration as the manager saved it.
    public static func providerConfigurationFromManager() -> [String: Any]? {
        TunnelgateHostHandoff.current?.providerConfiguration
    }
}
