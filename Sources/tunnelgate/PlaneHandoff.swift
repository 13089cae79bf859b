import Engine
import LinuxSystem
import PlaneProtocol
import RuntimeABI
import Runtimes
import Session
import TunnelgateSettings
import WireGuard

/// What the engine reads for a packet plane before anything starts, and hands it: the runtime's
/// library as a sealed in-memory copy of the file it checked (a TrustedFile, never loaded here — its
/// code runs only in the plane), the runtime's secret or MeshGuard seed in secure memory (the tail of
/// the load message, kept for restarts), the settings the plane needs.
enum PlaneHandoff {
    /// The largest runtime library taken.
    static let libraryLimit = 256 << 20

    /// The package for `settings.runtime`, and for a mesh runtime the node's identity (for 'auto').
    /// `namespace`: the inode of the namespace the tunnel is in (its state directory's), which names a
    /// WireGuard API socket when another namespace's tunnel of the same name holds the plain one.
    static func prepare(_ settings: TunnelSettings, namespace: UInt64) throws(RuntimeError) -> (PlanePackage, MeshIdentity?) {
        let name = settings.name
        switch settings.runtime {
        case .none:
            return (PlanePackage(load: PlaneLoad(runtime: .none, descriptors: [], secrets: [], tunnelName: name),
                                 descriptors: [], secrets: nil, startTimeout: 5, tunOffloads: false, carrierIdentity: nil), nil)
        case .callback(let c):
            let library = try sealedLibrary(c.library, key: "runtime.library", what: "runtime library")
            let secret = try RuntimeSecret.load(c.secret)
            var tail: SecureBytes?
            var failure: RuntimeError?
            secret.withUnsafeSecretBytes { bytes in
                guard !bytes.isEmpty else { return }
                do throws(RuntimeError) { tail = try copy(bytes) } catch { failure = error }
            }
            if let failure { throw failure }
            let parts = tail.map { [PlaneLoad.Secret(role: .runtimeSecret, count: $0.count)] } ?? []
            return (PlanePackage(load: PlaneLoad(runtime: .callback(c), descriptors: [.library], secrets: parts, tunnelName: name),
                                 descriptors: [library], secrets: tail, startTimeout: c.startTimeoutSeconds,
                                 tunOffloads: CallbackRuntimeHost.wantsTunOffloads(c),
                                 carrierIdentity: .planeUser), nil)
        case .mesh(let m):
            let library = try sealedLibrary(m.library, key: "runtime.library", what: "MeshGuard library")
            let seed: SecureBytes
            do { seed = try MeshIdentity.loadSeed(m) } catch { throw error.runtimeError }
            let identity = try MeshIdentity(seed: seed)
            return (PlanePackage(load: PlaneLoad(runtime: .mesh(m), descriptors: [.library],
                                                 secrets: [PlaneLoad.Secret(role: .meshSeed, count: seed.count)], tunnelName: name),
                                 descriptors: [library], secrets: seed, startTimeout: m.startTimeoutSeconds, tunOffloads: false,
                                 carrierIdentity: .planeUser), identity)
        case .wireguard(let w):
            return (try wireGuard(w, name: name, namespace: namespace), nil)
        }
    }

