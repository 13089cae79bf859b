import TunnelgateSettings

/// A token bucket per source of handshake messages, as the kernel's WireGuard and wireguard-go keep
/// one while under load: whoever can receive cookie replies at an address (and so send a valid MAC2
/// from it) still gets at most `ratePerSecond` handshake messages a second answered from there, after
/// a burst of `burst`. An IPv4 source is its address; an IPv6 source its /64, since one host commonly
/// has a whole /64 to send from.
///
/// Used by the device thread only. The table holds at most `capacity` sources; entries idle for a
/// second (their bucket full again) are swept once a second, and when the table is full after a sweep,
/// a new source is refused until one frees up (a flood from many addresses cannot make it grow
/// without bound, and the sources already in it keep their turn).
struct HandshakeRateLimiter {
    static let ratePerSecond = 20.0
    static let burst = 5.0
    static let capacity = 16384

    struct Source: Hashable {
        var high: UInt64
        var low: UInt64

        init(_ address: IPAddress) {
            switch address {
            case .v4(let a): high = 0; low = UInt64(a.value)
            case .v6(let a): high = a.high; low = UInt64.max  // the /64: the interface identifier dropped
            }
        }
    }

    private struct Bucket {
        var tokens: Double
        var updated: Double
    }

    private var buckets: [Source: Bucket] = [:]
    private var lastSweep = -Double.infinity

    init() { buckets.reserveCapacity(1024) }

    var sourceCount: Int { buckets.count }

    /// Whether one more handshake message from `address` may be answered now; takes its token.
    mutating func allow(_ address: IPAddress, now: Double) -> Bool {
        if now - lastSweep >= 1 { sweep(now: now) }
        let source = Source(address)
        if var bucket = buckets[source] {
            bucket.tokens = min(Self.burst, bucket.tokens + (now - bucket.updated) * Self.ratePerSecond)
            bucket.updated = now
            let allowed = bucket.tokens >= 1
            if allowed { bucket.tokens -= 1 }
            buckets[source] = bucket
            return allowed
        }
        if buckets.count >= Self.capacity {
            sweep(now: now)
            guard buckets.count < Self.capacity else { return false }
        }
        buckets[source] = Bucket(tokens: Self.burst - 1, updated: now)
        return true
    }

    /// Forgets the sources whose bucket has filled up again (nothing to remember of them).
    private mutating func sweep(now: Double) {
        lastSweep = now
        // A second idle refills any bucket (burst / rate is 0.25 s).
        buckets = buckets.filter { now - $0.value.updated < 1 }
    }
}
