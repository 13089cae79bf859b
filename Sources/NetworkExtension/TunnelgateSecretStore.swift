import Foundation
import LinuxSystem
import TunnelgateSecrets

/// NEVPNProtocol.passwordReference and identityReference on Linux: references to secrets in
/// Tunnelgate's secret store (TunnelgateSecrets.SecretStore: root-only files under
/// /etc/tunnelgate/secrets, added with `tunnelgate secret add NAME`). iOS hands out keychain
/// persistent references; here a reference is the opaque Data `tunnelgate-secret:NAME`, and a container
/// app sets it as it would the keychain's:
///
///     proto.passwordReference = TunnelgateSecretStore.reference(named: "office-vpn")
///
/// The configuration (and the preferences file) hold the reference, never the secret.
public enum TunnelgateSecretStore {
    public static func reference(named name: String) -> Data {
        Data(SecretStore.reference(named: name))
    }

    /// The secret's name in a reference, or nil when the Data is not a reference to this store.
    public static func name(fromReference reference: Data) -> String? {
        SecretStore.name(fromReference: Array(reference))
    }

    /// The secret a reference names, in secure memory. In a provider's packet plane (which cannot read
    /// the root-only store), the one the engine read for the protocol's passwordReference or
    /// identityReference and handed over at start; anywhere else (root), read from the store.
    public static func secret(forReference reference: Data,
                              store: SecretStore = SecretStore()) throws(SecretStore.Failure) -> SecureBytes {
        if ProviderPlane.isPlane {
            guard let handed = ProviderPlane.handedSecrets.withLock({ $0[Array(reference)] }) else {
                throw .notFound(name(fromReference: reference) ?? "(not a reference to the secret store)")
            }
            let copy = handed.withUnsafeBytes { raw in Result { () throws(SystemCallError) in try SecureBytes(copying: raw) } }
            switch copy {
            case .success(let secret): return secret
            case .failure(let error): throw .system("no secure memory for the secret: \(error)")
            }
        }
        return try store.read(reference: Array(reference))
    }

    /// What the engine hands a provider's plane: the secrets of `protocol`'s passwordReference and
    /// identityReference that name secrets in the store (read here, as root). A reference to nothing
    /// in the store is left out, so the provider's lookup fails as on iOS for a missing keychain item.
    static func secrets(of proto: NEVPNProtocol?, store: SecretStore) -> [(reference: [UInt8], secret: SecureBytes)] {
        var out: [(reference: [UInt8], secret: SecureBytes)] = []
        for reference in [proto?.passwordReference, proto?.identityReference].compactMap({ $0 }) {
            let bytes = Array(reference)
            guard !out.contains(where: { $0.reference == bytes }), let secret = try? store.read(reference: bytes) else { continue }
            out.append((bytes, secret))
        }
        return out
    }
}
