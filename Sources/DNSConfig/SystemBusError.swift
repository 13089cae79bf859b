import LinuxSystem

/// A D-Bus operation that failed: what was attempted, and why.
/// "org.freedesktop.resolve1.Manager.RevertLink(7) failed: org.freedesktop.resolve1.NoSuchLink: Link 7 not known"
public struct SystemBusError: Error, Sendable, CustomStringConvertible {
    public enum Reason: Error, Hashable, Sendable {
        /// sd-bus failed locally (connect, send, authentication, a timeout): its negative errno.
        case local(Errno)
        /// The peer (or the bus daemon on its behalf) answered with an error.
        case remote(name: String, message: String)
        /// The reply did not have the expected form.
        case unexpectedReply(String)
    }

    /// "connect to unix:path=/run/dbus/system_bus_socket", "org.freedesktop.resolve1.Manager.SetLinkDNS(7, …)".
    public let operation: String
    public let reason: Reason

    public init(_ operation: String, _ reason: Reason) {
        self.operation = operation
        self.reason = reason
    }

    /// The D-Bus error name of a remote error ("org.freedesktop.DBus.Error.ServiceUnknown").
    public var errorName: String? {
        if case .remote(let name, _) = reason { return name }
        return nil
    }

    public var description: String {
        switch reason {
        case .local(let errno): "\(operation) failed: \(errno)"
        case .remote(let name, let message): "\(operation) failed: \(name): \(message)"
        case .unexpectedReply(let what): "\(operation) failed: unexpected reply: \(what)"
        }
    }

    /// Names of errors this code tells apart.
    public static let serviceUnknown = "org.freedesktop.DBus.Error.ServiceUnknown"
    public static let nameHasNoOwner = "org.freedesktop.DBus.Error.NameHasNoOwner"
    public static let unknownMethod = "org.freedesktop.DBus.Error.UnknownMethod"
}
