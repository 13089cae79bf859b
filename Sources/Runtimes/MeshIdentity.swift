import CSodium
import LinuxSystem
import RuntimeABI
import TunnelgateSettings

/// A node's MeshGuard identity as the library derives it from the 32-byte
/// seed (meshguard_init: Ed25519.KeyPair.generateDeterministic(seed), the
/// RFC 8032 key generation that libsodium's crypto_sign_seed_keypair also
/// does), and the mesh IPv4 that follows from it. Only public values are
/// kept: the secret half is derived in secure memory and wiped at once.
///
/// `start` checks the derivation against the loaded library
/// (meshguard_get_pubkey) and refuses to run when they differ, so an
/// address put on the TUN from `"auto"` is the one the mesh knows the node by.
public struct MeshIdentity: Sendable, Equatable {
    public let publicKey: [UInt8]
    public var meshIPv4: IPv4Address { MeshRuntimeSettings.meshIPv4(identity: publicKey) }
    public var hex: String { MeshRuntimeSettings.hex(publicKey) }

    /// The identity of `seed` (32 bytes).
    public init(seed: SecureBytes) throws(RuntimeError) {
        precondition(seed.count == 32, "an identity seed is 32 bytes")
        _ = sodium_init()  // idempotent; the key generation itself needs no randomness
        let sk: SecureBytes
        do { sk = try SecureBytes(count: Int(crypto_sign_SECRETKEYBYTES)) } catch {
            throw RuntimeError("no memory for the identity's key: \(error)")
        }
        var pk = [UInt8](repeating: 0, count: Int(crypto_sign_PUBLICKEYBYTES))
        sk.withUnsafeMutableBytes { skBytes in
            seed.withUnsafeBytes { s in
                _ = crypto_sign_seed_keypair(&pk, skBytes.baseAddress!.assumingMemoryBound(to: UInt8.self),
                                             s.baseAddress!.assumingMemoryBound(to: UInt8.self))
            }
        }
        sk.wipe()
        publicKey = pk
    }

    /// The identity of the configured seed file, for `plan`: nil when the
    /// file does not exist yet (`generateIdentity` creates it at `up`);
    /// never creates it. The same checks as at `up` (owner-only, 32 bytes).
    public static func read(_ settings: MeshRuntimeSettings) throws(RuntimeError) -> MeshIdentity? {
        var noCreate = settings
        noCreate.generateIdentity = false
        let seed: SecureBytes
        do { seed = try loadSeed(noCreate) } catch {
            if case .missing = error { return nil }
            throw error.runtimeError
        }
        return try MeshIdentity(seed: seed)
    }

    public enum SeedFailure: Error {
        /// No seed file, and generateIdentity is off.
        case missing(RuntimeError)
        case other(RuntimeError)
        public var runtimeError: RuntimeError {
            switch self {
            case .missing(let e), .other(let e): e
            }
        }
    }

    /// The 32-byte seed from an owner-only file, opened as a TrustedFile and read into secure memory;
    /// created (0600, random, O_EXCL in its trusted directory) when missing and `generateIdentity`
    /// says so.
    public static func loadSeed(_ settings: MeshRuntimeSettings) throws(SeedFailure) -> SecureBytes {
        let path = settings.identitySeedFile
        let key = "runtime.identitySeedFile"
        let file: TrustedFile
        do {
            file = try TrustedFile.open(path)
        } catch {
            guard case .notFound = error else { throw .other(RuntimeError("\(key): \(error)")) }
            guard settings.generateIdentity else {
                throw .missing(RuntimeError("\(key): cannot read \(path): \(Errno.noSuchEntry) (set \"generateIdentity\": true to create one)"))
            }
            do { return try createSeed(path) } catch { throw .other(error) }
        }
        defer { file.close() }
        if let problem = file.ownerOnlyProblem() { throw .other(RuntimeError("\(key): \(problem)")) }
        guard file.status.size == 32 else {
            throw .other(RuntimeError("\(key): \(path) holds \(file.status.size) bytes; an identity seed is exactly 32 raw bytes"))
        }
        let seed: SecureBytes?
        do { seed = try file.readSecret(limit: 32) } catch {
            throw .other(RuntimeError("\(key): cannot read 32 bytes from \(path): \(error)"))
        }
        guard let seed else { throw .other(RuntimeError("\(key): \(path) grew while it was read")) }
        return seed
    }

    /// A new random seed, written to `path` (0600) in its directory opened as a TrustedFile.
    static func createSeed(_ path: String) throws(RuntimeError) -> SecureBytes {
        let key = "runtime.identitySeedFile"
        let cut = path.lastIndex(of: "/")
        let directoryPath = cut.map { $0 == path.startIndex ? "/" : String(path[..<$0]) } ?? "."
        let name = cut.map { String(path[path.index(after: $0)...]) } ?? path
        let directory: TrustedFile
        do { directory = try TrustedFile.open(directoryPath, expecting: .directory) } catch {
            throw RuntimeError("\(key): cannot create \(path): \(error)")
        }
        defer { directory.close() }
        let seed: SecureBytes
        do { seed = try SecureBytes(count: 32) } catch { throw RuntimeError("no memory for a new identity seed: \(error)") }
        _ = sodium_init()
        seed.withUnsafeMutableBytes { randombytes_buf($0.baseAddress!, 32) }
        do {
            let fd = try directory.createFile(named: name, mode: 0o600)
            defer { fd.close() }
            do {
                let written = try seed.withUnsafeBytes { raw in Result { () throws(SystemCallError) in try fd.write(raw) } }.get()
                guard written == 32 else { throw SystemCallError("write(32 bytes)", .inputOutput) }  // short
                try fd.sync()
            } catch {
                directory.removeFile(named: name)
                throw error
            }
        } catch {
            throw RuntimeError("\(key): writing \(path) failed: \(error)")
        }
        return seed
    }
}
