import TunnelgateSettings

/// The Noise_IKpsk2 handshake of whitepaper 5.4.2-5.4.4, as functions from inputs to message
/// bytes and states: no sockets, no clock (the caller passes the timestamp) and no state of its
/// own. Each function names the whitepaper step it implements; C is the chaining key, H the hash,
/// κ an AEAD key, and every AEAD in the handshake uses nonce 0.
///
/// Flow: the initiator calls `createInitiation`; the responder drops datagrams that fail
/// `verifyMAC1` (and, under load, `CookieGenerator.verifyMAC2`) before any X25519, calls
/// `consumeInitiation`, checks the peer and timestamp, and answers with `createResponse`; the
/// initiator finishes with `consumeResponse`. Both ends then hold matching `Keypair`s.
public enum Handshake {
    /// The pre-shared key used when none is configured (Q = 0^32).
    static let zeroPresharedKey = [UInt8](repeating: 0, count: WireGuardCrypto.keyLength)

    /// C, τ, κ = KDF3(C, Q): the pre-shared key read in place from its secret memory (or zeros).
    static func mixPresharedKey(_ c: [UInt8], _ presharedKey: SecretKey?) -> ([UInt8], [UInt8], [UInt8]) {
        guard let presharedKey else { return WireGuardCrypto.kdf3(key: c, input: zeroPresharedKey) }
        return presharedKey.withUnsafeBytes { WireGuardCrypto.kdf3(key: c, input: $0) }
    }

    /// C = HASH(CONSTRUCTION), the same for every handshake.
    static let initialChainingKey = WireGuardCrypto.hash(WireGuardProtocol.construction)
    /// H = HASH(C ‖ IDENTIFIER), before the responder's static key is mixed in.
    static let initialHash = WireGuardCrypto.hash(initialChainingKey, WireGuardProtocol.identifier)

    // Field offsets (whitepaper 5.4.2, 5.4.3).
    enum Initiation {
        static let sender = 4, ephemeral = 8, encryptedStatic = 40, encryptedTimestamp = 88
        static let encryptedStaticLength = WireGuardCrypto.keyLength + WireGuardCrypto.tagLength
        static let encryptedTimestampLength = WireGuardCrypto.timestampLength + WireGuardCrypto.tagLength
    }
    enum Response {
        static let sender = 4, receiver = 8, ephemeral = 12, encryptedEmpty = 44
    }

    // MARK: Initiator

