/// The protocol's fixed values, from the WireGuard whitepaper (section 6.1
/// for the timers, section 5.4 for the message formats).
public enum WireGuardProtocol {
    /// Noise_IKpsk2_25519_ChaChaPoly_BLAKE2s, the construction's name (the initial chaining key's input).
    public static let construction = Array("Noise_IKpsk2_25519_ChaChaPoly_BLAKE2s".utf8)
    /// Mixed into the hash after the construction.
    public static let identifier = Array("WireGuard v1 zx2c4 Jason@zx2c4.com".utf8)
    /// The MAC1 key's label, hashed with the receiver's static public key.
    public static let labelMAC1 = Array("mac1----".utf8)
    /// The cookie key's label, hashed with the receiver's static public key.
    public static let labelCookie = Array("cookie--".utf8)

    public static let rekeyAfterMessages: UInt64 = 1 << 60
    public static let rejectAfterMessages: UInt64 = UInt64.max - (1 << 13)
    /// Seconds.
    public static let rekeyAfterTime = 120.0
    public static let rejectAfterTime = 180.0
    public static let rekeyAttemptTime = 90.0
    public static let rekeyTimeout = 5.0
    public static let keepaliveTimeout = 10.0
    /// How long a cookie received in a cookie reply is used for MAC2, and how often the cookie secret changes.
    public static let cookieRefreshTime = 120.0
}

extension WireGuardProtocol {
    /// The TAI64 label of the Unix epoch as WireGuard implementations write it: 2^62, plus the 10 s
    /// TAI-UTC offset of 1970 that libtai and the reference implementations add.
    public static let tai64nBase: UInt64 = (1 << 62) + 10
}
