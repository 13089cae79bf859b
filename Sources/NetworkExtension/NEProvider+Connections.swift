import Foundation

// A provider's own connections (docs/networkextension.md, The provider's own connections): made in the
// provider's packet plane, so their sockets carry the tunnel's carrier identity, and their host names
// resolved by the carrier resolver, never the tunnel's DNS.
extension NEProvider {
    /// A TCP connection to `remoteEndpoint`, with TLS when `enableTLS` (the endpoint's host name as the
    /// server name, verified against the system's trust store). It starts at once; watch `state`.
    /// `delegate` (an NWTCPConnectionAuthenticationDelegate on iOS) is kept and not asked: see
    /// NWTCPConnectionAuthenticationDelegate.
    public func createTCPConnection(to remoteEndpoint: NWEndpoint, enableTLS: Bool, tlsParameters TLSParameters: NWTLSParameters?,
                                    delegate: Any?) -> NWTCPConnection {
        NWTCPConnection(endpoint: remoteEndpoint, enableTLS: enableTLS, tlsParameters: TLSParameters)
    }

    /// A UDP session to `remoteEndpoint`, from `localEndpoint` when given (an address literal; port "0"
    /// for any).
    public func createUDPSession(to remoteEndpoint: NWEndpoint, from localEndpoint: NWHostEndpoint?) -> NWUDPSession {
        NWUDPSession(endpoint: remoteEndpoint, local: localEndpoint)
    }
}