    /// Builds a handshake initiation (whitepaper 5.4.2) from us (`localStatic`) to the peer
    /// `remoteStatic`, and the state `consumeResponse` needs.
    ///
    /// - Parameters:
    ///   - presharedKey: the peer's pre-shared key, or nil for none (zeros). It enters the handshake
    ///     in `consumeResponse`.
    ///   - senderIndex: our fresh random index for this handshake.
    ///   - timestamp: `WireGuardCrypto.tai64n(...)` of now, 12 bytes.
    ///   - cookie: the 16-byte cookie from the peer's last cookie reply while younger than
    ///     `cookieRefreshTime`, for mac2; nil writes a zero mac2.
    ///   - ephemeral: the ephemeral key; nil (the default) generates one. For tests.
    public static func createInitiation(localStatic: PrivateKey, remoteStatic: WireGuardKey, presharedKey: SecretKey?,
                                        senderIndex: UInt32, timestamp: [UInt8], cookie: [UInt8]?,
                                        ephemeral: PrivateKey? = nil)
        throws(WireGuardProtocolError) -> (message: [UInt8], state: InitiatorState)
    {
        try checkCookie(cookie)
        guard timestamp.count == WireGuardCrypto.timestampLength else {
            throw .invalidLength(what: "timestamp", expected: WireGuardCrypto.timestampLength, actual: timestamp.count)
        }
        let ephemeral = ephemeral ?? PrivateKey.generate()
        var message = [UInt8](repeating: 0, count: MessageType.initiationLength)
        message[0] = MessageType.initiation.rawValue
        message.storeLittleEndian(senderIndex, at: Initiation.sender)

        // C_i = HASH(CONSTRUCTION); H_i = HASH(C_i ‖ IDENTIFIER); H_i = HASH(H_i ‖ S_pub_r)
        var c = initialChainingKey
        var h = WireGuardCrypto.hash(initialHash, remoteStatic.bytes)

        // C_i = KDF1(C_i, E_pub_i); msg.ephemeral = E_pub_i; H_i = HASH(H_i ‖ msg.ephemeral)
        let ephemeralPublic = ephemeral.publicKey.bytes
        c = WireGuardCrypto.kdf1(key: c, input: ephemeralPublic)
        message.replace(at: Initiation.ephemeral, with: ephemeralPublic)
        h = WireGuardCrypto.hash(h, ephemeralPublic)

        // C_i, κ = KDF2(C_i, DH(E_priv_i, S_pub_r)); msg.static = AEAD(κ, 0, S_pub_i, H_i); H_i = HASH(H_i ‖ msg.static)
        var es = try ephemeral.sharedSecret(with: remoteStatic)
        defer { Sodium.wipe(&es) }
        var (c1, k1) = WireGuardCrypto.kdf2(key: c, input: es)
        defer { Sodium.wipe(&k1) }
        c = c1
        let encryptedStatic = WireGuardCrypto.seal(key: k1, counter: 0, plaintext: localStatic.publicKey.bytes,
                                                   additionalData: h)
        message.replace(at: Initiation.encryptedStatic, with: encryptedStatic)
        h = WireGuardCrypto.hash(h, encryptedStatic)

        // C_i, κ = KDF2(C_i, DH(S_priv_i, S_pub_r)); msg.timestamp = AEAD(κ, 0, TIMESTAMP(), H_i); H_i = HASH(H_i ‖ msg.timestamp)
        var ss = try localStatic.sharedSecret(with: remoteStatic)
        defer { Sodium.wipe(&ss) }
        var (c2, k2) = WireGuardCrypto.kdf2(key: c, input: ss)
        defer { Sodium.wipe(&k2) }
        c = c2
        Sodium.wipe(&c1)
        let encryptedTimestamp = WireGuardCrypto.seal(key: k2, counter: 0, plaintext: timestamp, additionalData: h)
        message.replace(at: Initiation.encryptedTimestamp, with: encryptedTimestamp)
        h = WireGuardCrypto.hash(h, encryptedTimestamp)

        let mac1 = writeMACs(into: &message, receiverStatic: remoteStatic, cookie: cookie)
        let state = InitiatorState(senderIndex: senderIndex, remoteStatic: remoteStatic, mac1: mac1,
                                   chainingKey: c, hash: h, ephemeral: ephemeral)
        Sodium.wipe(&c2)
        return (message, state)
    }

