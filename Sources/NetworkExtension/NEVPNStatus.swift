import Foundation

/// NEVPNStatus: the connection's state. Same cases and raw values as Apple's.
public enum NEVPNStatus: Int, Sendable {
    case invalid = 0
    case disconnected = 1
    case connecting = 2
    case connected = 3
    case reasserting = 4
    case disconnecting = 5
}

extension Notification.Name {
    /// Posted on `NotificationCenter.default` (object: the `NEPacketTunnelProvider`)
    /// whenever the host changes the tunnel's `NEVPNStatus`. On iOS the object is
    /// the NEVPNConnection; there is no connection object here yet.
    public static let NEVPNStatusDidChange = Notification.Name("NEVPNStatusDidChangeNotification")
}
