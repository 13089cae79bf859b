import CSodium
import Glibc
import RuntimeABI
import TunnelgateSettings

/// A node's MeshGuard identity as the library derives it from the 32-byte
/// seed (meshguard_init: Ed25519.KeyPair.generateDeterministic(seed), the
/// RFC 8032 key generation that libsodium's crypto_sign_seed_keypair also
/// does), and the mesh IPv4 that follows from it. Only public values are
/// kept: the secret half is wiped at once.
///
/// `start` checks the derivation against the loaded library
/// (meshguard_get_pubkey) and refuses to run when they differ, so an
/// address put on the TUN from `"auto"` is the one the mesh knows the node by.
public struct MeshIdentity: Sendable, Equatable {
    public let publicKey: [UInt8]
    public var meshIPv4: IPv4Address { MeshRuntimeSettings.meshIPv4(identity: publicKey) }
    public var hex: String { MeshRuntimeSettings.hex(publicKey) }

    public init(seed: [UInt8]) {
        precondition(seed.count == 32, "an identity seed is 32 bytes")
        _ = sodium_init()  // idempotent; the key generation itself needs no randomness
        var pk = [UInt8](repeating: 0, count: Int(crypto_sign_PUBLICKEYBYTES))
        var sk = [UInt8](repeating: 0, count: Int(crypto_sign_SECRETKEYBYTES))
        _ = crypto_sign_seed_keypair(&pk, &sk, seed)
        sk.withUnsafeMutableBytes { explicit_bzero($0.baseAddress!, $0.count) }
        publicKey = pk
    }

    /// The identity of the configured seed file, for `plan`: nil when the
    /// file does not exist yet (`generateIdentity` creates it at `up`);
    /// never creates it. The same checks as at `up` (owner-only, 32 bytes).
    public static func read(_ settings: MeshRuntimeSettings) throws(RuntimeError) -> MeshIdentity? {
        var st = stat()
        if stat(settings.identitySeedFile, &st) != 0, errno == ENOENT { return nil }
        var noCreate = settings
        noCreate.generateIdentity = false
        var seed = try MeshRuntimeHost.loadSeed(noCreate)
        defer { seed.withUnsafeMutableBytes { explicit_bzero($0.baseAddress!, $0.count) } }
        return MeshIdentity(seed: seed)
    }
}
