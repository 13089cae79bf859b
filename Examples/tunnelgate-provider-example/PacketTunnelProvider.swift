// The provider of /work/shared/seeds/003 ("How to Build a Network Extension in SwiftUI"), as written for
// iOS. Changes for Linux (docs/networkextension.md): the line `import os.log` is removed; `Logger` comes
// from OSLogShim.swift in this target. Nothing else differs.
// ─── PacketTunnelProvider.swift (Extension target) ───────────────────────
import NetworkExtension

private let log = Logger(subsystem: "com.example.app.tunnel", category: "provider")

final class PacketTunnelProvider: NEPacketTunnelProvider, @unchecked Sendable {

    private var tunnelFileDescriptor: Int32 = -1

    // 1. Called by the system when the VPN should connect
    override func startTunnel(
        options: [String: NSObject]?,
        completionHandler: @escaping (Error?) -> Void
    ) {
        log.info("startTunnel called")

        // Build the tunnel network settings
        let settings = NEPacketTunnelNetworkSettings(tunnelRemoteAddress: "198.51.100.1")
        settings.mtu = 1400

        let ipv4 = NEIPv4Settings(addresses: ["10.8.0.2"], subnetMasks: ["255.255.255.0"])
        ipv4.includedRoutes = [NEIPv4Route.default()]
        settings.ipv4Settings = ipv4

        let dns = NEDNSSettings(servers: ["1.1.1.1", "8.8.8.8"])
        settings.dnsSettings = dns

        // Apply settings, then signal success
        setTunnelNetworkSettings(settings) { [weak self] error in
            if let error {
                completionHandler(error)
                return
            }
            self?.startReadingPackets()
            completionHandler(nil)
        }
    }

    // 2. Read packets from the virtual tun interface and forward them
    private func startReadingPackets() {
        packetFlow.readPacketObjects { packets in
            for packet in packets {
                // Forward packet.data over your real transport here
                _ = packet.data
            }
            self.startReadingPackets() // re-arm
        }
    }

    // 3. Called when the VPN should disconnect
    override func stopTunnel(
        with reason: NEProviderStopReason,
        completionHandler: @escaping () -> Void
    ) {
        log.info("stopTunnel: \(reason.rawValue)")
        completionHandler()
    }

    // 4. Handle messages sent from the container app
    override func handleAppMessage(
        _ messageData: Data,
        completionHandler: ((Data?) -> Void)?
    ) {
        let reply = "ACK".data(using: .utf8)
        completionHandler?(reply)
    }
}
