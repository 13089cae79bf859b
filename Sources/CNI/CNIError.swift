import TunnelgateSettings

/// A failure as the CNI specification reports it: a code (0-99 reserved for the well-known errors
/// below, 100+ the plugin's own), a short message and the details, printed as the error result
/// (`{"cniVersion", "code", "msg", "details"}`) on standard output with a non-zero exit.
public struct CNIError: Error, Equatable, Sendable, CustomStringConvertible {
    public var code: UInt
    public var message: String
    public var details: String

    public init(_ code: Code, _ message: String, details: String = "") {
        self.init(code: code.rawValue, message: message, details: details)
    }

    public init(code: UInt, message: String, details: String = "") {
        self.code = code
        self.message = message
        self.details = details
    }

    public var description: String { details.isEmpty ? message : "\(message): \(details)" }

    /// The error result, in the caller's version (the spec's Error type is the same in 0.3.x to 1.0.0).
    public func json(cniVersion: String) -> String {
        var members: [(key: String, value: JSONValue)] = [
            ("cniVersion", .string(cniVersion)),
            ("code", .number(Double(code), literal: String(code))),
            ("msg", .string(message)),
        ]
        if !details.isEmpty { members.append(("details", .string(details))) }
        return JSONValue.object(members).serialized(indent: 4)
    }

    /// The codes. 1-11 are the specification's; 100 and up are tunnelgate-cni's.
    public enum Code: UInt, Sendable {
        /// Incompatible CNI version.
        case incompatibleVersion = 1
        /// Unsupported field in the network configuration (the message names the key and value).
        case unsupportedField = 2
        /// Container unknown or does not exist (the runtime need not clean up).
        case unknownContainer = 3
        /// Invalid necessary environment variables (the message names them).
        case invalidEnvironment = 4
        /// I/O failure (reading the configuration from standard input, the plugin's state).
        case ioFailure = 5
        /// Failed to decode content (the configuration is not JSON).
        case decodingFailure = 6
        /// Invalid network configuration.
        case invalidConfiguration = 7
        /// Try again later: a transient condition (CHECK of a tunnel that is still connecting).
        case tryAgainLater = 11

        /// The tunnel could not be brought up (`tunnelgate up` failed; everything was removed).
        case tunnelFailed = 100
        /// CHECK: the tunnel is not what ADD made (not running, not connected, kill switch not intact).
        case tunnelUnhealthy = 101
        /// DEL: the tunnel could not be removed completely.
        case teardownFailed = 102
    }
}
