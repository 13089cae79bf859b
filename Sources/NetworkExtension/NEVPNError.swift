import Foundation

/// The errors of the manager side, in NEVPNErrorDomain with Apple's codes.
public let NEVPNErrorDomain = "NEVPNErrorDomain"

/// Tunnelgate's own reasons a tunnel ended (fetchLastDisconnectError), where iOS would use
/// NEVPNConnectionErrorDomain's codes, which Tunnelgate does not reproduce.
public let TunnelgateErrorDomain = "TunnelgateErrorDomain"

/// NEVPNError: Apple's codes; `catch NEVPNError.configurationDisabled` works as on iOS.
public struct NEVPNError: Error, CustomNSError, CustomStringConvertible, Sendable {
    public enum Code: Int, Sendable {
        case configurationInvalid = 1
        case configurationDisabled = 2
        case connectionFailed = 3
        case configurationStale = 4
        case configurationReadWriteFailed = 5
        case configurationUnknown = 6
    }

    public static let configurationInvalid = Code.configurationInvalid
    public static let configurationDisabled = Code.configurationDisabled
    public static let connectionFailed = Code.connectionFailed
    public static let configurationStale = Code.configurationStale
    public static let configurationReadWriteFailed = Code.configurationReadWriteFailed
    public static let configurationUnknown = Code.configurationUnknown

    public let code: Code
    /// What failed, in words (the NSError's localizedDescription).
    public let message: String
    /// The rest of the userInfo given to Apple's `init(_:userInfo:)` (NEVPNError+Apple.swift).
    let extraUserInfo: Unchecked<[String: Any]>

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
        extraUserInfo = Unchecked([:])
    }

    public static var errorDomain: String { NEVPNErrorDomain }
    public var errorCode: Int { code.rawValue }
    public var errorUserInfo: [String: Any] { extraUserInfo.value.merging([NSLocalizedDescriptionKey: message]) { _, new in new } }
    public var description: String { message }
}

extension NEVPNError.Code {
    /// `catch NEVPNError.configurationDisabled { … }`
    public static func ~= (code: NEVPNError.Code, error: any Error) -> Bool {
        (error as? NEVPNError)?.code == code
    }
}