    /// Consumes the handshake response (whitepaper 5.4.3) to the initiation `state` came from and
    /// returns the initiator's keypair. Checks, in order: the message's form, that its receiver
    /// index is `state.senderIndex`, mac1 (keyed to our static public key), then the AEAD of the
    /// empty payload, which only the holder of the responder's static key (and the same
    /// pre-shared key) can produce.
    public static func consumeResponse(_ message: UnsafeRawBufferPointer, state: InitiatorState,
                                       localStatic: PrivateKey, presharedKey: SecretKey?)
        throws(WireGuardProtocolError) -> Keypair
    {
        guard MessageType.classify(message) == .response else {
            throw .malformedMessage(expected: .response, length: message.count)
        }
        let receiver = message.littleEndianUInt32(at: Response.receiver)
        guard receiver == state.senderIndex else {
            throw .receiverIndexMismatch(expected: state.senderIndex, received: receiver)
        }
        guard verifyMAC1(message, localPublic: localStatic.publicKey) else { throw .invalidMAC1(.response) }
        let sender = message.littleEndianUInt32(at: Response.sender)

        // C_r = KDF1(C_r, E_pub_r); H_r = HASH(H_r ‖ msg.ephemeral), seen from the initiator.
        let ephemeralPublic = Array(message[Response.ephemeral..<Response.ephemeral + WireGuardCrypto.keyLength])
        var c = WireGuardCrypto.kdf1(key: state.chainingKey, input: ephemeralPublic)
        var h = WireGuardCrypto.hash(state.hash, ephemeralPublic)

        // C_r = KDF1(C_r, DH(E_priv_r, E_pub_i)) = KDF1(C, DH(E_priv_i, E_pub_r))
        var ee = try state.ephemeral.sharedSecret(with: ephemeralPublic)
        defer { Sodium.wipe(&ee) }
        c = WireGuardCrypto.kdf1(key: c, input: ee)
        // C_r = KDF1(C_r, DH(E_priv_r, S_pub_i)) = KDF1(C, DH(S_priv_i, E_pub_r))
        var se = try localStatic.sharedSecret(with: ephemeralPublic)
        defer { Sodium.wipe(&se) }
        c = WireGuardCrypto.kdf1(key: c, input: se)

        // C_r, τ, κ = KDF3(C_r, Q); H_r = HASH(H_r ‖ τ); msg.empty = AEAD(κ, 0, ε, H_r)
        var (c3, tau, k) = mixPresharedKey(c, presharedKey)
        defer {
            Sodium.wipe(&c3)
            Sodium.wipe(&tau)
            Sodium.wipe(&k)
            Sodium.wipe(&c)
        }
        h = WireGuardCrypto.hash(h, tau)
        let encryptedEmpty = Array(message[Response.encryptedEmpty..<Response.encryptedEmpty + WireGuardCrypto.tagLength])
        _ = try WireGuardCrypto.open(key: k, counter: 0, ciphertext: encryptedEmpty, additionalData: h, field: "empty")
        // H_r = HASH(H_r ‖ msg.empty) completes the transcript; the keys come from C alone.
        h = WireGuardCrypto.hash(h, encryptedEmpty)

        return Keypair(chainingKey: c3, localIndex: state.senderIndex, remoteIndex: sender, isInitiator: true)
    }

    /// `consumeResponse` over an array.
    public static func consumeResponse(_ message: [UInt8], state: InitiatorState, localStatic: PrivateKey,
                                       presharedKey: SecretKey?) throws(WireGuardProtocolError) -> Keypair {
        try withBytes(message) { (raw) throws(WireGuardProtocolError) in
            try consumeResponse(raw, state: state, localStatic: localStatic, presharedKey: presharedKey)
        }
    }

    // MARK: Responder

    /// Authenticates a handshake initiation (whitepaper 5.4.2) sent to us (`localStatic`) and
    /// returns who sent it with the state to answer it. Checks, in order: the message's form,
    /// mac1, then (two X25519s later) the AEADs of the static key and of the timestamp. Does not
    /// check mac2, the peer, or the timestamp's freshness: those are the caller's.
    public static func consumeInitiation(_ message: UnsafeRawBufferPointer, localStatic: PrivateKey)
        throws(WireGuardProtocolError) -> ReceivedInitiation
    {
        guard MessageType.classify(message) == .initiation else {
            throw .malformedMessage(expected: .initiation, length: message.count)
        }
        guard verifyMAC1(message, localPublic: localStatic.publicKey) else { throw .invalidMAC1(.initiation) }
        let sender = message.littleEndianUInt32(at: Initiation.sender)

        // C_r = HASH(CONSTRUCTION); H_r = HASH(HASH(C_r ‖ IDENTIFIER) ‖ S_pub_r)
        // C_r = KDF1(C_r, E_pub_i); H_r = HASH(H_r ‖ msg.ephemeral)
        let ephemeralPublic = Array(message[Initiation.ephemeral..<Initiation.ephemeral + WireGuardCrypto.keyLength])
        var c = WireGuardCrypto.kdf1(key: initialChainingKey, input: ephemeralPublic)
        var h = WireGuardCrypto.hash(WireGuardCrypto.hash(initialHash, localStatic.publicKey.bytes), ephemeralPublic)

        // C_r, κ = KDF2(C_r, DH(S_priv_r, E_pub_i)); S_pub_i = AEAD-open(κ, 0, msg.static, H_r); H_r = HASH(H_r ‖ msg.static)
        var es = try localStatic.sharedSecret(with: ephemeralPublic)
        defer { Sodium.wipe(&es) }
        var (c1, k1) = WireGuardCrypto.kdf2(key: c, input: es)
        defer {
            Sodium.wipe(&c1)
            Sodium.wipe(&k1)
        }
        let encryptedStatic = Array(message[Initiation.encryptedStatic..<Initiation.encryptedStatic + Initiation.encryptedStaticLength])
        let staticBytes = try WireGuardCrypto.open(key: k1, counter: 0, ciphertext: encryptedStatic, additionalData: h,
                                                   field: "static")
        let remoteStatic = WireGuardKey(staticBytes)!
        h = WireGuardCrypto.hash(h, encryptedStatic)

        // C_r, κ = KDF2(C_r, DH(S_priv_r, S_pub_i)); TIMESTAMP = AEAD-open(κ, 0, msg.timestamp, H_r); H_r = HASH(H_r ‖ msg.timestamp)
        var ss = try localStatic.sharedSecret(with: remoteStatic)
        defer { Sodium.wipe(&ss) }
        var (c2, k2) = WireGuardCrypto.kdf2(key: c1, input: ss)
        defer { Sodium.wipe(&k2) }
        c = c2
        let encryptedTimestamp = Array(
            message[Initiation.encryptedTimestamp..<Initiation.encryptedTimestamp + Initiation.encryptedTimestampLength])
        let timestamp = try WireGuardCrypto.open(key: k2, counter: 0, ciphertext: encryptedTimestamp, additionalData: h,
                                                 field: "timestamp")
        h = WireGuardCrypto.hash(h, encryptedTimestamp)
        Sodium.wipe(&c2)

        let mac1Offset = MessageType.initiationLength - 2 * WireGuardCrypto.macLength
        return ReceivedInitiation(remoteStatic: remoteStatic, timestamp: timestamp, senderIndex: sender,
                                  mac1: Array(message[mac1Offset..<mac1Offset + WireGuardCrypto.macLength]),
                                  remoteEphemeral: ephemeralPublic, chainingKey: c, hash: h)
    }

