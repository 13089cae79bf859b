import Foundation

/// NWTLSParameters: what iOS lets a provider say about a createTCPConnection's TLS. Thin on iOS too:
/// the server's name is the endpoint's host name, and the server's certificate is checked against the
/// system's trust store (on Linux: /etc/ssl/certs, Debian's ca-certificates bundle and directory).
///
/// - `minimumSSLProtocolVersion`, `maximumSSLProtocolVersion`: Security's SSLProtocol raw values
///   (kTLSProtocol1 = 4, kTLSProtocol11 = 7, kTLSProtocol12 = 8, kTLSProtocol13 = 10; 0: the library's
///   bound), honoured. The default minimum is TLS 1.2, as on iOS.
/// - `tlsSessionID`, `sslCipherSuites`: kept, not used (OpenSSL picks its own cipher suites; sessions
///   are not resumed).
open class NWTLSParameters: NSObject, @unchecked Sendable {
    // @unchecked Sendable: set before the connection is made, read once when it starts.
    open var tlsSessionID: Data?
    open var sslCipherSuites: Set<NSNumber>?
    open var minimumSSLProtocolVersion: Int = 8
    open var maximumSSLProtocolVersion: Int = 0

    public override init() { super.init() }

    /// OpenSSL's version number for an SSLProtocol raw value (0 for none); nil for one it has no TLS for.
    static func openSSLVersion(_ sslProtocol: Int) -> Int32? {
        switch sslProtocol {
        case 0: 0
        case 4: 0x0301  // TLS1_VERSION
        case 7: 0x0302  // TLS1_1_VERSION
        case 8: 0x0303  // TLS1_2_VERSION
        case 10, 11: 0x0304  // TLS1_3_VERSION (11: kTLSProtocolMaxSupported)
        default: nil
        }
    }
}

/// NWTCPConnectionAuthenticationDelegate: present so that a provider's delegate compiles. Custom trust
/// evaluation (`evaluateTrust(for:peerCertificateChain:completionHandler:)`) and client identities need
/// Security's SecTrust and SecIdentity, which Linux has not: the connection always verifies the server
/// against the trust store and the endpoint's name, and presents no client certificate, whatever the
/// delegate says.
public protocol NWTCPConnectionAuthenticationDelegate: AnyObject {
    func shouldProvideIdentity(for connection: NWTCPConnection) -> Bool
    func shouldEvaluateTrust(for connection: NWTCPConnection) -> Bool
}

extension NWTCPConnectionAuthenticationDelegate {
    public func shouldProvideIdentity(for connection: NWTCPConnection) -> Bool { false }
    public func shouldEvaluateTrust(for connection: NWTCPConnection) -> Bool { false }
}

/// NWTCPConnectionState, Apple's raw values.
public enum NWTCPConnectionState: Int, Sendable {
    case invalid = 0
    /// Resolving the host name and connecting (and the TLS handshake).
    case connecting = 1
    /// Not used on Linux: a connection that cannot connect is disconnected with its error.
    case waiting = 2
    case connected = 3
    /// Failed (`error` says why) or closed by the peer.
    case disconnected = 4
    case cancelled = 5
}

/// NWUDPSessionState, Apple's raw values.
public enum NWUDPSessionState: Int, Sendable {
    case invalid = 0
    /// Not used on Linux (see NWTCPConnectionState.waiting).
    case waiting = 1
    /// Resolving the host name and connecting the socket.
    case preparing = 2
    case ready = 3
    case failed = 4
    case cancelled = 5
}
