import Foundation
import LinuxSystem
import PlaneProtocol
import RuntimeABI
import Synchronization

/// A provider's packet plane: the sandboxed, unprivileged process the host's engine starts (its own
/// executable again, with the same arguments) in which the provider class actually runs, as an iOS
/// packet-tunnel provider runs in its extension's process. It holds no privilege: setTunnelNetworkSettings
/// is a request to the engine over the plane's channel (descriptor 3), answered with nil or an error,
/// and with the TUN's descriptor when the engine made one; packetFlow reads and writes that TUN here.
/// The engine asks for stopTunnel and app messages over the same channel.
final class ProviderPlane: NEProviderSystem, @unchecked Sendable {
    // @unchecked Sendable: `pending` is a Mutex, the provider is called on `providerQueue` only, the
    // channel is received from on the thread that runs `run`.
    static let marker = "TUNNELGATE_PROVIDER_PLANE"

    /// True in a provider's packet plane (the engine sets the marker in the plane's otherwise empty
    /// environment).
    static var isPlane: Bool { ProcessControl.environmentValue(marker) == "1" }

    // nonisolated(unsafe): received from by one thread only (run, or the handoff before it); sends are
    // whole datagrams, which the kernel keeps apart.
    nonisolated(unsafe) static let channel = ChannelEndpoint<PlaneMessage, EngineMessage>(SeqPacketChannel(FileDescriptor(rawValue: 3)))

    /// The engine's first message: the manager's handoff (or none). Waits up to 10 s.
    static func receiveHandoff() -> TunnelgateHostHandoff? {
        let deadline = ProcessControl.monotonicSeconds() + 10
        while ProcessControl.monotonicSeconds() < deadline {
            if case .message(.provider(let handoff, let secrets), let tail, _)? = try? channel.receive() {
                keepSecrets(secrets, from: tail)
                return handoff.flatMap { TunnelgateHostHandoff.decode(json: $0.text) }
            }
            _ = try? Poll.readable(channel.descriptor, timeoutMilliseconds: 100)
        }
        return nil
    }

    /// The secrets the engine read for the protocol's passwordReference and identityReference, by
    /// reference, in secure memory: what `TunnelgateSecretStore.secret(forReference:)` answers here.
    static let handedSecrets = Mutex<[[UInt8]: SecureBytes]>([:])

    /// Copies the message's secrets out of its tail (valid only until the next receive) into secure
    /// memory; parts that do not fit the tail are dropped, with the rest.
    private static func keepSecrets(_ parts: [ProviderSecret], from tail: UnsafeRawBufferPointer) {
        var offset = 0
        for part in parts {
            guard part.count >= 0, offset + part.count <= tail.count,
                  let copy = try? SecureBytes(copying: UnsafeRawBufferPointer(rebasing: tail[offset..<(offset + part.count)])) else { return }
            handedSecrets.withLock { $0[part.reference] = copy }
            offset += part.count
        }
    }

    private let providerQueue = DispatchQueue(label: "tunnelgate.provider")
    /// setTunnelNetworkSettings calls waiting for the engine's answer: the completion, and whether the
    /// call removes the settings (nil).
    private let pending = Mutex<[UInt64: (completion: @Sendable ((any Error)?) -> Void, removes: Bool)]>([:])
    /// The TUN packetFlow reads and writes (the engine's descriptor); received on the `run` thread only.
    private var tun: FileDescriptor?
    private let nextID = Atomic<UInt64>(1)
    private let cancelled = Atomic<Bool>(false)
    private let startFailed = Atomic<Bool>(false)
    private let reasserting = Atomic<Bool>(false)
    private let interfaceName: String
    private let log: @Sendable (String) -> Void

    init(interfaceName: String, log: @escaping @Sendable (String) -> Void) {
        self.interfaceName = interfaceName
        self.log = log
    }

    /// What the engine hears from the plane at least once a second, and at once when `reasserting`
    /// changes: the provider's state (ready, or reconnecting while it reasserts). A plane that stops
    /// sending it is taken for hung.
    private func report() {
        let r = reasserting.load(ordering: .acquiring)
        let phase: RuntimeState.Phase = r ? .reconnecting : .ready
        let json = "{\"state\":\"\(phase.rawValue)\",\"provider\":true,\"reasserting\":\(r)}"
        send(.state(PlaneReport(state: RuntimeState(phase: phase, interface: interfaceName, json: json), counters: PacketCounters())))
    }

    private func send(_ message: PlaneMessage, descriptors: [FileDescriptor] = []) {
        do throws(SystemCallError) { try Self.channel.send(message, descriptors: descriptors) } catch {
            log("the channel to the engine: \(error)")
        }
    }

