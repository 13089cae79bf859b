import Glibc
import Synchronization

/// OSAllocatedUnfairLock (Apple's `os`, iOS 16 / macOS 13): a lock that owns the state it protects,
/// in an allocation of its own, so copies of the struct share one lock and one state. Providers use it
/// for small pieces of state their queues share (`OSAllocatedUnfairLock(initialState: false)` and
/// `withLock { $0 }`).
///
/// On Linux the lock is a pthread mutex of type PTHREAD_MUTEX_ERRORCHECK in that allocation. As with
/// Apple's unfair lock it is not recursive and only its owner may unlock it: locking it again on the
/// thread that holds it, or unlocking it from another thread, stops the process with a message
/// (Apple's traps too), instead of a deadlock or a silent corruption. Waiters are not queued fairly
/// (neither are Apple's). `precondition(_:)` knows the owner: the lock records the thread that holds it.
public struct OSAllocatedUnfairLock<State>: @unchecked Sendable {
    /// Whether the calling thread holds the lock, for `precondition(_:)`.
    public enum Ownership: Hashable, Sendable {
        case owner
        case notOwner
    }

    private let storage: Storage

    /// A lock protecting `initialState`, whatever its type: the caller answers for its sendability.
    public init(uncheckedState initialState: State) {
        storage = Storage(initialState)
    }

    /// A lock protecting `initialState`.
    public init(initialState: State) where State: Sendable {
        storage = Storage(initialState)
    }

    /// Runs `body` with the state while holding the lock; the lock is released when `body` returns or throws.
    public func withLockUnchecked<R>(_ body: (inout State) throws -> R) rethrows -> R {
        storage.lock()
        defer { storage.unlock() }
        return try body(&storage.state)
    }

    /// As `withLockUnchecked(_:)`, for a Sendable body and result.
    public func withLock<R: Sendable>(_ body: @Sendable (inout State) throws -> R) rethrows -> R {
        try withLockUnchecked(body)
    }

    /// Runs `body` if the lock can be taken at once; nil, without running it, when another thread holds it.
    public func withLockIfAvailableUnchecked<R>(_ body: (inout State) throws -> R) rethrows -> R? {
        guard storage.tryLock() else { return nil }
        defer { storage.unlock() }
        return try body(&storage.state)
    }

    /// As `withLockIfAvailableUnchecked(_:)`, for a Sendable body and result.
    public func withLockIfAvailable<R: Sendable>(_ body: @Sendable (inout State) throws -> R) rethrows -> R? {
        try withLockIfAvailableUnchecked(body)
    }

    /// Stops the process unless the calling thread holds the lock (`.owner`) or does not (`.notOwner`).
    public func precondition(_ condition: Ownership) {
        let owns = storage.ownedByCaller
        switch condition {
        case .owner where !owns:
            fatalError("OSAllocatedUnfairLock: precondition failed: the calling thread does not hold the lock")
        case .notOwner where owns:
            fatalError("OSAllocatedUnfairLock: precondition failed: the calling thread holds the lock")
        default:
            break
        }
    }
}

extension OSAllocatedUnfairLock where State == () {
    /// A lock with no state of its own, for `lock()`/`unlock()` or the `withLock` forms without state.
    public init() {
        storage = Storage(())
    }

    /// Takes the lock, waiting while another thread holds it.
    public func lock() { storage.lock() }

    /// Releases the lock; only the thread that took it may.
    public func unlock() { storage.unlock() }

    /// Takes the lock if no thread holds it; false (and nothing taken) otherwise.
    public func lockIfAvailable() -> Bool { storage.tryLock() }

    public func withLockUnchecked<R>(_ body: () throws -> R) rethrows -> R {
        storage.lock()
        defer { storage.unlock() }
        return try body()
    }

    public func withLock<R: Sendable>(_ body: @Sendable () throws -> R) rethrows -> R {
        try withLockUnchecked(body)
    }

    public func withLockIfAvailableUnchecked<R>(_ body: () throws -> R) rethrows -> R? {
        guard storage.tryLock() else { return nil }
        defer { storage.unlock() }
        return try body()
    }

    public func withLockIfAvailable<R: Sendable>(_ body: @Sendable () throws -> R) rethrows -> R? {
        try withLockIfAvailableUnchecked(body)
    }
}

extension OSAllocatedUnfairLock {
    /// The allocation: the mutex (at a fixed address, as pthread requires), the state, and the owner.
    final class Storage {
        private let mutex: UnsafeMutablePointer<pthread_mutex_t>
        var state: State
        /// The holder's pthread_self(), 0 while nobody holds the lock. Written only by the holder.
        private let owner = Atomic<UInt>(0)

        init(_ initialState: State) {
            state = initialState
            mutex = .allocate(capacity: 1)
            var attributes = pthread_mutexattr_t()
            pthread_mutexattr_init(&attributes)
            pthread_mutexattr_settype(&attributes, Int32(PTHREAD_MUTEX_ERRORCHECK))
            let rc = pthread_mutex_init(mutex, &attributes)
            pthread_mutexattr_destroy(&attributes)
            guard rc == 0 else { fatalError("OSAllocatedUnfairLock: pthread_mutex_init: \(String(cString: strerror(rc)))") }
        }

        deinit {
            pthread_mutex_destroy(mutex)
            mutex.deallocate()
        }

        var ownedByCaller: Bool { owner.load(ordering: .relaxed) == UInt(pthread_self()) }

        func lock() {
            let rc = pthread_mutex_lock(mutex)
            if rc == EDEADLK {
                fatalError("OSAllocatedUnfairLock: the calling thread locked the lock it already holds (it is not recursive)")
            }
            guard rc == 0 else { fatalError("OSAllocatedUnfairLock: pthread_mutex_lock: \(String(cString: strerror(rc)))") }
            owner.store(UInt(pthread_self()), ordering: .relaxed)
        }

        func tryLock() -> Bool {
            let rc = pthread_mutex_trylock(mutex)
            guard rc == 0 else {
                if rc == EBUSY { return false }
                fatalError("OSAllocatedUnfairLock: pthread_mutex_trylock: \(String(cString: strerror(rc)))")
            }
            owner.store(UInt(pthread_self()), ordering: .relaxed)
            return true
        }

        func unlock() {
            guard ownedByCaller else {
                fatalError("OSAllocatedUnfairLock: unlocked by a thread that does not hold it")
            }
            owner.store(0, ordering: .relaxed)
            let rc = pthread_mutex_unlock(mutex)
            guard rc == 0 else { fatalError("OSAllocatedUnfairLock: pthread_mutex_unlock: \(String(cString: strerror(rc)))") }
        }
    }
}
