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

    /// The secret a reference names, in secure memory (root only: the store is root's).
    public static func secret(forReference reference: Data,
                              store: SecretStore = SecretStore()) throws(SecretStore.Failure) -> SecureBytes {
        try store.read(reference: Array(reference))
    }
}
