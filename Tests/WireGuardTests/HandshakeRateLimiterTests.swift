import TunnelgateSettings
@testable import WireGuard
import XCTest

/// The per-source token bucket for handshake messages under load: 5 at once, then 20 a second, per
/// IPv4 address or IPv6 /64, in a table that cannot grow past its capacity.
final class HandshakeRateLimiterTests: XCTestCase {
    let a = IPAddress("198.18.0.1")!, b = IPAddress("198.18.0.2")!

    func testBurstThenRefusedThenRefilledAtTheRate() {
        var limiter = HandshakeRateLimiter()
        XCTAssertEqual((0..<8).map { _ in limiter.allow(a, now: 100) }, [true, true, true, true, true, false, false, false])
        XCTAssertFalse(limiter.allow(a, now: 100.04), "0.04 s refills less than one token (20/s)")
        XCTAssertTrue(limiter.allow(a, now: 100.051), "0.051 s refills one")
        XCTAssertFalse(limiter.allow(a, now: 100.052))
        // Over one second at a steady 100 a second, about 20 are allowed, never more than rate + burst.
        var allowed = 0
        for i in 1...100 where limiter.allow(a, now: 101 + Double(i) / 100) { allowed += 1 }
        XCTAssertTrue((19...25).contains(allowed), "\(allowed) allowed in 1 s at 100/s")
    }

    func testSourcesAreIndependentAndIPv6CountsBySlash64() {
        var limiter = HandshakeRateLimiter()
        for _ in 0..<5 { XCTAssertTrue(limiter.allow(a, now: 1)) }
        XCTAssertFalse(limiter.allow(a, now: 1))
        XCTAssertTrue(limiter.allow(b, now: 1), "another address has its own bucket")
        let hostA = IPAddress("2001:db8:1:2::1")!, sameNet = IPAddress("2001:db8:1:2:ffff::9")!, otherNet = IPAddress("2001:db8:1:3::1")!
        for _ in 0..<5 { XCTAssertTrue(limiter.allow(hostA, now: 1)) }
        XCTAssertFalse(limiter.allow(sameNet, now: 1), "the same /64 shares the bucket")
        XCTAssertTrue(limiter.allow(otherNet, now: 1), "another /64 does not")
    }

    func testTableIsBoundedAndSweptWhenSourcesGoQuiet() {
        var limiter = HandshakeRateLimiter()
        for i in 0..<HandshakeRateLimiter.capacity {
            XCTAssertTrue(limiter.allow(.v4(IPv4Address(0x0A00_0000 + UInt32(i))), now: 5 + Double(i) * 1e-6))
        }
        XCTAssertEqual(limiter.sourceCount, HandshakeRateLimiter.capacity)
        XCTAssertFalse(limiter.allow(a, now: 5.5), "a new source while the table is full is refused")
        XCTAssertTrue(limiter.allow(.v4(IPv4Address(0x0A00_0000)), now: 5.5), "a known one still has its tokens")
        XCTAssertTrue(limiter.allow(a, now: 7), "a second later the quiet sources are swept")
        XCTAssertLessThan(limiter.sourceCount, 3)
    }
}
