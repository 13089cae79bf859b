import TunnelgateSettings

/// One transport session: a keypair from a completed handshake, its send
/// counter and replay window.
struct Session {
    var keypair: Keypair
    var sendCounter: UInt64 = 0
    var replay = ReplayWindow()
    /// Monotonic seconds when the handshake that made it completed.
    let created: Double
    var localIndex: UInt32 { keypair.localIndex }
}

/// A peer's state on the device thread: its configuration, the handshake
/// in flight, up to three sessions (whitepaper §6: previous, current, and
/// the responder's next, which becomes current when the initiator first
/// uses it), the packets staged while no session can carry them, and the
/// deadlines of its timers (monotonic seconds, nil when not armed).
final class Peer {
    let id: Int
    let publicKey: WireGuardKey
    /// In secret memory (the configuration's, or the UAPI parser's): never copied.
    var presharedKey: SecretKey?
    var endpoint: Endpoint?
    /// Seconds; 0 is off.
    var persistentKeepalive: UInt16 = 0

    // The handshake this peer initiated and is waiting on.
    var initiation: InitiatorState?
    var initiationIndex: UInt32?
    var lastInitiationSent = -Double.infinity
    var attempts = 0
    var lastMAC1: [UInt8]?
    var cookie: [UInt8]?
    var cookieReceived = -Double.infinity

    // What this peer last initiated towards us.
    var greatestTimestamp = [UInt8](repeating: 0, count: 12)
    var lastInitiationConsumed = -Double.infinity

    var previous: Session?
    var current: Session?
    var next: Session?
    /// Packets waiting for a session; an empty packet is a keepalive.
    var staged: [[UInt8]] = []
    static let stagedLimit = 128

    var retransmitAt: Double?
    var newHandshakeAt: Double?
    var keepaliveAt: Double?
    var persistentKeepaliveAt: Double?
    var zeroKeysAt: Double?

    /// Wall-clock time of the last completed handshake, for `wg show`.
    var lastHandshake: (seconds: Int, nanoseconds: Int) = (0, 0)
    var rxBytes: UInt64 = 0
    var txBytes: UInt64 = 0
    var handshakesCompleted = 0

    init(id: Int, publicKey: WireGuardKey) {
        self.id = id
        self.publicKey = publicKey
    }

    /// The earliest armed timer, or nil.
    var nextDeadline: Double? {
        [retransmitAt, newHandshakeAt, keepaliveAt, persistentKeepaliveAt, zeroKeysAt].compactMap { $0 }.min()
    }

    /// The cookie to put in MAC2, while it is fresh.
    func freshCookie(now: Double, lifetime: Double) -> [UInt8]? {
        guard let cookie, now - cookieReceived < lifetime else { return nil }
        return cookie
    }

    enum Slot { case previous, current, next }

    /// Which session receives on `index`.
    func slot(of index: UInt32) -> Slot? {
        if current?.localIndex == index { return .current }
        if next?.localIndex == index { return .next }
        if previous?.localIndex == index { return .previous }
        return nil
    }

    func session(_ slot: Slot) -> Session? {
        switch slot {
        case .previous: previous
        case .current: current
        case .next: next
        }
    }

    /// Marks `counter` received in the session's replay window; false when it was seen or is too old.
    func acceptCounter(_ counter: UInt64, in slot: Slot) -> Bool {
        switch slot {
        case .previous: previous?.replay.accept(counter) ?? false
        case .current: current?.replay.accept(counter) ?? false
        case .next: next?.replay.accept(counter) ?? false
        }
    }

    var indices: [UInt32] {
        [initiationIndex, previous?.localIndex, current?.localIndex, next?.localIndex].compactMap { $0 }
    }

    /// Wipes every session and the handshake in flight (keys zeroed).
    func clearKeys() {
        previous?.keypair.zero(); current?.keypair.zero(); next?.keypair.zero()
        previous = nil; current = nil; next = nil
        initiation = nil; initiationIndex = nil
        retransmitAt = nil; newHandshakeAt = nil; keepaliveAt = nil; zeroKeysAt = nil
        attempts = 0
    }
}
