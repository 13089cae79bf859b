import Glibc
import Synchronization

/// A pthread mutex of type PTHREAD_MUTEX_ERRORCHECK that knows which thread holds it: not recursive, and
/// only its holder may unlock it. Either mistake stops the process with a message that starts with
/// `label` (what a lock that traps on misuse, as Apple's unfair lock does, needs), instead of a deadlock
/// or a silent corruption. Waiters are not queued fairly.
public final class OwnedMutex: @unchecked Sendable {
    // @unchecked Sendable: the pthread object is used only through its own locking; `owner` is atomic.
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    /// The holder's pthread_self(), 0 while nobody holds the mutex. Written only by the holder.
    private let owner = Atomic<UInt>(0)
    private let label: String

    public init(label: String) {
        self.label = label
        var attributes = pthread_mutexattr_t()
        pthread_mutexattr_init(&attributes)
        pthread_mutexattr_settype(&attributes, Int32(PTHREAD_MUTEX_ERRORCHECK))
        let rc = pthread_mutex_init(mutex, &attributes)
        pthread_mutexattr_destroy(&attributes)
        guard rc == 0 else { fatalError("\(label): pthread_mutex_init: \(String(cString: strerror(rc)))") }
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    /// Whether the calling thread holds the mutex.
    public var ownedByCaller: Bool { owner.load(ordering: .relaxed) == UInt(pthread_self()) }

    /// Takes the mutex, waiting while another thread holds it; stops the process if the caller holds it.
    public func lock() {
        let rc = pthread_mutex_lock(mutex)
        if rc == EDEADLK {
            fatalError("\(label): the calling thread locked the lock it already holds (it is not recursive)")
        }
        guard rc == 0 else { fatalError("\(label): pthread_mutex_lock: \(String(cString: strerror(rc)))") }
        owner.store(UInt(pthread_self()), ordering: .relaxed)
    }

    /// Takes the mutex if no thread holds it; false (nothing taken) otherwise.
    public func tryLock() -> Bool {
        let rc = pthread_mutex_trylock(mutex)
        guard rc == 0 else {
            if rc == EBUSY { return false }
            fatalError("\(label): pthread_mutex_trylock: \(String(cString: strerror(rc)))")
        }
        owner.store(UInt(pthread_self()), ordering: .relaxed)
        return true
    }

    /// Releases the mutex; stops the process unless the calling thread holds it.
    public func unlock() {
        guard ownedByCaller else { fatalError("\(label): unlocked by a thread that does not hold it") }
        owner.store(0, ordering: .relaxed)
        let rc = pthread_mutex_unlock(mutex)
        guard rc == 0 else { fatalError("\(label): pthread_mutex_unlock: \(String(cString: strerror(rc)))") }
    }
}
