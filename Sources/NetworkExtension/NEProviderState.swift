import Foundation
import Synchronization

/// What the host hands a provider besides calls: its default path and its protocol configuration.
/// One per provider (`NEProvider.tunnelgateState`), set through the hooks below, read by the
/// provider's properties (`defaultPath`, `protocolConfiguration`).
final class NEProviderState: Sendable {
    private struct Values {
        var defaultPath: NWPath?
        var protocolConfiguration: NETunnelProviderProtocol?
    }

    private let values = Mutex(Values())

    var defaultPath: NWPath? { values.withLock { $0.defaultPath } }
    var protocolConfiguration: NETunnelProviderProtocol? { values.withLock { $0.protocolConfiguration } }

    func setDefaultPath(_ path: NWPath?) { values.withLock { $0.defaultPath = path } }
    func setProtocolConfiguration(_ p: NETunnelProviderProtocol?) { values.withLock { $0.protocolConfiguration = p } }
}

extension NEProvider {
    /// NEProvider.defaultPath: the tunnel's carrier path (NWPath), nil until the host reports one.
    /// Read-only, as on iOS.
    public var defaultPath: NWPath? { tunnelgateState.defaultPath }

    /// The host's hook for the carrier path (`CarrierPath`/`Monitor` verdicts): satisfied while a carrier
    /// endpoint has a route, unsatisfied while none has. Called with each change, and once when the
    /// settings are first applied. The lead's host (issue 13) connects it; nothing calls it yet.
    func tunnelgateSetDefaultPath(carrierReachable: Bool) {
        tunnelgateState.setDefaultPath(NWPath(status: carrierReachable ? .satisfied : .unsatisfied))
    }
}
