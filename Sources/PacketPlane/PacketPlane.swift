import LinuxSystem
import PlaneProtocol
import RuntimeABI
import Runtimes
import TUN
import TunnelgateSettings
import WireGuard

/// The packet plane: the process that hosts a tunnel's runtime and moves its packets, started by the
/// engine (Session's `PlaneProcess`) into a sandbox — an unprivileged user of its own, no capabilities,
/// no_new_privs, a read-only file system with the engine's files hidden — that it completes itself
/// with a seccomp allow-list before it reads anything. It holds only what it is handed over its
/// channel (descriptor 3): the runtime's library (a sealed copy), its secret, the TUN and, for the
/// built-in WireGuard, the carrier sockets the engine bound and marked.
public enum PacketPlane {
    /// The channel's descriptor in the plane.
    public static let channelDescriptor: Int32 = 3

    /// `tunnelgate plane`: runs until the engine says stop, the runtime fails, or the
    /// engine goes (the channel closes; PR_SET_PDEATHSIG also kills the plane then). The exit status
    /// is 0 after a stop, 1 after a failure.
    public static func main(_ arguments: [String]) -> Int32 {
        var log = PlaneLog(name: "plane")
        // Before anything else: not dumpable, and the allow-list (PlaneLockDown).
        do throws(SystemCallError) { try PlaneLockDown.apply() } catch {
            log.write("cannot lock the plane down: \(error)")
            return 1
        }
        let channel = ChannelEndpoint<PlaneMessage, EngineMessage>(SeqPacketChannel(FileDescriptor(rawValue: channelDescriptor)))

        // load: the runtime, before the engine touches the kernel.
        guard case .message(.load(let load), let tail, let descriptors)? = wait(channel, seconds: 30, log: log) else {
            log.write("no load message from the engine")
            return 1
        }
        log = PlaneLog(name: load.tunnelName)
        let host: HostedRuntime?
        do throws(RuntimeError) {
            host = try makeRuntime(load, tail: tail, descriptors: descriptors)
        } catch {
            try? channel.send(.loaded(error: error.description, summary: nil))
            return 1
        }
        do throws(SystemCallError) { try channel.send(.loaded(error: nil, summary: host?.summary)) } catch {
            log.write("the channel: \(error)")
            return 1
        }

        // start: the TUN (and carrier sockets), then the loop.
        guard case .message(.start(let start), _, let startDescriptors)? = wait(channel, seconds: 120, log: log) else {
            host?.stop()
            log.write("no start message from the engine")
            return 1
        }
        guard start.descriptors.first == .tun, let tun = startDescriptors.first else {
            log.write("the start message has no TUN")
            return 1
        }
        host?.attach(to: start.context)
        do throws(RuntimeError) {
            try host?.start(tun: tun, mtu: start.context.mtu)
        } catch {
            host?.stop()
            try? channel.send(.failed(reason: error.description))
            return 1
        }
        return PlaneLoop(host: host, tun: tun, mtu: start.context.mtu, channel: channel, log: log).run()
    }

    /// Waits for the engine's next datagram, up to `seconds`; nil when none came (or the engine went).
    static func wait(_ channel: ChannelEndpoint<PlaneMessage, EngineMessage>, seconds: Double,
                     log: PlaneLog) -> ChannelEndpoint<PlaneMessage, EngineMessage>.Event? {
        let deadline = ProcessControl.monotonicSeconds() + seconds
        while ProcessControl.monotonicSeconds() < deadline {
            do throws(SystemCallError) {
                if let event = try channel.receive() {
                    if case .garbage(let why) = event { log.write("garbage from the engine: \(why)"); continue }
                    return event
                }
            } catch {
                log.write("the channel: \(error)")
                return nil
            }
            _ = try? Poll.readable(channel.descriptor, timeoutMilliseconds: 100)
        }
        return nil
    }

