import Synchronization

/// The forwarder's counters, written by its thread and read by anyone,
/// and the reason its thread ended if it ended on its own.
final class ForwarderCounters: Sendable {
    let received = Atomic<Int>(0)
    let toTunnel = Atomic<Int>(0)
    let toFallback = Atomic<Int>(0)
    let answered = Atomic<Int>(0)
    let malformed = Atomic<Int>(0)
    let overloaded = Atomic<Int>(0)
    let timedOut = Atomic<Int>(0)
    let upstreamErrors = Atomic<Int>(0)
    /// Why the thread ended on its own, if it did.
    let failure = Mutex<String?>(nil)

    enum Counter {
        case received, toTunnel, toFallback, answered, malformed, overloaded, timedOut, upstreamErrors
    }

    func add(_ counter: Counter) {
        switch counter {
        case .received: received.add(1, ordering: .relaxed)
        case .toTunnel: toTunnel.add(1, ordering: .relaxed)
        case .toFallback: toFallback.add(1, ordering: .relaxed)
        case .answered: answered.add(1, ordering: .relaxed)
        case .malformed: malformed.add(1, ordering: .relaxed)
        case .overloaded: overloaded.add(1, ordering: .relaxed)
        case .timedOut: timedOut.add(1, ordering: .relaxed)
        case .upstreamErrors: upstreamErrors.add(1, ordering: .relaxed)
        }
    }

    var snapshot: SplitDNSForwarder.Statistics {
        SplitDNSForwarder.Statistics(
            received: received.load(ordering: .relaxed),
            forwardedToTunnel: toTunnel.load(ordering: .relaxed),
            forwardedToFallback: toFallback.load(ordering: .relaxed),
            answered: answered.load(ordering: .relaxed),
            malformed: malformed.load(ordering: .relaxed),
            overloaded: overloaded.load(ordering: .relaxed),
            timedOut: timedOut.load(ordering: .relaxed),
            upstreamErrors: upstreamErrors.load(ordering: .relaxed))
    }
}
