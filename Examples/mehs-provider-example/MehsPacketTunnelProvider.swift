// The provider of the MEHS iOS embedding guide (shared/seeds/000), compiled on
// Linux against Tunnelgate's NetworkExtension. Changes from the guide, each
// marked "Linux:" below and listed in docs/networkextension.md:
//   1. addresses come from the environment (the test's namespaces), not the
//      guide's sample 198.51.100.10 / 1.1.1.1;
//   2. startMehsRuntime, left as comments in the guide, is written out as the
//      comments say (arguments, secret, writer, wait for status.interface);
//   3. handleAppMessage answers with mehs_runtime_status, so tests can read the
//      runtime's counters;
//   4. `import Darwin` dropped (PacketWriter.swift): Foundation brings AF_INET.
import NetworkExtension
import Foundation
import MEHSClient

final class MehsPacketTunnelProvider: NEPacketTunnelProvider, @unchecked Sendable {
    private var runtime: OpaquePointer?
    private let mtu = 1400
    // Linux: the environment names the server and the runtime's arguments.
    private let environment = ProcessInfo.processInfo.environment

    override func startTunnel(options: [String: NSObject]? = nil,
                              completionHandler: @escaping (Error?) -> Void) {
        let server = environment["TG_MEHS_SERVER"] ?? "198.18.0.10"   // Linux: the guide's 198.51.100.10
        let settings = NEPacketTunnelNetworkSettings(tunnelRemoteAddress: server)
        let ipv4 = NEIPv4Settings(addresses: ["198.18.0.1"],
                                  subnetMasks: ["255.255.0.0"])
        ipv4.includedRoutes = [NEIPv4Route.default()]
        let carrierIPv4 = [server] // Replace with resolved endpoint IPs.
        ipv4.excludedRoutes = carrierIPv4.map {
            NEIPv4Route(destinationAddress: $0, subnetMask: "255.255.255.255")
        }
        settings.ipv4Settings = ipv4
        let ipv6 = NEIPv6Settings(addresses: ["fd77:6d65:6873::1"],
                                  networkPrefixLengths: [64])
        ipv6.includedRoutes = [NEIPv6Route.default()]
        let carrierIPv6 = [String]() // Add resolved IPv6 endpoint IPs, if any.
        ipv6.excludedRoutes = carrierIPv6.map {
            NEIPv6Route(destinationAddress: $0, networkPrefixLength: 128)
        }
        settings.ipv6Settings = ipv6
        settings.dnsSettings = NEDNSSettings(servers: [environment["TG_MEHS_DNS"] ?? "198.18.0.2"]) // Linux: not 1.1.1.1
        settings.mtu = NSNumber(value: mtu)

        setTunnelNetworkSettings(settings) { [weak self] error in
            guard let self, error == nil else {
                completionHandler(error)
                return
            }
            do {
                try self.startMehsRuntime()
                self.readPackets()
                completionHandler(nil)
            } catch {
                completionHandler(error)
            }
        }
    }

    struct RuntimeError: Error, CustomStringConvertible {
        let description: String
    }

    private func startMehsRuntime() throws {
        // Linux: written out as the guide's comments describe. Arguments are the
        // runtime's own plus "--tun-mtu"; no --tun-fd; the secret goes separately.
        let own = (environment["TG_MEHS_ARGS"] ?? "").split(separator: " ").map(String.init)
        let args = own + ["--tun-mtu", String(mtu)]
        let argsJSON = String(decoding: try JSONSerialization.data(withJSONObject: args), as: UTF8.self)
        var secret = ""
        if let path = environment["TG_MEHS_SECRET_FILE"] {
            secret = try String(contentsOfFile: path, encoding: .utf8).trimmingCharacters(in: .newlines)
        }
        var error = [CChar](repeating: 0, count: 512)
        var errorLength = 0
        var handle: OpaquePointer?
        let rc = mehs_ios_runtime_start(argsJSON, secret, mehs_packet_write,
                                        Unmanaged.passUnretained(self).toOpaque(),
                                        &handle, &error, error.count, &errorLength)
        guard rc == MEHS_OK, let handle else {
            throw RuntimeError(description: "mehs_ios_runtime_start: \(String(cString: error))")
        }
        runtime = handle
        // The FFI start returns before adapter initialization: wait for status.interface.
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline {
            if let status = status(), status["interface"] is String { return }
            Thread.sleep(forTimeInterval: 0.01)
        }
        throw RuntimeError(description: "the MEHS runtime did not report an interface within 10 s")
    }

    private func status() -> [String: Any]? {
        guard let runtime else { return nil }
        var json = [CChar](repeating: 0, count: 4096)
        var length = 0
        guard mehs_runtime_status(runtime, &json, json.count, &length) == MEHS_OK else { return nil }
        return (try? JSONSerialization.jsonObject(with: Data(String(cString: json).utf8))) as? [String: Any]
    }

    private func readPackets() {
        packetFlow.readPackets { [weak self] packets, _ in
            guard let self, let runtime = self.runtime else { return }
            for index in packets.indices {
                let packet = packets[index]
                let result = packet.withUnsafeBytes { bytes in
                    mehs_ios_runtime_packet_in(runtime,
                                               bytes.bindMemory(to: UInt8.self).baseAddress,
                                               packet.count)
                }
                if result == MEHS_QUEUE_FULL {
                    // Keep this packet and the remaining packets, retrying
                    // them after the bounded queue has drained.
                    self.retryPackets(Array(packets[index...]))
                    return
                }
                guard result == MEHS_OK else {
                    return
                }
            }
            self.readPackets()
        }
    }

    private func retryPackets(_ packets: [Data], startingAt start: Int = 0) {
        DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(5)) { [weak self] in
            guard let self, let runtime = self.runtime else { return }
            for index in start..<packets.count {
                let packet = packets[index]
                let result = packet.withUnsafeBytes { bytes in
                    mehs_ios_runtime_packet_in(runtime,
                                               bytes.bindMemory(to: UInt8.self).baseAddress,
                                               packet.count)
                }
                if result == MEHS_QUEUE_FULL {
                    self.retryPackets(packets, startingAt: index)
                    return
                }
                guard result == MEHS_OK else { return }
            }
            self.readPackets()
        }
    }

    override func stopTunnel(with reason: NEProviderStopReason,
                             completionHandler: @escaping () -> Void) {
        if let runtime {
            mehs_runtime_stop(runtime)
            self.runtime = nil
        }
        if let path = environment["TG_MEHS_STOP_FILE"] {   // Linux: for the test, as in the counting provider
            _ = FileManager.default.createFile(atPath: path, contents: Data("stopTunnel \(reason.rawValue)\n".utf8))
        }
        completionHandler()
    }

    // Linux: the runtime's status for `tunnelgate message NAME status`.
    override func handleAppMessage(_ messageData: Data, completionHandler: ((Data?) -> Void)?) {
        guard let status = status(), let data = try? JSONSerialization.data(withJSONObject: status) else {
            completionHandler?(nil)
            return
        }
        completionHandler?(data)
    }
}
