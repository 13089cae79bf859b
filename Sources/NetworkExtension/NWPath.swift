import Foundation

/// NWPathStatus (NetworkExtension's, not Network.framework's), with Apple's raw values.
public enum NWPathStatus: Int, Sendable {
    case invalid = 0
    case satisfied = 1
    case unsatisfied = 2
    case satisfiable = 3
}

/// NWPath: what `NEProvider.defaultPath` says about the network the provider's own connections use,
/// the tunnel's carrier path on Linux:
///
/// - `status`: `.satisfied` while a carrier endpoint has a route (the engine's carrier-path check, with
///   the tunnel's fwmark: docs/networkextension.md, Watching the tunnel), `.unsatisfied` while none has;
/// - `isExpensive`, `isConstrained`: always false (Linux has no system-wide notion of either).
///
/// Made by the host only (as on iOS, a provider cannot create one).
open class NWPath: NSObject, @unchecked Sendable {
    // @unchecked Sendable: immutable.
    public let status: NWPathStatus
    public let isExpensive: Bool
    public let isConstrained: Bool

    init(status: NWPathStatus, isExpensive: Bool = false, isConstrained: Bool = false) {
        self.status = status
        self.isExpensive = isExpensive
        self.isConstrained = isConstrained
        super.init()
    }

    /// True when both paths say the same (status, expensive, constrained).
    open func isEqual(to path: NWPath) -> Bool {
        status == path.status && isExpensive == path.isExpensive && isConstrained == path.isConstrained
    }

    open override var description: String {
        let s: String
        switch status {
        case .invalid: s = "invalid"
        case .satisfied: s = "satisfied"
        case .unsatisfied: s = "unsatisfied"
        case .satisfiable: s = "satisfiable"
        }
        return "\(s)\(isExpensive ? ", expensive" : "")\(isConstrained ? ", constrained" : "")"
    }
}
