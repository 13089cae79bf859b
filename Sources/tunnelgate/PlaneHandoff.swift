import Engine
import LinuxSystem
import PlaneProtocol
import RuntimeABI
import Runtimes
import Session
import TunnelgateSettings

/// What the engine reads for a packet plane before anything starts, and hands it: the runtime's
/// library as a sealed in-memory copy of the file it checked (a TrustedFile, never loaded here — its
/// code runs only in the plane), the runtime's secret or MeshGuard seed in secure memory (the tail of
/// the load message, kept for restarts), the settings the plane needs.
enum PlaneHandoff {
    /// The largest runtime library taken.
    static let libraryLimit = 256 << 20

    /// The package for `settings.runtime`, and for a mesh runtime the node's identity (for 'auto').
    static func prepare(_ settings: TunnelSettings) throws(RuntimeError) -> (PlanePackage, MeshIdentity?) {
        let name = settings.name
        switch settings.runtime {
        case .none:
            return (PlanePackage(load: PlaneLoad(runtime: .none, descriptors: [], secrets: [], tunnelName: name),
                                 descriptors: [], secrets: nil, startTimeout: 5, tunOffloads: false), nil)
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
                                 descriptors: [library], secrets: tail, startTimeout: c.startTimeoutSeconds, tunOffloads: false), nil)
        case .mesh(let m):
            let library = try sealedLibrary(m.library, key: "runtime.library", what: "MeshGuard library")
            let seed: SecureBytes
            do { seed = try MeshIdentity.loadSeed(m) } catch { throw error.runtimeError }
            let identity = try MeshIdentity(seed: seed)
            return (PlanePackage(load: PlaneLoad(runtime: .mesh(m), descriptors: [.library],
                                                 secrets: [PlaneLoad.Secret(role: .meshSeed, count: seed.count)], tunnelName: name),
                                 descriptors: [library], secrets: seed, startTimeout: m.startTimeoutSeconds, tunOffloads: false), identity)
        case .wireguard:
            throw RuntimeError("the built-in WireGuard does not run in a packet plane yet")
        }
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