    /// Runs the provider until the engine says stop, the provider cancels, or the engine goes.
    func run(_ provider: NEPacketTunnelProvider, options: [String: NSObject]?) -> Int32 {
        provider.system = self
        // The carrier resolver keeps the namespace's nameservers now, before any settings of the
        // tunnel's can rewrite resolv.conf (CarrierResolver).
        CarrierResolver.snapshot()
        nonisolated(unsafe) let options = options
        providerQueue.async { [self] in
            provider.startTunnel(options: options) { [self] error in
                if error != nil { startFailed.store(true, ordering: .releasing) }
                send(.started(error: error.map(Self.providerError)))
            }
        }
        var nextReport = ProcessControl.monotonicSeconds()
        while true {
            if ProcessControl.monotonicSeconds() >= nextReport {
                report()
                nextReport = ProcessControl.monotonicSeconds() + 1
            }
            if cancelled.load(ordering: .acquiring) || startFailed.load(ordering: .acquiring) {
                provider.packetFlow.close()
                return 1
            }
            let event: ChannelEndpoint<PlaneMessage, EngineMessage>.Event?
            do throws(SystemCallError) { event = try Self.channel.receive() } catch {
                log("the channel to the engine: \(error)")
                provider.packetFlow.close()
                return 1
            }
            guard let event else {
                _ = try? Poll.readable(Self.channel.descriptor, timeoutMilliseconds: 100)
                continue
            }
            switch event {
            case .closed:
                provider.packetFlow.close()
                return 1
            case .garbage(let why):
                log("garbage from the engine: \(why)")
            case .message(.applied(let id, let error, let code), _, let fds):
                let request = pending.withLock { $0.removeValue(forKey: id) }
                if let new = fds.first {
                    // New settings made a new TUN: packetFlow moves to it, the old one is closed.
                    provider.packetFlow.unbind()
                    tun?.close()
                    tun = new
                    provider.packetFlow.bind(new)
                } else if error == nil, request?.removes == true, let old = tun {
                    // The settings are gone, and the TUN with them.
                    provider.packetFlow.unbind()
                    old.close()
                    tun = nil
                }
                for extra in fds.dropFirst() { extra.close() }
                let completion = request?.completion
                let result: NSError? = error.map {
                    TunnelgateProviderHost.error(NETunnelProviderError(rawValue: code ?? 0) ?? .networkSettingsFailed, $0)
                }
                providerQueue.async { completion?(result) }
            case .message(.message(let id, let data), _, let fds):
                for fd in fds { fd.close() }
                // The manager saved a new protocol while the tunnel runs (NEVPNConnection.update): the
                // host's, not the provider's handleAppMessage.
                let marker = Array(NEVPNConnection.protocolUpdateMarker)
                if data.starts(with: marker) {
                    let answer: String
                    do throws(NEVPNError) {
                        try provider.tunnelgateDeliverProtocolConfiguration(encoded: Array(data.dropFirst(marker.count)))
                        answer = "ok"
                    } catch {
                        answer = "refused: \(error.localizedDescription)"
                    }
                    send(.reply(id: id, data: Array(answer.utf8), error: nil))
                    continue
                }
                providerQueue.async { [self] in
                    provider.handleAppMessage(Data(data)) { [self] reply in
                        send(.reply(id: id, data: reply.map { Array($0) }, error: nil))
                    }
                }
            case .message(.path(let satisfied), _, let fds):
                for fd in fds { fd.close() }
                provider.tunnelgateState.setDefaultPath(NWPath(status: satisfied ? .satisfied : .unsatisfied))
            case .message(.sleep(let sleeping), _, let fds):
                for fd in fds { fd.close() }
                if sleeping {
                    let done = DispatchSemaphore(value: 0)
                    providerQueue.async { provider.sleep { done.signal() } }
                    if done.wait(timeout: .now() + 5) == .timedOut { log("sleep did not complete within 5 s") }
                } else {
                    providerQueue.async { provider.wake() }
                }
            case .message(.stopTunnel(let code), _, let fds):
                for fd in fds { fd.close() }
                let done = DispatchSemaphore(value: 0)
                let reason = NEProviderStopReason(rawValue: code) ?? .userInitiated
                providerQueue.async { provider.stopTunnel(with: reason) { done.signal() } }
                if done.wait(timeout: .now() + 20) == .timedOut { log("stopTunnel did not complete within 20 s") }
                provider.packetFlow.close()
                return 0
            case .message(.stop, _, let fds):
                for fd in fds { fd.close() }
                provider.packetFlow.close()
                return 0
            case .message(_, _, let fds):
                for fd in fds { fd.close() }
            }
        }
    }

    // MARK: NEProviderSystem

    func setTunnelNetworkSettings(_ settings: NETunnelNetworkSettings?, for provider: NEPacketTunnelProvider,
                                  completionHandler: @escaping @Sendable ((any Error)?) -> Void) {
        let id = nextID.add(1, ordering: .relaxed).oldValue
        pending.withLock { $0[id] = (completionHandler, settings == nil) }
        let json = settings.flatMap { (try? JSONEncoder().encode(NetworkSettingsWire($0))).map { JSONText(String(decoding: $0, as: UTF8.self)) } }
        send(.apply(id: id, settings: json))
    }

    func reassertingChanged(_ reasserting: Bool, for provider: NEPacketTunnelProvider) {
        self.reasserting.store(reasserting, ordering: .releasing)
        report()
    }

    func cancelTunnel(with error: (any Error)?, for provider: NEPacketTunnelProvider) {
        send(.cancel(error: error.map(Self.providerError)))
        cancelled.store(true, ordering: .releasing)
    }

    static func providerError(_ error: any Error) -> ProviderError {
        let e = error as NSError
        return ProviderError(message: e.localizedDescription, domain: e.domain, code: e.code)
    }
}
