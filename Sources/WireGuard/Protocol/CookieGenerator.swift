/// The responder's side of the cookie mechanism (whitepaper 5.4.7): under load, a handshake
/// message is only processed when its mac2 proves the sender can receive at its source address;
/// otherwise the device answers with a cookie reply and drops it.
///
/// A value the device thread owns. Time is passed in as seconds on any monotonic clock; the
/// secret R_m is replaced with fresh random bytes once it is `cookieRefreshTime` old, when the
/// next cookie is made.
public struct CookieGenerator: Sendable, CustomStringConvertible, CustomReflectable {
    /// Our static public key.
    public let localPublic: WireGuardKey
    /// HASH(LABEL_MAC1 ‖ localPublic), for `verifyMAC1`.
    public let mac1Key: [UInt8]
    /// HASH(LABEL_COOKIE ‖ localPublic): the XChaCha20-Poly1305 key of our cookie replies.
    private let cookieKey: [UInt8]
    /// R_m.
    private var secret: [UInt8]
    private var secretCreated: Double

    public init(localPublic: WireGuardKey, now: Double) {
        self.localPublic = localPublic
        mac1Key = Handshake.mac1Key(for: localPublic)
        cookieKey = Handshake.cookieKey(for: localPublic)
        secret = Sodium.randomBytes(WireGuardCrypto.keyLength)
        secretCreated = now
    }

    /// The bytes a cookie is bound to for a source address: the IP address (4 or 16 bytes)
    /// followed by the UDP port, big-endian. Any stable encoding works, since only we compute and
    /// check cookies; this is the one `endpoint:` parameters expect.
    public static func endpointBytes(address: [UInt8], port: UInt16) -> [UInt8] {
        address + [UInt8(port >> 8), UInt8(port & 0xFF)]
    }

    /// τ = MAC(R_m, A_m): the 16-byte cookie for the source `endpoint` (`endpointBytes`). Replaces
    /// R_m first when it is `cookieRefreshTime` old (or `now` went backwards).
    public mutating func cookie(for endpoint: [UInt8], now: Double) -> [UInt8] {
        if isSecretExpired(now: now) {
            Sodium.wipe(&secret)
            secret = Sodium.randomBytes(WireGuardCrypto.keyLength)
            secretCreated = now
        }
        return WireGuardCrypto.mac(key: secret, endpoint)
    }

    /// The 64-byte cookie reply to the initiation or response `message` from `endpoint`: type 3,
    /// receiver = the message's sender index, a random 24-byte nonce, and
    /// XAEAD(HASH(LABEL_COOKIE ‖ S_pub_m), nonce, τ, the message's mac1). Nil when `message` is not
    /// a well-formed initiation or response. The device only answers messages whose mac1 verified.
    public mutating func createReply(to message: UnsafeRawBufferPointer, endpoint: [UInt8], now: Double) -> [UInt8]? {
        guard let sender = MessageType.senderIndex(in: message), let mac1 = MessageType.mac1(of: message) else { return nil }
        var tau = cookie(for: endpoint, now: now)
        defer { Sodium.wipe(&tau) }
        let nonce = Sodium.randomBytes(WireGuardCrypto.extendedNonceLength)
        var reply = [UInt8](repeating: 0, count: MessageType.cookieReplyLength)
        reply[0] = MessageType.cookieReply.rawValue
        reply.storeLittleEndian(sender, at: Handshake.CookieReply.receiver)
        reply.replace(at: Handshake.CookieReply.nonce, with: nonce)
        reply.replace(at: Handshake.CookieReply.encryptedCookie,
                      with: WireGuardCrypto.xseal(key: cookieKey, nonce: nonce, plaintext: tau, additionalData: mac1))
        return reply
    }

    /// `createReply` over an array.
    public mutating func createReply(to message: [UInt8], endpoint: [UInt8], now: Double) -> [UInt8]? {
        message.withUnsafeBytes { createReply(to: $0, endpoint: endpoint, now: now) }
    }

    /// True when `message` is a well-formed initiation or response made for us (mac1).
    public func verifyMAC1(_ message: UnsafeRawBufferPointer) -> Bool {
        Handshake.verifyMAC1(message, mac1Key: mac1Key)
    }

    /// True when `message`'s mac2 was made with the cookie we give `endpoint` now. False while
    /// the secret is expired: the sender needs a new cookie, which the next `createReply` makes.
    public func verifyMAC2(_ message: UnsafeRawBufferPointer, endpoint: [UInt8], now: Double) -> Bool {
        guard !isSecretExpired(now: now) else { return false }
        var tau = WireGuardCrypto.mac(key: secret, endpoint)
        defer { Sodium.wipe(&tau) }
        return Handshake.verifyMAC2(message, cookie: tau)
    }

    private func isSecretExpired(now: Double) -> Bool {
        let age = now - secretCreated
        return !(age >= 0 && age < WireGuardProtocol.cookieRefreshTime)
    }

    public var description: String { "CookieGenerator(localPublic: \(localPublic))" }
    public var customMirror: Mirror { Mirror(self, children: ["localPublic": localPublic]) }
}
