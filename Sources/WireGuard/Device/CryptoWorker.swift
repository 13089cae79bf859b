import LinuxSystem

/// The sealing or opening of one batch's transport messages, as jobs in fixed arrays: what the device
/// thread and its crypto worker share for one hand-off. Filled and read by the device thread; during a
/// hand-off the worker runs its part of the jobs and touches nothing else.
final class CryptoJobs {
    enum Kind { case seal, open }
    let capacity: Int
    private(set) var count = 0
    let kind: Kind
    /// Per job: where the message's payload starts (after the 16-byte transport header), its length
    /// (the padded plaintext to seal, or ciphertext and tag to open), its counter, its session's cipher,
    /// and the result (sealed length or plaintext length; -1 when it failed).
    private let buffers: UnsafeMutablePointer<UnsafeMutableRawPointer?>
    private let lengths: UnsafeMutablePointer<Int>
    private let counters: UnsafeMutablePointer<UInt64>
    private let results: UnsafeMutablePointer<Int>
    // Unowned: a job lives only within one call of the device thread, while its session keeps the cipher.
    private let ciphers: UnsafeMutablePointer<Unmanaged<TransportCipher>?>

    init(_ kind: Kind, capacity: Int) {
        self.kind = kind
        self.capacity = capacity
        buffers = .allocate(capacity: capacity)
        lengths = .allocate(capacity: capacity)
        counters = .allocate(capacity: capacity)
        results = .allocate(capacity: capacity)
        ciphers = .allocate(capacity: capacity)
        ciphers.initialize(repeating: nil, count: capacity)
    }

    deinit {
        buffers.deallocate()
        lengths.deallocate()
        counters.deallocate()
        results.deallocate()
        ciphers.deallocate()
    }

    var isFull: Bool { count == capacity }

    func removeAll() { count = 0 }

    /// Adds a job: the payload at `buffer` of `length` bytes under `counter` in `cipher`'s session.
    func append(_ buffer: UnsafeMutableRawPointer, length: Int, counter: UInt64, cipher: TransportCipher) {
        precondition(count < capacity)
        buffers[count] = buffer
        lengths[count] = length
        counters[count] = counter
        results[count] = -1
        ciphers[count] = Unmanaged.passUnretained(cipher)
        count += 1
    }

    /// Job `i`'s whole transport message: from its 16-byte header to the end of its tag.
    func message(_ i: Int) -> (start: UnsafeMutableRawPointer, length: Int) {
        (buffers[i]! - MessageType.transportHeaderLength, MessageType.transportHeaderLength + lengths[i] + MessageType.tagLength)
    }

    /// Job `i`'s result: the sealed or opened length, nil when it failed.
    func result(_ i: Int) -> Int? { results[i] < 0 ? nil : results[i] }

    /// Runs jobs `range` on `lane` (0: the device thread, 1: the worker).
    func run(_ range: Range<Int>, lane: Int) {
        for i in range {
            let cipher = ciphers[i]!.takeUnretainedValue()
            let done = kind == .seal
                ? cipher.seal(counter: counters[i], buffers[i]!, length: lengths[i], lane: lane)
                : cipher.open(counter: counters[i], buffers[i]!, length: lengths[i], lane: lane)
            results[i] = done ?? -1
        }
    }
}

/// The device's crypto worker: one thread that seals or opens the second half of a batch while the
/// device thread does the first, so that a device whose thread is saturated uses a second core.
/// Order needs nothing: every job's place in the batch (its slot, its counter) is fixed before the
/// hand-off, and the device thread goes on in that order after both halves are done. One hand-off per
/// batch (a mutex and a condition variable), nothing allocated, no lock per packet.
final class CryptoWorker: @unchecked Sendable {
    // @unchecked Sendable: `posted`, `postedJobs`, `generation`, `finished` and `stopping` are guarded by
    // `condition`; a table is touched by the worker only between a post and its completion, while the
    // device thread waits for it.
    private let condition = ConditionLock()
    private var posted = 0..<0
    private var postedJobs: CryptoJobs?
    private var generation: UInt64 = 0
    private var finished: UInt64 = 0
    private var stopping = false
    private var thread: SystemThread?
    /// Hand-offs made (batches split between the two threads).
    private(set) var handOffs: UInt64 = 0

    /// Batches smaller than this are not worth a hand-off.
    static let minimumJobs = 8
    /// `auto` makes a worker only on machines with this many CPUs or more. On 2 cores, with both
    /// tunnel ends and iperf3 on the machine, a saturated device thread helped by a worker moved less:
    /// TCP 3,196–3,935 Mbit/s with none, 2,140–2,407 with `auto` (docs/performance.md).
    static let minimumProcessors = 4

    init() throws(SystemCallError) {
        thread = try SystemThread.spawn { [self] in loop() }
    }

    private func loop() {
        condition.lock()
        while true {
            while generation == finished && !stopping {
                condition.wait(until: ProcessControl.monotonicSeconds() + 1)
            }
            if stopping {
                condition.unlock()
                return
            }
            let range = posted, jobs = postedJobs
            condition.unlock()
            jobs?.run(range, lane: 1)
            condition.lock()
            finished = generation
            condition.broadcast()
        }
    }

    /// Runs every job of `jobs`: the second half on the worker, the first on the calling (device)
    /// thread, and returns once both are done. `split` false (or a small batch) runs them all here.
    func run(_ jobs: CryptoJobs, split: Bool) {
        let n = jobs.count
        guard split, n >= Self.minimumJobs else {
            jobs.run(0..<n, lane: 0)
            return
        }
        let half = n / 2
        condition.locked {
            posted = half..<n
            postedJobs = jobs
            generation += 1
            condition.broadcast()
        }
        handOffs += 1
        jobs.run(0..<half, lane: 0)
        condition.lock()
        while finished != generation {
            condition.wait(until: ProcessControl.monotonicSeconds() + 1)
        }
        condition.unlock()
    }

    func stop() {
        condition.locked {
            stopping = true
            condition.broadcast()
        }
        thread?.join()
        thread = nil
    }
}
