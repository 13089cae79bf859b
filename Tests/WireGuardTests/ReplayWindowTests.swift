import WireGuard
import XCTest

final class ReplayWindowTests: XCTestCase {
    func testInOrderAndDuplicates() {
        var window = ReplayWindow()
        XCTAssertNil(window.greatestAccepted)
        for counter: UInt64 in 0..<10_000 {
            XCTAssertTrue(window.wouldAccept(counter))
            XCTAssertTrue(window.accept(counter), "\(counter)")
            XCTAssertFalse(window.accept(counter), "duplicate \(counter)")
        }
        XCTAssertEqual(window.greatestAccepted, 9_999)
    }

    func testOutOfOrderWithinTheWindow() {
        var window = ReplayWindow()
        XCTAssertTrue(window.accept(100))
        XCTAssertTrue(window.accept(0))
        XCTAssertTrue(window.accept(99))
        XCTAssertTrue(window.accept(50))
        XCTAssertFalse(window.accept(50))
        XCTAssertTrue(window.accept(101))
        XCTAssertFalse(window.accept(99))
        // Reversed order across several words of the bitmap.
        var reversed = ReplayWindow()
        for counter in stride(from: UInt64(2_000), through: 0, by: -1) {
            XCTAssertTrue(reversed.accept(counter), "\(counter)")
        }
        for counter: UInt64 in 0...2_000 { XCTAssertFalse(reversed.wouldAccept(counter), "\(counter)") }
    }

    func testTooOldIsRefusedAndTheWindowIsAtLeast2048() {
        XCTAssertGreaterThanOrEqual(ReplayWindow.windowSize, 2_048)
        var window = ReplayWindow()
        let top: UInt64 = 20_000
        XCTAssertTrue(window.accept(top))
        XCTAssertTrue(window.wouldAccept(top - ReplayWindow.windowSize + 1))
        XCTAssertFalse(window.wouldAccept(top - ReplayWindow.windowSize))
        XCTAssertFalse(window.accept(0))
        XCTAssertTrue(window.accept(top - 2_048))
    }

    func testHugeJumpForgetsTheOldWindow() {
        var window = ReplayWindow()
        for counter: UInt64 in 0..<200 { XCTAssertTrue(window.accept(counter)) }
        let far: UInt64 = 1 << 40
        XCTAssertTrue(window.accept(far))
        XCTAssertFalse(window.accept(199))
        XCTAssertFalse(window.accept(far))
        // Counters just below the jump were never seen: the cleared bitmap must accept them once.
        for counter in (far - 500)..<far {
            XCTAssertTrue(window.accept(counter), "\(counter)")
            XCTAssertFalse(window.accept(counter), "\(counter)")
        }
        // A jump of less than the ring keeps what is still inside the window.
        XCTAssertTrue(window.accept(far + 3_000))
        XCTAssertFalse(window.accept(far - 1))
        XCTAssertTrue(window.accept(far + 1))
    }

    func testRejectAfterMessages() {
        var window = ReplayWindow()
        let limit = WireGuardProtocol.rejectAfterMessages
        XCTAssertTrue(window.accept(limit - 1))
        XCTAssertFalse(window.wouldAccept(limit))
        XCTAssertFalse(window.accept(limit))
        XCTAssertFalse(window.accept(UInt64.max))
    }

    /// Against a set-based model over a random walk of counters near the front of the window.
    func testMatchesASimpleModel() {
        var generator = SeededGenerator(state: 42)
        var window = ReplayWindow()
        var seen = Set<UInt64>()
        var greatest: UInt64? = nil
        var front: UInt64 = 0
        for _ in 0..<50_000 {
            front += UInt64.random(in: 0...40, using: &generator)
            let counter = front > 9_000 ? front - UInt64.random(in: 0...9_000, using: &generator) : front
            let expected: Bool
            if let g = greatest, counter <= g {
                expected = g - counter < ReplayWindow.windowSize && !seen.contains(counter)
            } else {
                expected = true
            }
            XCTAssertEqual(window.accept(counter), expected, "\(counter) with greatest \(String(describing: greatest))")
            if expected {
                seen.insert(counter)
                greatest = max(greatest ?? 0, counter)
            }
        }
    }
}
