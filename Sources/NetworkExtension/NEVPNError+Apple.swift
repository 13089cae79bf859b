import Foundation

extension NEVPNError {
    /// Apple's initialiser: `NEVPNError(.configurationInvalid)`, `NEVPNError(.connectionFailed, userInfo: […])`.
    /// The description is `userInfo[NSLocalizedDescriptionKey]` when given, else one for the code; the
    /// rest of `userInfo` is kept in `errorUserInfo` (and so in the bridged NSError).
    public init(_ code: Code, userInfo: [String: Any] = [:]) {
        self.code = code
        message = userInfo[NSLocalizedDescriptionKey] as? String ?? code.defaultDescription
        extraUserInfo = Unchecked(userInfo)
    }

    /// As on Apple's bridged errors: the NSError's userInfo.
    public var userInfo: [String: Any] { errorUserInfo }

    public var localizedDescription: String { message }
}

extension NEVPNError: Hashable {
    /// Equal when code and description are: the comparison of the bridged NSErrors' domain, code and
    /// description.
    public static func == (a: NEVPNError, b: NEVPNError) -> Bool {
        a.code == b.code && a.message == b.message
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(code)
        hasher.combine(message)
    }
}

extension NEVPNError.Code {
    var defaultDescription: String {
        switch self {
        case .configurationInvalid: "the VPN configuration is invalid"
        case .configurationDisabled: "the VPN configuration is not enabled"
        case .connectionFailed: "the VPN connection failed"
        case .configurationStale: "the VPN configuration changed elsewhere; load it again"
        case .configurationReadWriteFailed: "the VPN configuration could not be read or written"
        case .configurationUnknown: "an unknown VPN configuration error"
        }
    }
}
