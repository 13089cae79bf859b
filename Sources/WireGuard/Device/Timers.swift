import LinuxSystem

/// The timer values the device runs on (whitepaper §6.1), in seconds.
///
/// The shipped values are the protocol's. Tests of rekeying and timeouts
/// can shrink them all by one factor with the environment variable
/// `TUNNELGATE_WIREGUARD_TEST_TIME_SCALE` (e.g. `0.05`: rekey after 6 s);
/// it is read once at start, said in the log, and never set by Tunnelgate.
public struct WireGuardTimers: Sendable, Equatable {
    public var rekeyAfterTime = WireGuardProtocol.rekeyAfterTime
    public var rejectAfterTime = WireGuardProtocol.rejectAfterTime
    public var rekeyAttemptTime = WireGuardProtocol.rekeyAttemptTime
    public var rekeyTimeout = WireGuardProtocol.rekeyTimeout
    public var keepaliveTimeout = WireGuardProtocol.keepaliveTimeout
    public var cookieRefreshTime = WireGuardProtocol.cookieRefreshTime
    public var rekeyAfterMessages = WireGuardProtocol.rekeyAfterMessages
    /// 1 for the shipped values.
    public private(set) var scale = 1.0

    public static let standard = WireGuardTimers()
    public static let testScaleVariable = "TUNNELGATE_WIREGUARD_TEST_TIME_SCALE"

    /// The standard timers, scaled when the test variable is set to a factor in (0, 1].
    public static func fromEnvironment() -> WireGuardTimers {
        guard let raw = ProcessControl.environmentValue(testScaleVariable), let factor = Double(raw),
              factor > 0, factor <= 1 else { return .standard }
        return WireGuardTimers.standard.scaled(by: factor)
    }

    public func scaled(by factor: Double) -> WireGuardTimers {
        var t = self
        t.rekeyAfterTime *= factor
        t.rejectAfterTime *= factor
        t.rekeyAttemptTime *= factor
        t.rekeyTimeout *= factor
        t.keepaliveTimeout *= factor
        t.cookieRefreshTime *= factor
        t.scale = scale * factor
        return t
    }

    /// How many initiations are sent for one handshake before giving up.
    var maximumAttempts: Int { Int((rekeyAttemptTime / rekeyTimeout).rounded(.up)) }
    /// A data-sending initiator starts a new handshake when its session is this old.
    var rekeyOnReceiveAge: Double { rejectAfterTime - keepaliveTimeout - rekeyTimeout }
    /// Sessions and handshake state are wiped this long after the last handshake.
    var zeroKeysAfter: Double { rejectAfterTime * 3 }
}