    /// `consumeInitiation` over an array.
    public static func consumeInitiation(_ message: [UInt8], localStatic: PrivateKey)
        throws(WireGuardProtocolError) -> ReceivedInitiation {
        try withBytes(message) { (raw) throws(WireGuardProtocolError) in
            try consumeInitiation(raw, localStatic: localStatic)
        }
    }

    /// Builds the handshake response (whitepaper 5.4.3) to an authenticated initiation and returns
    /// the responder's keypair (`isInitiator == false`; it must not send transport data before it
    /// received the initiator's first transport message).
    ///
    /// - Parameters:
    ///   - presharedKey: the peer's pre-shared key, or nil for none (zeros).
    ///   - senderIndex: our fresh random index; the initiator's transport messages will carry it.
    ///   - cookie: the peer's cookie for mac2, as for `createInitiation`.
    ///   - ephemeral: the ephemeral key; nil (the default) generates one. For tests.
    public static func createResponse(to initiation: ReceivedInitiation, presharedKey: SecretKey?, senderIndex: UInt32,
                                      cookie: [UInt8]?, ephemeral: PrivateKey? = nil)
        throws(WireGuardProtocolError) -> (message: [UInt8], keypair: Keypair)
    {
        try checkCookie(cookie)
        let ephemeral = ephemeral ?? PrivateKey.generate()
        var message = [UInt8](repeating: 0, count: MessageType.responseLength)
        message[0] = MessageType.response.rawValue
        message.storeLittleEndian(senderIndex, at: Response.sender)
        message.storeLittleEndian(initiation.senderIndex, at: Response.receiver)

        // C_r = KDF1(C_r, E_pub_r); msg.ephemeral = E_pub_r; H_r = HASH(H_r ‖ msg.ephemeral)
        let ephemeralPublic = ephemeral.publicKey.bytes
        var c = WireGuardCrypto.kdf1(key: initiation.chainingKey, input: ephemeralPublic)
        message.replace(at: Response.ephemeral, with: ephemeralPublic)
        var h = WireGuardCrypto.hash(initiation.hash, ephemeralPublic)

        // C_r = KDF1(C_r, DH(E_priv_r, E_pub_i)); C_r = KDF1(C_r, DH(E_priv_r, S_pub_i))
        var ee = try ephemeral.sharedSecret(with: initiation.remoteEphemeral)
        defer { Sodium.wipe(&ee) }
        c = WireGuardCrypto.kdf1(key: c, input: ee)
        var se = try ephemeral.sharedSecret(with: initiation.remoteStatic)
        defer { Sodium.wipe(&se) }
        c = WireGuardCrypto.kdf1(key: c, input: se)

        // C_r, τ, κ = KDF3(C_r, Q); H_r = HASH(H_r ‖ τ); msg.empty = AEAD(κ, 0, ε, H_r); H_r = HASH(H_r ‖ msg.empty)
        var (c3, tau, k) = mixPresharedKey(c, presharedKey)
        defer {
            Sodium.wipe(&c3)
            Sodium.wipe(&tau)
            Sodium.wipe(&k)
            Sodium.wipe(&c)
        }
        h = WireGuardCrypto.hash(h, tau)
        let encryptedEmpty = WireGuardCrypto.seal(key: k, counter: 0, plaintext: [], additionalData: h)
        message.replace(at: Response.encryptedEmpty, with: encryptedEmpty)
        h = WireGuardCrypto.hash(h, encryptedEmpty)

        writeMACs(into: &message, receiverStatic: initiation.remoteStatic, cookie: cookie)
        let keypair = Keypair(chainingKey: c3, localIndex: senderIndex, remoteIndex: initiation.senderIndex,
                              isInitiator: false)
        return (message, keypair)
    }

