/// Why the split-DNS forwarder dropped an upstream answer: it is not the
/// answer to the query it sent (RFC 5452 §9.1). Each is counted in the
/// forwarder's statistics; none ends the wait for the real answer.
public enum DNSAnswerRejection: Hashable, Sendable, CustomStringConvertible {
    /// It came from another address or port than the query went to.
    case wrongSource
    /// Its id is not the query's.
    case wrongID
    /// QDCOUNT is not 1, or the question is not the query's: another name
    /// (ASCII case aside), type or class.
    case wrongQuestion
    /// Not a well-formed response to a standard query: shorter than a
    /// header, QR = 0, another opcode, or a question or record that does
    /// not parse.
    case malformed(DNSMessageError)

    public var description: String {
        switch self {
        case .wrongSource: "answer from another address or port than the query went to"
        case .wrongID: "answer with another id than the query's"
        case .wrongQuestion: "answer to another question than the query's"
        case .malformed(let error): "malformed answer: \(error)"
        }
    }
}

/// What an upstream message is, to the query it came back for.
public enum DNSAnswerVerdict: Hashable, Sendable {
    /// The answer, every section well formed. It may still have TC set.
    case answer(DNSMessage)
    /// The answer, with TC set and sections cut where they do not parse (a
    /// server may cut anywhere): over UDP, ask again over TCP.
    case truncated
    /// Not the answer: drop it and keep waiting.
    case rejected(DNSAnswerRejection)
}

extension DNSQuery {
    /// Checks `answer`, a message that came back for this query, in this
    /// order: a header (else malformed), this query's id, QR = 1 and OPCODE 0
    /// (else malformed), one question asking what this query asks (its name
    /// compared ignoring ASCII case, its type and class; else wrong
    /// question), then every section. Where it came from is the caller's
    /// to check (`wrongSource`): this sees bytes only.
    public func check(answer: [UInt8]) -> DNSAnswerVerdict {
        guard answer.count >= Self.headerLength else { return .rejected(.malformed(.truncatedHeader(length: answer.count))) }
        guard answer.count <= Self.maximumMessageLength else { return .rejected(.malformed(.tooLong(length: answer.count))) }
        guard DNSMessage.word(answer, 0) == id else { return .rejected(.wrongID) }
        let flags = DNSMessage.word(answer, 2)
        guard flags & DNSMessage.responseFlag != 0 else { return .rejected(.malformed(.notAResponse)) }
        let opcode = Int(flags >> 11 & 0x0f)
        guard opcode == 0 else { return .rejected(.malformed(.unsupportedOpcode(opcode))) }
        guard DNSMessage.word(answer, 4) == 1 else { return .rejected(.wrongQuestion) }
        do throws(DNSMessageError) {
            let (asked, _) = try DNSMessage.readQuestion(answer, at: Self.headerLength)
            guard asked.matches(question) else { return .rejected(.wrongQuestion) }
        } catch {
            return .rejected(.malformed(error))
        }
        do throws(DNSMessageError) {
            return .answer(try DNSMessage(parsing: answer))
        } catch {
            return flags & DNSMessage.truncatedFlag != 0 ? .truncated : .rejected(.malformed(error))
        }
    }
}
