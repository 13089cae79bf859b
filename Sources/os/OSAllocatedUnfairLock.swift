import LinuxSystem

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
    /// The allocation: the mutex (LinuxSystem's OwnedMutex: error-checking, knows its holder) and the state.
    final class Storage {
        private let mutex = OwnedMutex(label: "OSAllocatedUnfairLock")
        var state: State

        init(_ initialState: State) {
            state = initialState
        }

        var ownedByCaller: Bool { mutex.ownedByCaller }
        func lock() { mutex.lock() }
        func tryLock() -> Bool { mutex.tryLock() }
        func unlock() { mutex.unlock() }
    }
}
