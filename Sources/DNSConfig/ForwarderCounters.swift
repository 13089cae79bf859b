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
    let answersFromWrongSource = Atomic<Int>(0)
    let answersWithWrongID = Atomic<Int>(0)
    let answersWithWrongQuestion = Atomic<Int>(0)
    let malformedAnswers = Atomic<Int>(0)
    let retriedOverTCP = Atomic<Int>(0)
    let truncatedForClient = Atomic<Int>(0)
    /// Why the thread ended on its own, if it did.
    let failure = Mutex<String?>(nil)

    enum Counter {
        case received, toTunnel, toFallback, answered, malformed, overloaded, timedOut, upstreamErrors
        case answersFromWrongSource, answersWithWrongID, answersWithWrongQuestion, malformedAnswers
        case retriedOverTCP, truncatedForClient
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
        case .answersFromWrongSource: answersFromWrongSource.add(1, ordering: .relaxed)
        case .answersWithWrongID: answersWithWrongID.add(1, ordering: .relaxed)
        case .answersWithWrongQuestion: answersWithWrongQuestion.add(1, ordering: .relaxed)
        case .malformedAnswers: malformedAnswers.add(1, ordering: .relaxed)
        case .retriedOverTCP: retriedOverTCP.add(1, ordering: .relaxed)
        case .truncatedForClient: truncatedForClient.add(1, ordering: .relaxed)
        }
    }

    /// Counts a dropped upstream answer under its reason.
    func add(_ rejection: DNSAnswerRejection) {
        switch rejection {
        case .wrongSource: add(.answersFromWrongSource)
        case .wrongID: add(.answersWithWrongID)
        case .wrongQuestion: add(.answersWithWrongQuestion)
        case .malformed: add(.malformedAnswers)
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
            upstreamErrors: upstreamErrors.load(ordering: .relaxed),
            answersFromWrongSource: answersFromWrongSource.load(ordering: .relaxed),
            answersWithWrongID: answersWithWrongID.load(ordering: .relaxed),
            answersWithWrongQuestion: answersWithWrongQuestion.load(ordering: .relaxed),
            malformedAnswers: malformedAnswers.load(ordering: .relaxed),
            retriedOverTCP: retriedOverTCP.load(ordering: .relaxed),
            truncatedForClient: truncatedForClient.load(ordering: .relaxed))
    }
}