    // MARK: MACs and cookies

    /// True when `message` is a well-formed initiation or response whose mac1 is
    /// MAC(HASH(LABEL_MAC1 ‖ localPublic), message up to mac1): it was made for us. Costs two
    /// BLAKE2s and no X25519, so the device runs it before anything else (whitepaper 5.4.4).
    public static func verifyMAC1(_ message: UnsafeRawBufferPointer, localPublic: WireGuardKey) -> Bool {
        verifyMAC1(message, mac1Key: mac1Key(for: localPublic))
    }

    /// `verifyMAC1` with the precomputed key HASH(LABEL_MAC1 ‖ localPublic) (`mac1Key(for:)`).
    public static func verifyMAC1(_ message: UnsafeRawBufferPointer, mac1Key: [UInt8]) -> Bool {
        guard let type = MessageType.classify(message), type == .initiation || type == .response else { return false }
        let mac1Offset = message.count - 2 * WireGuardCrypto.macLength
        let expected = WireGuardCrypto.mac(key: mac1Key, UnsafeRawBufferPointer(rebasing: message[..<mac1Offset]))
        return expected.withUnsafeBytes { e in
            Sodium.constantTimeEqual(e, UnsafeRawBufferPointer(rebasing: message[mac1Offset..<mac1Offset + WireGuardCrypto.macLength]))
        }
    }

    /// True when `message` is a well-formed initiation or response whose mac2 is
    /// MAC(cookie, message up to mac2). The responder under load computes `cookie` for the
    /// datagram's source (`CookieGenerator.cookie(for:now:)`; `CookieGenerator.verifyMAC2` does both).
    public static func verifyMAC2(_ message: UnsafeRawBufferPointer, cookie: [UInt8]) -> Bool {
        guard cookie.count == WireGuardCrypto.macLength,
              let type = MessageType.classify(message), type == .initiation || type == .response
        else { return false }
        let mac2Offset = message.count - WireGuardCrypto.macLength
        let expected = WireGuardCrypto.mac(key: cookie, UnsafeRawBufferPointer(rebasing: message[..<mac2Offset]))
        return expected.withUnsafeBytes { e in
            Sodium.constantTimeEqual(e, UnsafeRawBufferPointer(rebasing: message[mac2Offset...]))
        }
    }

    /// HASH(LABEL_MAC1 ‖ publicKey): the key of mac1 for messages sent to `publicKey`.
    public static func mac1Key(for publicKey: WireGuardKey) -> [UInt8] {
        WireGuardCrypto.hash(WireGuardProtocol.labelMAC1, publicKey.bytes)
    }

    /// HASH(LABEL_COOKIE ‖ publicKey): the XChaCha20-Poly1305 key of cookie replies sent by `publicKey`'s owner.
    public static func cookieKey(for publicKey: WireGuardKey) -> [UInt8] {
        WireGuardCrypto.hash(WireGuardProtocol.labelCookie, publicKey.bytes)
    }

