import NetworkExtension
import os.log

// A provider written as an iOS one is: it logs with os.log's Logger (privacy as on iOS) and reads its
// own configuration from protocolConfiguration. Its settings come from providerConfiguration:
// "address" (IPv4, /24), "mtu"; "token" is a credential it logs (redacted) and never sends anywhere.
final class ConfigurationTunnelProvider: NEPacketTunnelProvider, @unchecked Sendable {
    private let log = Logger(subsystem: "com.example.tunnelgate.os", category: "provider")

    override func startTunnel(options: [String: NSObject]?, completionHandler: @escaping (Error?) -> Void) {
        guard let proto = protocolConfiguration as? NETunnelProviderProtocol else {
            log.fault("protocolConfiguration is not an NETunnelProviderProtocol")
            completionHandler(NEVPNError(.configurationInvalid))
            return
        }
        let configuration = proto.providerConfiguration ?? [:]
        let server = proto.serverAddress ?? "198.18.0.1"
        let token = configuration["token"] as? String ?? ""
        let mtu = configuration["mtu"] as? Int ?? 1400
        log.notice("starting for server \(server, privacy: .public) with token \(token) mtu \(mtu)")
        log.debug("debug lines are not written unless OS_ACTIVITY_MODE=debug")
        guard let address = configuration["address"] as? String else {
            log.error("providerConfiguration has no address")
            completionHandler(NEVPNError(.configurationInvalid, userInfo: [NSLocalizedDescriptionKey: "providerConfiguration.address is missing"]))
            return
        }
        let settings = NEPacketTunnelNetworkSettings(tunnelRemoteAddress: server)
        settings.ipv4Settings = NEIPv4Settings(addresses: [address], subnetMasks: ["255.255.255.0"])
        settings.mtu = NSNumber(value: mtu)
        setTunnelNetworkSettings(settings) { [log] error in
            if let error {
                log.error("settings refused: \(error.localizedDescription, privacy: .public)")
            } else {
                os_log("tunnel up with %{public}@ on %{public}@, token %@", log: OSLog(subsystem: "com.example.tunnelgate.os", category: "legacy"),
                       type: .info, address, proto.tunnelgateInterfaceName, token)
            }
            completionHandler(error)
        }
    }

    override func stopTunnel(with reason: NEProviderStopReason, completionHandler: @escaping () -> Void) {
        log.notice("stopTunnel(\(reason.rawValue))")
        completionHandler()
    }

    /// "config": what the provider sees in protocolConfiguration, as JSON (never the token).
    override func handleAppMessage(_ messageData: Data, completionHandler: ((Data?) -> Void)?) {
        let proto = protocolConfiguration as? NETunnelProviderProtocol
        let configuration = proto?.providerConfiguration ?? [:]
        let seen: [String: Any] = [
            "serverAddress": proto?.serverAddress ?? NSNull(),
            "interfaceName": proto?.tunnelgateInterfaceName ?? NSNull(),
            "includeAllNetworks": proto?.includeAllNetworks ?? false,
            "configurationKeys": configuration.keys.sorted(),
            "mtu": configuration["mtu"] as? Int ?? NSNull(),
            "hasToken": configuration["token"] is String,
        ]
        completionHandler?(try? JSONSerialization.data(withJSONObject: seen, options: [.sortedKeys]))
    }
}
