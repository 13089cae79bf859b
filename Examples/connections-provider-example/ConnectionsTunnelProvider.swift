import Foundation
import NetworkExtension

// A provider that reaches its servers as iOS providers do: over createTCPConnection with TLS and over
// createUDPSession, their `state` watched with key-value observing, written as iOS code is (nothing
// here is Linux-only but where the results go: TG_CONN_LOG, a file the test reads).
//
// TG_CONN_TLS: "HOST:PORT" ("[IPV6]:PORT") servers to reach with TLS, comma-separated; each gets "hello tunnelgate\n"
// and its first line back is logged (the test's server answers it reversed). TG_CONN_UDP: "HOST:PORT"
// UDP echo servers, comma-separated, each sent three datagrams at once. TG_CONN_SERVER: tunnelRemoteAddress.
final class ConnectionsTunnelProvider: NEPacketTunnelProvider {
    private var connections: [NWTCPConnection] = []
    private var sessions: [NWUDPSession] = []
    private var observations: [NSKeyValueObservation] = []
    private let lock = NSLock()
    private var stateContext = 0
    private var viableContext = 0

    private func log(_ line: String) {
        let env = ProcessInfo.processInfo.environment
        guard let path = env["TG_CONN_LOG"] else { return }
        lock.lock(); defer { lock.unlock() }
        if let handle = FileHandle(forWritingAtPath: path) {
            handle.seekToEndOfFile()
            handle.write(Data((line + "\n").utf8))
            handle.closeFile()
        } else {
            FileManager.default.createFile(atPath: path, contents: Data((line + "\n").utf8))
        }
    }

    /// "HOST:PORT" or "[IPV6]:PORT".
    private func endpoint(_ text: String) -> NWHostEndpoint {
        guard let colon = text.lastIndex(of: ":") else { return NWHostEndpoint(hostname: text, port: "") }
        var host = String(text[..<colon])
        if host.hasPrefix("[") && host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        return NWHostEndpoint(hostname: host, port: String(text[text.index(after: colon)...]))
    }

    override func startTunnel(options: [String: NSObject]?, completionHandler: @escaping (Error?) -> Void) {
        let env = ProcessInfo.processInfo.environment
        let settings = NEPacketTunnelNetworkSettings(tunnelRemoteAddress: env["TG_CONN_SERVER"] ?? "198.18.0.10")
        let ipv4 = NEIPv4Settings(addresses: ["10.8.0.2"], subnetMasks: ["255.255.255.0"])
        ipv4.includedRoutes = [NEIPv4Route.default()]
        settings.ipv4Settings = ipv4
        // The tunnel's DNS: the provider's own connections must not use it.
        settings.dnsSettings = NEDNSSettings(servers: ["10.8.0.53"])
        setTunnelNetworkSettings(settings) { [self] error in
            if let error {
                completionHandler(error)
                return
            }
            for target in (env["TG_CONN_TLS"] ?? "").split(separator: ",").map(String.init) {
                let c = createTCPConnection(to: endpoint(target), enableTLS: true, tlsParameters: nil, delegate: nil)
                lock.lock(); connections.append(c); lock.unlock()
                c.addObserver(self, forKeyPath: "isViable", options: [.new], context: &viableContext)
                c.addObserver(self, forKeyPath: "state", options: [.initial, .new, .old], context: &stateContext)
            }
            for target in (env["TG_CONN_UDP"] ?? "").split(separator: ",").map(String.init) {
                let s = createUDPSession(to: endpoint(target), from: nil)
                sessions.append(s)
                observations.append(s.observe(\.state, options: [.initial, .new]) { [weak self] s, change in
                    guard let self, let state = change.newValue else { return }
                    self.log("udp \(s.endpoint) state \(state.rawValue)")
                    if state == .ready {
                        s.setReadHandler({ datagrams, error in
                            for d in datagrams ?? [] { self.log("udp \(s.endpoint) echo \(String(decoding: d, as: UTF8.self))") }
                            if let error { self.log("udp \(s.endpoint) read error \(error.localizedDescription)") }
                        }, maxDatagrams: 16)
                        s.writeMultipleDatagrams([Data("one".utf8), Data("two".utf8), Data("three".utf8)]) { error in
                            self.log("udp \(s.endpoint) written \(error.map { $0.localizedDescription } ?? "ok")")
                        }
                    }
                })
            }
            completionHandler(nil)
        }
    }

    override func observeValue(forKeyPath keyPath: String?, of object: Any?, change: [NSKeyValueChangeKey: Any]?,
                               context: UnsafeMutableRawPointer?) {
        guard let connection = object as? NWTCPConnection else { return }
        if context == &viableContext {
            log("tcp \(connection.endpoint) isViable \((change?[.newKey] as? NSNumber)?.boolValue ?? false)")
            return
        }
        guard context == &stateContext, keyPath == "state" else { return }
        let new = (change?[.newKey] as? NSNumber)?.intValue ?? -1
        let old = (change?[.oldKey] as? NSNumber)?.intValue
        log("tcp \(connection.endpoint) state \(old.map(String.init) ?? "initial")->\(new)")
        switch NWTCPConnectionState(rawValue: new) {
        case .connected:
            log("tcp \(connection.endpoint) remote \(connection.remoteAddress?.description ?? "none") viable \(connection.isViable)")
            connection.write(Data("hello tunnelgate\n".utf8)) { error in
                if let error { self.log("tcp \(connection.endpoint) write error \(error.localizedDescription)") }
            }
            connection.readMinimumLength(1, maximumLength: 4096) { data, error in
                if let data {
                    self.log("tcp \(connection.endpoint) reply \(String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines))")
                }
                if let error { self.log("tcp \(connection.endpoint) read error \(error.localizedDescription)") }
                connection.writeClose()
            }
        case .disconnected:
            let e = connection.error as NSError?
            log("tcp \(connection.endpoint) error \(e.map { "\($0.domain) \($0.code): \($0.localizedDescription)" } ?? "none")")
            connection.removeObserver(self, forKeyPath: "state")
        default:
            break
        }
    }

    override func stopTunnel(with reason: NEProviderStopReason, completionHandler: @escaping () -> Void) {
        lock.lock(); let all = connections; lock.unlock()
        for c in all { c.cancel() }
        for s in sessions { s.cancel() }
        for o in observations { o.invalidate() }
        completionHandler()
    }
}
