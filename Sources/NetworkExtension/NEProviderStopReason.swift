/// NEProviderStopReason: why the system stops a provider. Same raw values as Apple's.
/// On Linux the host passes `.userInitiated` for SIGTERM/SIGINT (`tunnelgate down`
/// sends SIGTERM) and `stop` on the control socket (stopVPNTunnel), `.sleep` when
/// logind announces sleep and the protocol has disconnectOnSleep, and `.connectionFailed`
/// when startTunnel did not complete within the host's `startTimeout` (iOS's 60 s; which
/// reason iOS passes then is not documented); no other reason.
public enum NEProviderStopReason: Int, Sendable {
    case none = 0
    case userInitiated = 1
    case providerFailed = 2
    case noNetworkAvailable = 3
    case unrecoverableNetworkChange = 4
    case providerDisabled = 5
    case authenticationCanceled = 6
    case configurationFailed = 7
    case idleTimeout = 8
    case configurationDisabled = 9
    case configurationRemoved = 10
    case superceded = 11
    case userLogout = 12
    case userSwitch = 13
    case connectionFailed = 14
    case sleep = 15
    case appUpdate = 16
    case internalError = 17
}
