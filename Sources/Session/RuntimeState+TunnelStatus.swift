import Engine
import RuntimeABI

extension RuntimeState {
    /// The NEVPNStatus this runtime state means for the tunnel.
    public var tunnelStatus: TunnelStatus {
        switch phase {
        case .starting: .connecting
        case .ready: interface == nil ? .connecting : .connected
        case .reconnecting: .reasserting
        case .failed, .stopped: .disconnecting
        }
    }
}
