import Foundation
import NetworkExtension

/// The seed's provider, written the same way, with what a test needs to observe it:
/// settings from the environment (so the test uses the harness's addresses), a
/// count of the packets read from packetFlow, written to a file after each
/// delivery, and a marker line per stopTunnel call.
///
///   TG_NE_REMOTE     tunnelRemoteAddress (default 198.18.0.10)
///   TG_NE_ADDRESS    the IPv4 address and TG_NE_MASK its subnet mask (default 10.8.0.2, 255.255.255.0)
///   TG_NE_DNS        comma-separated DNS servers (default 10.8.0.1); `none`: no dnsSettings
///   TG_NE_COUNT_FILE where the packet count goes
///   TG_NE_STOP_FILE  gets "stopTunnel REASON" appended on each stopTunnel, "sleep" and "wake" on each
///                    sleep(completionHandler:) and wake()
///   TG_NE_PROXY      HOST:PORT: proxySettings with that HTTP and HTTPS proxy, and
///   TG_NE_PROXY_EXCEPTIONS  comma-separated exceptionList entries
///   TG_NE_START      `never`: startTunnel sets the settings and never calls its completion handler;
///                    `no-settings`: it completes at once without setting any (a later "reapply" sets them)
final class CountingTunnelProvider: NEPacketTunnelProvider, @unchecked Sendable {
    // @unchecked Sendable: `received` is touched only on the flow's one delivery queue.
    private let environment = ProcessInfo.processInfo.environment
    private var received = 0
    private let log = Logger(subsystem: "tunnelgate.example", category: "counting")

    /// The seed's settings; `reapplied` changes the MTU and excludes TG_NE_REAPPLY_EXCLUDE.
    private func settings(reapplied: Bool) -> NEPacketTunnelNetworkSettings {
        let settings = NEPacketTunnelNetworkSettings(tunnelRemoteAddress: environment["TG_NE_REMOTE"] ?? "198.18.0.10")
        settings.mtu = reapplied ? 1280 : 1400
        let ipv4 = NEIPv4Settings(addresses: [environment["TG_NE_ADDRESS"] ?? "10.8.0.2"],
                                  subnetMasks: [environment["TG_NE_MASK"] ?? "255.255.255.0"])
        ipv4.includedRoutes = [NEIPv4Route.default()]
        if reapplied, let excluded = environment["TG_NE_REAPPLY_EXCLUDE"] {
            ipv4.excludedRoutes = [NEIPv4Route(destinationAddress: excluded, subnetMask: "255.255.255.255")]
        }
        settings.ipv4Settings = ipv4
        if environment["TG_NE_DNS"] != "none" {
            settings.dnsSettings = NEDNSSettings(servers: (environment["TG_NE_DNS"] ?? "10.8.0.1").split(separator: ",").map(String.init))
        }
        if let proxy = environment["TG_NE_PROXY"], let colon = proxy.lastIndex(of: ":") {
            let p = NEProxySettings()
            let server = NEProxyServer(address: String(proxy[..<colon]), port: Int(proxy[proxy.index(after: colon)...]) ?? -1)
            p.httpEnabled = true
            p.httpServer = server
            p.httpsEnabled = true
            p.httpsServer = server
            p.exceptionList = environment["TG_NE_PROXY_EXCEPTIONS"].map { $0.split(separator: ",").map(String.init) }
            settings.proxySettings = p
        }
        return settings
    }

    override func startTunnel(options: [String: NSObject]?, completionHandler: @escaping (Error?) -> Void) {
        if environment["TG_NE_START"] == "no-settings" {
            readPackets()
            completionHandler(nil)
            return
        }
        setTunnelNetworkSettings(settings(reapplied: false)) { [weak self] error in
            if let error {
                completionHandler(error)
                return
            }
            self?.readPackets()
            if self?.environment["TG_NE_START"] == "never" {
                self?.note("startTunnel not completing")
                return
            }
            completionHandler(nil)
        }
    }

    private func readPackets() {
        packetFlow.readPacketObjects { [weak self] packets in
            guard let self else { return }
            received += packets.count
            if let path = environment["TG_NE_COUNT_FILE"] {
                try? "\(received)\n".write(toFile: path, atomically: true, encoding: .utf8)
            }
            readPackets()
        }
    }

    private func note(_ text: String) {
        guard let path = environment["TG_NE_STOP_FILE"] else { return }
        let line = Data("\(text)\n".utf8)
        if let handle = FileHandle(forWritingAtPath: path) {
            handle.seekToEndOfFile(); handle.write(line); handle.closeFile()
        } else {
            _ = FileManager.default.createFile(atPath: path, contents: line)
        }
    }

    override func stopTunnel(with reason: NEProviderStopReason, completionHandler: @escaping () -> Void) {
        log.info("stopTunnel: \(reason.rawValue) after \(received) packets")
        note("stopTunnel \(reason.rawValue)")
        completionHandler()
    }

