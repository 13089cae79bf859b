import Foundation
import os
import XCTest

/// OSAllocatedUnfairLock as providers use it (hfyeomans/ztna-agent's provider keeps its running flag in
/// one: `OSAllocatedUnfairLock(initialState: false)`, read and written with `withLock`): mutual exclusion
/// under contention, the IfAvailable forms while another thread holds the lock, the stateless form's
/// lock()/unlock(), copies sharing one lock, ownership, and the lock released when the body throws.
final class OSAllocatedUnfairLockTests: XCTestCase {
    /// The shape of a provider's use: a computed property over the lock's state.
    final class Flagged: @unchecked Sendable {
        private let runningLock = OSAllocatedUnfairLock(initialState: false)
        var isRunning: Bool {
            get { runningLock.withLock { $0 } }
            set { runningLock.withLock { $0 = newValue } }
        }
    }

    /// What another thread found, read after it signalled.
    final class Box: @unchecked Sendable { var value = true }

    func testProviderShapedFlag() {
        let f = Flagged()
        XCTAssertFalse(f.isRunning)
        f.isRunning = true
        XCTAssertTrue(f.isRunning)
    }

    /// 8 threads × 20,000 read-modify-write increments under the lock: every one counted. Without mutual
    /// exclusion the unsynchronised `+= 1` loses updates.
    func testMutualExclusionUnderContention() {
        let counter = OSAllocatedUnfairLock(initialState: 0)
        DispatchQueue.concurrentPerform(iterations: 8) { _ in
            for _ in 0..<20_000 {
                counter.withLock { value in
                    let read = value
                    if read % 997 == 0 { sched_yield() }  // widen the window a lost update needs
                    value = read + 1
                }
            }
        }
        XCTAssertEqual(counter.withLock { $0 }, 160_000)
    }

    /// While another thread holds the lock, the IfAvailable forms return nil without running their body;
    /// once it is released they run it.
    func testIfAvailableWhileHeldElsewhere() {
        let lock = OSAllocatedUnfairLock(initialState: "state")
        let held = DispatchSemaphore(value: 0), release = DispatchSemaphore(value: 0), done = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            lock.withLockUnchecked { _ in
                held.signal()
                release.wait()
            }
            done.signal()
        }
        held.wait()
        var ran = false
        XCTAssertNil(lock.withLockIfAvailableUnchecked { _ -> Int in ran = true; return 1 })
        XCTAssertFalse(ran, "the body does not run while another thread holds the lock")
        let count: Int? = lock.withLockIfAvailable { $0.count }
        XCTAssertNil(count)
        release.signal()
        done.wait()
        XCTAssertEqual(lock.withLockIfAvailable { $0.count }, 5)
    }

    /// The stateless form: lock() and unlock() on one thread, lockIfAvailable() false on another while
    /// it is held, true after.
    func testStatelessLockAndUnlock() {
        let lock = OSAllocatedUnfairLock()
        lock.lock()
        lock.precondition(.owner)
        let elsewhere = DispatchSemaphore(value: 0)
        let tookIt = Box()
        Thread.detachNewThread {
            tookIt.value = lock.lockIfAvailable()
            lock.precondition(.notOwner)
            elsewhere.signal()
        }
        elsewhere.wait()
        XCTAssertFalse(tookIt.value, "lockIfAvailable() on another thread while the lock is held")
        lock.unlock()
        lock.precondition(.notOwner)
        XCTAssertTrue(lock.lockIfAvailable())
        lock.unlock()
        XCTAssertEqual(lock.withLock { 7 }, 7)
        XCTAssertEqual(lock.withLockIfAvailable { 8 }, 8)
    }

    /// A copy of the struct is the same lock and the same state (the state lives in the allocation).
    func testCopiesShareOneLockAndState() {
        let a = OSAllocatedUnfairLock(initialState: [Int]())
        let b = a
        b.withLock { $0.append(1) }
        a.withLock { $0.append(2) }
        XCTAssertEqual(b.withLock { $0 }, [1, 2])
        a.withLockUnchecked { _ in XCTAssertNil(b.withLockIfAvailableUnchecked { _ in 0 }, "b is a's lock, held now") }
    }

    /// The body's error reaches the caller and the lock is free again; ownership is true only inside.
    func testThrowingBodyReleasesTheLock() {
        struct Boom: Error {}
        let lock = OSAllocatedUnfairLock(uncheckedState: NSMutableArray())
        XCTAssertThrowsError(try lock.withLockUnchecked { state -> Void in
            lock.precondition(.owner)
            state.add(1)
            throw Boom()
        }) { XCTAssertTrue($0 is Boom) }
        lock.precondition(.notOwner)
        XCTAssertEqual(lock.withLockIfAvailableUnchecked { $0.count }, 1)
        XCTAssertNotEqual(OSAllocatedUnfairLock<Int>.Ownership.owner, .notOwner)
    }
}
