import CTunnelgateShims
import Glibc
import Synchronization

/// Memory for secret bytes (a private or preshared key, a runtime's secret, the text of a file that
/// holds one), kept out of everywhere a copy could outlive its use:
///
/// - its own page-aligned anonymous mapping (mmap), never the heap, so no allocator hands its bytes
///   to someone else or leaves them in a freed chunk;
/// - excluded from core dumps (madvise MADV_DONTDUMP) and wiped in a child made by fork
///   (MADV_WIPEONFORK, where the kernel has it);
/// - locked in RAM (mlock), so it is never written to swap. When the kernel refuses the lock
///   (RLIMIT_MEMLOCK for a process without CAP_IPC_LOCK) the memory is still used, excluded from
///   dumps; the first refusal is kept for the caller to log (`takeLockFailureNotice()`);
/// - zeroed with explicit_bzero, which the compiler may not drop, then unmapped, when the last
///   reference goes (or earlier, `wipe()`).
///
/// It has no way to give its bytes away as an Array or String: they are reached only through
/// `withUnsafeBytes` / `withUnsafeMutableBytes`, for as long as the closure runs. It is a class: a
/// holder passes the reference on, and the bytes stay in one place.
public final class SecureBytes: @unchecked Sendable {
    // @unchecked Sendable: the mapping (base, length) never changes after init; the bytes are written
    // by whoever fills them before sharing the reference, and only read afterwards (keys), or used by
    // one owner at a time (file buffers). `wipe` is the holder's to call when nobody reads any more.

    /// The bytes the holder asked for (the mapping is this, rounded up to whole pages).
    public let count: Int
    /// True when mlock(2) succeeded: the pages are never swapped out.
    public let isLocked: Bool
    private let base: UnsafeMutableRawPointer
    private let mappedLength: Int

    /// `count` zero bytes in a mapping of their own. Throws when the kernel has no memory to map (mmap)
    /// or refuses MADV_DONTDUMP; a refused mlock is not an error (see `takeLockFailureNotice()`).
    public init(count: Int) throws(SystemCallError) {
        precondition(count >= 0, "a negative byte count")
        let page = Int(sysconf(Int32(_SC_PAGESIZE)))
        let length = max(page, (count + page - 1) / page * page)
        guard let mapped = mmap(nil, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0),
              mapped != MAP_FAILED else {
            throw SystemCallError("mmap(\(length) bytes for a secret)", .current)
        }
        if madvise(mapped, length, CTunnelgateShims_madv_dontdump()) != 0 {
            let e = Errno.current
            munmap(mapped, length)
            throw SystemCallError("madvise(MADV_DONTDUMP)", e)
        }
        // Linux 4.14 and later; an older kernel (EINVAL) keeps the pages in a forked child, which the
        // process never makes (children are spawned, posix_spawn, and exec at once).
        _ = madvise(mapped, length, CTunnelgateShims_madv_wipeonfork())
        if mlock(mapped, length) == 0 {
            isLocked = true
        } else {
            isLocked = false
            Self.recordLockFailure(Errno.current, length: length)
        }
        base = mapped
        mappedLength = length
        self.count = count
    }

    /// A copy of `bytes` in new secure memory (for bytes that arrive elsewhere, which the caller then wipes).
    public convenience init(copying bytes: UnsafeRawBufferPointer) throws(SystemCallError) {
        try self.init(count: bytes.count)
        if let source = bytes.baseAddress, bytes.count > 0 { base.copyMemory(from: source, byteCount: bytes.count) }
    }

    deinit {
        CTunnelgateShims_wipe(base, mappedLength)
        if isLocked { munlock(base, mappedLength) }
        munmap(base, mappedLength)
    }

    /// Calls `body` with the `count` bytes; the pointer is valid only inside `body`. Copy nothing out of
    /// it that outlives the call unless it is wiped too.
    @inline(__always)
    public func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try body(UnsafeRawBufferPointer(start: base, count: count))
    }

    /// Calls `body` with the `count` bytes to fill or change them.
    @inline(__always)
    public func withUnsafeMutableBytes<R>(_ body: (UnsafeMutableRawBufferPointer) throws -> R) rethrows -> R {
        try body(UnsafeMutableRawBufferPointer(start: base, count: count))
    }

    /// Zeroes every byte now (explicit_bzero); the memory stays usable, all zero.
    public func wipe() {
        CTunnelgateShims_wipe(base, mappedLength)
    }

    // MARK: The lock that failed

    private struct LockState {
        var failure: String?
        var told = false
    }
    private static let lockState = Mutex(LockState())

    private static func recordLockFailure(_ errno: Errno, length: Int) {
        lockState.withLock { state in
            guard state.failure == nil else { return }
            var limit: UInt64 = 0
            let limitText = CTunnelgateShims_memlock_limit(&limit) == 0
                ? (limit == UInt64.max ? "unlimited" : "\(limit) bytes") : "unknown"
            state.failure = "mlock(\(length) bytes of key memory) failed: \(errno); RLIMIT_MEMLOCK is \(limitText). "
                + "Keys are still kept out of core dumps (MADV_DONTDUMP) and zeroed on release, but may be written to swap"
        }
    }

    /// The first refused mlock of this process as one line, the first time it is asked for after the
    /// refusal (nil before, and every time after): for the caller to log once.
    public static func takeLockFailureNotice() -> String? {
        lockState.withLock { state in
            guard let failure = state.failure, !state.told else { return nil }
            state.told = true
            return failure
        }
    }
}
