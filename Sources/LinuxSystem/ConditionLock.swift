import Glibc

/// A mutex and a condition variable (pthread_mutex_t, pthread_cond_t) whose timed waits count on the
/// monotonic clock (pthread_condattr_setclock(CLOCK_MONOTONIC)), as `ProcessControl.monotonicSeconds()`
/// does: a queue that one thread fills and another waits on with a deadline.
public final class ConditionLock: @unchecked Sendable {
    // @unchecked Sendable: the pthread objects are only used through their own locking.
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let condition = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)

    public init() {
        pthread_mutex_init(mutex, nil)
        var attributes = pthread_condattr_t()
        pthread_condattr_init(&attributes)
        pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC)
        pthread_cond_init(condition, &attributes)
        pthread_condattr_destroy(&attributes)
    }

    deinit {
        pthread_cond_destroy(condition)
        pthread_mutex_destroy(mutex)
        condition.deallocate()
        mutex.deallocate()
    }

    public func lock() { pthread_mutex_lock(mutex) }
    public func unlock() { pthread_mutex_unlock(mutex) }

    /// Runs `body` with the mutex held.
    public func locked<T>(_ body: () throws -> T) rethrows -> T {
        lock()
        defer { unlock() }
        return try body()
    }

    /// Wakes one waiter.
    public func signal() { pthread_cond_signal(condition) }
    /// Wakes every waiter.
    public func broadcast() { pthread_cond_broadcast(condition) }

    /// Waits (the mutex held) until signalled or the monotonic time `deadline` (in seconds); may also
    /// return early, spuriously, as pthread_cond_timedwait does.
    public func wait(until deadline: Double) {
        let d = max(deadline, 0)
        var ts = timespec(tv_sec: Int(d), tv_nsec: Int((d - d.rounded(.down)) * 1e9))
        pthread_cond_timedwait(condition, mutex, &ts)
    }
}
