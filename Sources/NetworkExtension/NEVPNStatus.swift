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
    /// Posted on `NotificationCenter.default` whenever a status changes: in a manager's process with
    /// the `NEVPNConnection` as object (as on iOS), and in the provider host's process with the
    /// `NEPacketTunnelProvider` as object.
    public static let NEVPNStatusDidChange = Notification.Name("NEVPNStatusDidChangeNotification")
}