    override func sleep(completionHandler: @escaping () -> Void) {
        note("sleep")
        completionHandler()
    }

    override func wake() {
        note("wake")
    }

    /// "reapply": setTunnelNetworkSettings again while running (MTU 1280, one more
    /// excluded route); "remove": setTunnelNetworkSettings(nil); "reasserting on" / "reasserting off" sets `reasserting`, and
    /// "reasserting" alone reads it ("reasserting true|false"); anything else: the
    /// packet count.
    private func checkPassword(_ guess: [UInt8]) -> String {
        guard let reference = protocolConfiguration.passwordReference else { return "no passwordReference" }
        do {
            let secret = try TunnelgateSecretStore.secret(forReference: reference)
            return secret.withUnsafeBytes { bytes in
                "password of \(bytes.count) bytes: " + (bytes.elementsEqual(guess) ? "it matches" : "it does not match")
            }
        } catch {
            return "password: \(error)"
        }
    }

    private func describeProtocolConfiguration() -> String {
        guard let p = protocolConfiguration as? NETunnelProviderProtocol else { return "not an NETunnelProviderProtocol" }
        var lines = ["serverAddress=\(p.serverAddress ?? "-")", "username=\(p.username ?? "-")",
                     "providerBundleIdentifier=\(p.providerBundleIdentifier ?? "-")"]
        let c = p.providerConfiguration ?? [:]
        for key in c.keys.sorted() {
            switch c[key] {
            case let v as String: lines.append("\(key)=String:\(v)")
            case let v as Date: lines.append("\(key)=Date:\(Int(v.timeIntervalSince1970))")
            case let v as Data: lines.append("\(key)=Data:\(v.map { String(format: "%02x", $0) }.joined())")
            case let v as [Bool]: lines.append("\(key)=[Bool]:\(v)")
            case let v as [String: Any]: lines.append("\(key)=Dictionary:\(v.keys.sorted())")
            case let v as NSNumber: lines.append("\(key)=Number:\(v)")
            case let v?: lines.append("\(key)=\(type(of: v))")
            case nil: break
            }
        }
        return lines.joined(separator: "\n")
    }

    override func handleAppMessage(_ messageData: Data, completionHandler: ((Data?) -> Void)?) {
        let text = String(decoding: messageData, as: UTF8.self)
        // "cancel DOMAIN CODE TEXT": ends the tunnel with that NSError, as a provider does when its
        // server goes away for good (what fetchLastDisconnectError then returns).
        if text.hasPrefix("cancel ") {
            let parts = text.split(separator: " ", maxSplits: 3).map(String.init)
            guard parts.count == 4, let code = Int(parts[2]) else {
                completionHandler?(Data("usage: cancel DOMAIN CODE TEXT".utf8))
                return
            }
            completionHandler?(Data("cancelling".utf8))
            cancelTunnelWithError(NSError(domain: parts[1], code: code, userInfo: [NSLocalizedDescriptionKey: parts[3]]))
            return
        }
        // "protocol": what this provider reads of its own protocolConfiguration, one key=value a line.
        // "password-is GUESS": whether the secret protocolConfiguration.passwordReference names is GUESS
        // (the reply never holds the secret): what a provider reads to log in to its server.
        if text.hasPrefix("password-is ") {
            completionHandler?(Data(checkPassword(Array(text.utf8.dropFirst(12))).utf8))
            return
        }
        // "read PATH": what a provider that tries to read a file itself gets (the secret store's, say).
        if text.hasPrefix("read ") {
            let path = String(text.dropFirst(5))
            if let data = FileManager.default.contents(atPath: path) {
                completionHandler?(Data("read \(data.count) bytes".utf8))
            } else {
                completionHandler?(Data("unreadable".utf8))
            }
            return
        }
        // "path": NEProvider.defaultPath as the host reports it (the carrier path).
        if text == "path" {
            completionHandler?(Data("defaultPath \(defaultPath.map { "\($0.status.rawValue) \($0)" } ?? "nil")".utf8))
            return
        }
        if text == "protocol" {
            completionHandler?(Data(describeProtocolConfiguration().utf8))
            return
        }
        if text.hasPrefix("reasserting") {
            if text == "reasserting on" { reasserting = true }
            if text == "reasserting off" { reasserting = false }
            completionHandler?(Data("reasserting \(reasserting)".utf8))
            return
        }
        if text == "remove" {
            setTunnelNetworkSettings(nil) { error in
                completionHandler?(Data((error.map { "remove failed: \($0.localizedDescription)" } ?? "removed").utf8))
            }
            return
        }
        guard text == "reapply" else {
            completionHandler?(Data("received \(received)".utf8))
            return
        }
        setTunnelNetworkSettings(settings(reapplied: true)) { error in
            completionHandler?(Data((error.map { "reapply failed: \($0.localizedDescription)" } ?? "reapplied").utf8))
        }
    }
}