    /// The built-in WireGuard's package: its UDP sockets (bound here, so a port in use or below 1024 is
    /// the engine's business; marked once the slot is chosen), the listening socket wg(8) connects to,
    /// and the keys in one tail (the private key, then each preshared key).
    ///
    /// wg(8) finds the socket as /var/run/wireguard/NAME.sock. When a live tunnel of that name in another
    /// namespace holds it, this one's is named by `Engine.wireGuardAlias` (NAME@ and its namespace's inode
    /// in base 36), which wg(8) reaches as that interface.
    static func wireGuard(_ w: WireGuardSettings, name: String, namespace: UInt64) throws(RuntimeError) -> PlanePackage {
        let log: @Sendable (String) -> Void = { printError("tunnelgate: \($0)") }
        let sockets: (ipv4: FileDescriptor, ipv6: FileDescriptor?, port: UInt16)
        do { sockets = try UDPBind.carrierSockets(port: w.listenPort ?? 0, log: log) } catch { throw RuntimeError(error.description) }
        var descriptors = [sockets.ipv4]
        var roles: [PlaneLoad.Descriptor] = [.udp4]
        if let ipv6 = sockets.ipv6 {
            descriptors.append(ipv6)
            roles.append(.udp6)
        }
        let carrierSockets = descriptors
        func closeAll() { for fd in descriptors { fd.close() } }
        var socketPath = Engine.wireGuardSocketPath(name)
        do throws(SystemCallError) {
            _ = try? FileSystem.createDirectory(String(socketPath[..<socketPath.lastIndex(of: "/")!]), mode: 0o755)
            do throws(SystemCallError) {
                descriptors.append(try UnixSocket.listen(at: socketPath))
            } catch where error.errno == .addressInUse {
                // Another namespace's tunnel of this name (a second of this namespace is refused by
                // the name's lock later, and this socket goes with it).
                socketPath = Engine.wireGuardSocketPath(name, namespace: namespace)
                descriptors.append(try UnixSocket.listen(at: socketPath))
                log("/var/run/wireguard/\(name).sock is another namespace's tunnel \(name): wg(8) reaches this one as "
                    + Engine.wireGuardAlias(name, namespace: namespace))
            }
            roles.append(.uapi)
        } catch {
            closeAll()
            throw RuntimeError("the WireGuard API socket \(socketPath): \(error)")
        }
        // The tail: 32 bytes of private key, then 32 per peer that has a preshared key.
        let keyed = w.peers.filter { $0.presharedKey != nil }.count
        let tail: SecureBytes
        do { tail = try SecureBytes(count: 32 * (1 + keyed)) } catch {
            closeAll()
            FileSystem.remove(socketPath)
            throw RuntimeError("no memory for the WireGuard keys: \(error)")
        }
        var parts = [PlaneLoad.Secret(role: .privateKey, count: 32)]
        tail.withUnsafeMutableBytes { out in
            var offset = 0
            func put(_ key: SecretKey) {
                key.memory.withUnsafeBytes { out.baseAddress!.advanced(by: offset).copyMemory(from: $0.baseAddress!, byteCount: 32) }
                offset += 32
            }
            put(w.privateKey)
            for (i, peer) in w.peers.enumerated() {
                guard let psk = peer.presharedKey else { continue }
                put(psk)
                parts.append(PlaneLoad.Secret(role: .presharedKey, count: 32, peer: i))
            }
        }
        let peers = w.peers.map { p in
            let host: String? = switch p.endpoint?.host {
            case .address(let a)?: a.description
            case .name(let n)?: n
            case nil: nil
            }
            return WireGuardPlan.Peer(publicKey: p.publicKey, hasPresharedKey: p.presharedKey != nil, endpointHost: host,
                                      endpointPort: p.endpoint?.port ?? 0, allowedIPs: p.allowedIPs,
                                      persistentKeepalive: p.persistentKeepalive)
        }
        let timers = WireGuardTimers.fromEnvironment()
        guard let workers = WireGuardRuntime.workersFromEnvironment else {
            closeAll()
            FileSystem.remove(socketPath)
            throw RuntimeError("\(WireGuardRuntime.workersVariable)=\(ProcessControl.environmentValue(WireGuardRuntime.workersVariable) ?? ""): "
                               + "not off, auto or always")
        }
        let plan = WireGuardPlan(listenPort: w.listenPort, fwMark: w.fwMark, peers: peers,
                                 offloads: WireGuardRuntime.offloadsFromEnvironment, timerScale: timers.scale,
                                 workers: workers.rawValue)
        return PlanePackage(load: PlaneLoad(runtime: .wireguard(plan), descriptors: roles, secrets: parts, tunnelName: name),
                            descriptors: descriptors, secrets: tail, startTimeout: 5, tunOffloads: plan.offloads,
                            carrierIdentity: CarrierIdentity.forRuntime(.wireguard(w)), carrierSockets: carrierSockets,
                            socketPath: socketPath)
    }

    /// A sealed copy of the library at `path`, opened as a TrustedFile.
    static func sealedLibrary(_ path: String, key: String, what: String) throws(RuntimeError) -> FileDescriptor {
        let file: TrustedFile
        do { file = try TrustedFile.open(path) } catch { throw RuntimeError("cannot load \(what) \(path) (\(key)): \(error)") }
        defer { file.close() }
        let bytes: [UInt8]?
        do { bytes = try file.readAll(limit: libraryLimit) } catch { throw RuntimeError("cannot read \(what) \(path): \(error)") }
        guard let bytes else { throw RuntimeError("\(what) \(path) is larger than \(libraryLimit >> 20) MiB") }
        do { return try SealedFile.make(name: "tunnelgate-runtime-library", contents: bytes) } catch {
            throw RuntimeError("cannot copy \(what) \(path) for the packet plane: \(error)")
        }
    }

    static func copy(_ bytes: UnsafeRawBufferPointer) throws(RuntimeError) -> SecureBytes {
        do { return try SecureBytes(copying: bytes) } catch { throw RuntimeError("no memory for the runtime's secret: \(error)") }
    }
}