    /// The runtime a load message describes, from the descriptors and secrets it carries.
    static func makeRuntime(_ load: PlaneLoad, tail: UnsafeRawBufferPointer, descriptors: [FileDescriptor]) throws(RuntimeError) -> HostedRuntime? {
        var secrets: [PlaneLoad.Secret.Role: UnsafeRawBufferPointer] = [:]
        var presharedKeys: [Int: UnsafeRawBufferPointer] = [:]
        var offset = 0
        for part in load.secrets {
            guard part.count >= 0, offset + part.count <= tail.count else { throw RuntimeError("the engine's secrets do not fit their message") }
            let bytes = UnsafeRawBufferPointer(rebasing: tail[offset..<(offset + part.count)])
            if part.role == .presharedKey, let peer = part.peer { presharedKeys[peer] = bytes } else { secrets[part.role] = bytes }
            offset += part.count
        }
        func optionalDescriptor(_ role: PlaneLoad.Descriptor) -> FileDescriptor? {
            guard let i = load.descriptors.firstIndex(of: role), i < descriptors.count else { return nil }
            return descriptors[i]
        }
        func descriptor(_ role: PlaneLoad.Descriptor) throws(RuntimeError) -> FileDescriptor {
            guard let i = load.descriptors.firstIndex(of: role), i < descriptors.count else {
                throw RuntimeError("the engine sent no \(role.rawValue) descriptor")
            }
            return descriptors[i]
        }
        switch load.runtime {
        case .none:
            return nil
        case .callback(let settings):
            let library = try RuntimeLibrary(settings, descriptor: try descriptor(.library))
            let secret = try RuntimeSecret.copying(secrets[.runtimeSecret] ?? UnsafeRawBufferPointer(start: nil, count: 0))
            return CallbackRuntimeHost(settings, library: library, secret: secret)
        case .mesh(let settings):
            guard let bytes = secrets[.meshSeed], bytes.count == 32 else { throw RuntimeError("the engine sent no identity seed") }
            let seed: SecureBytes
            do { seed = try SecureBytes(copying: bytes) } catch { throw RuntimeError("no memory for the identity seed: \(error)") }
            return try MeshRuntimeHost(settings, libraryDescriptor: try descriptor(.library), seed: seed)
        case .wireguard(let plan):
            let settings = try wireGuardSettings(plan, privateKey: secrets[.privateKey], presharedKeys: presharedKeys)
            let sockets = WireGuardRuntime.CarrierSockets(ipv4: optionalDescriptor(.udp4), ipv6: optionalDescriptor(.udp6),
                                                          uapi: optionalDescriptor(.uapi))
            let name = load.tunnelName
            return try WireGuardRuntime(settings, carrierSockets: sockets, timers: WireGuardTimers.standard.scaled(by: plan.timerScale),
                                        offloads: plan.offloads, workers: WireGuardDevice.CryptoWorkers(rawValue: plan.workers) ?? .whenSaturated,
                                        log: { PlaneLog(name: name).write($0) })
        }
    }

    /// The WireGuard configuration again, its keys copied from the tail into secure memory (the tail
    /// is the channel's receive buffer, wiped at the next receive).
    static func wireGuardSettings(_ plan: WireGuardPlan, privateKey: UnsafeRawBufferPointer?,
                                  presharedKeys: [Int: UnsafeRawBufferPointer]) throws(RuntimeError) -> WireGuardSettings {
        func key(_ bytes: UnsafeRawBufferPointer?, _ what: String) throws(RuntimeError) -> SecretKey {
            guard let bytes, bytes.count == SecretKey.byteCount else { throw RuntimeError("the engine sent no \(what)") }
            let memory: SecureBytes
            do { memory = try SecureBytes(copying: bytes) } catch { throw RuntimeError("no memory for the \(what): \(error)") }
            guard let key = SecretKey(memory: memory) else { throw RuntimeError("the engine sent no \(what)") }
            return key
        }
        var peers: [WireGuardSettings.Peer] = []
        for (i, p) in plan.peers.enumerated() {
            guard p.publicKey.count == 32 else { throw RuntimeError("peer \(i + 1): the public key is not 32 bytes") }
            let psk = p.hasPresharedKey ? try key(presharedKeys[i], "preshared key of peer \(i + 1)") : nil
            let endpoint = p.endpointHost.map { host in
                WireGuardSettings.Endpoint(host: IPAddress(host).map { .address($0) } ?? .name(host), port: p.endpointPort)
            }
            peers.append(WireGuardSettings.Peer(publicKey: p.publicKey, presharedKey: psk, endpoint: endpoint,
                                                allowedIPs: p.allowedIPs, persistentKeepalive: p.persistentKeepalive))
        }
        return WireGuardSettings(privateKey: try key(privateKey, "private key"), listenPort: plan.listenPort,
                                 fwMark: plan.fwMark, peers: peers)
    }
}

/// The plane's log lines, on its standard error (the tunnel's log): `tunnelgate[NAME plane]: …`.
struct PlaneLog {
    let name: String
    func write(_ line: String) {
        var text = "tunnelgate[\(name) plane]: \(line)"
        if !text.hasSuffix("\n") { text += "\n" }
        try? FileDescriptor(rawValue: 2).writeAll(Array(text.utf8))
    }
}