    /// Decrypts a cookie reply (whitepaper 5.4.7) from the peer `remotePublic` to our last
    /// initiation or response, whose mac1 was `lastMAC1`, and returns the 16-byte cookie. The
    /// device matches the reply's receiver index (`MessageType.receiverIndex(in:)`) to that
    /// message first, stores the cookie with the time it arrived, and passes it as `cookie:` while
    /// it is younger than `cookieRefreshTime`.
    public static func consumeCookieReply(_ reply: UnsafeRawBufferPointer, remotePublic: WireGuardKey,
                                          lastMAC1: [UInt8]) throws(WireGuardProtocolError) -> [UInt8] {
        guard MessageType.classify(reply) == .cookieReply else {
            throw .malformedMessage(expected: .cookieReply, length: reply.count)
        }
        guard lastMAC1.count == WireGuardCrypto.macLength else {
            throw .invalidLength(what: "mac1", expected: WireGuardCrypto.macLength, actual: lastMAC1.count)
        }
        let nonce = Array(reply[CookieReply.nonce..<CookieReply.encryptedCookie])
        let encryptedCookie = Array(reply[CookieReply.encryptedCookie...])
        return try WireGuardCrypto.xopen(key: cookieKey(for: remotePublic), nonce: nonce, ciphertext: encryptedCookie,
                                         additionalData: lastMAC1, field: "cookie")
    }

    /// `consumeCookieReply` over an array.
    public static func consumeCookieReply(_ reply: [UInt8], remotePublic: WireGuardKey,
                                          lastMAC1: [UInt8]) throws(WireGuardProtocolError) -> [UInt8] {
        try withBytes(reply) { (raw) throws(WireGuardProtocolError) in
            try consumeCookieReply(raw, remotePublic: remotePublic, lastMAC1: lastMAC1)
        }
    }

    enum CookieReply {
        static let receiver = 4, nonce = 8, encryptedCookie = 32
    }

    // MARK: Helpers

    /// Writes mac1 = MAC(HASH(LABEL_MAC1 ‖ S_pub_receiver), msg up to mac1) and mac2 =
    /// MAC(cookie, msg up to mac2), or zeros without a cookie, into the last 32 bytes; returns mac1.
    @discardableResult
    static func writeMACs(into message: inout [UInt8], receiverStatic: WireGuardKey, cookie: [UInt8]?) -> [UInt8] {
        let mac1Offset = message.count - 2 * WireGuardCrypto.macLength
        let mac2Offset = message.count - WireGuardCrypto.macLength
        let mac1 = WireGuardCrypto.mac(key: mac1Key(for: receiverStatic), Array(message[..<mac1Offset]))
        message.replace(at: mac1Offset, with: mac1)
        if let cookie {
            message.replace(at: mac2Offset, with: WireGuardCrypto.mac(key: cookie, Array(message[..<mac2Offset])))
        }
        return mac1
    }

    static func checkCookie(_ cookie: [UInt8]?) throws(WireGuardProtocolError) {
        if let cookie, cookie.count != WireGuardCrypto.macLength {
            throw .invalidLength(what: "cookie", expected: WireGuardCrypto.macLength, actual: cookie.count)
        }
    }

    static func withBytes<R>(_ bytes: [UInt8], _ body: (UnsafeRawBufferPointer) throws(WireGuardProtocolError) -> R)
        throws(WireGuardProtocolError) -> R {
        let result: Result<R, WireGuardProtocolError> = bytes.withUnsafeBytes { raw in
            do throws(WireGuardProtocolError) { return .success(try body(raw)) } catch { return .failure(error) }
        }
        return try result.get()
    }
}

extension Array where Element == UInt8 {
    /// Overwrites `bytes.count` bytes starting at `offset`.
    mutating func replace(at offset: Int, with bytes: [UInt8]) {
        replaceSubrange(offset..<offset + bytes.count, with: bytes)
    }

    mutating func storeLittleEndian(_ value: UInt32, at offset: Int) {
        for i in 0..<4 { self[offset + i] = UInt8(truncatingIfNeeded: value >> (8 * UInt32(i))) }
    }
}
