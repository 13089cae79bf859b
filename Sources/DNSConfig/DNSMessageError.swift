/// Why a message is not a query the split-DNS forwarder relays, or not a
/// well-formed DNS message (an upstream answer, say). The forwarder drops
/// such messages and counts them; it never answers them.
public enum DNSMessageError: Error, Hashable, Sendable, CustomStringConvertible {
    /// Shorter than the 12-byte header.
    case truncatedHeader(length: Int)
    /// Longer than 65535 bytes.
    case tooLong(length: Int)
    /// QR is 1: a response, not a query.
    case notAQuery
    /// QR is 0: a query, where a response was expected.
    case notAResponse
    /// OPCODE is not 0 (QUERY): NOTIFY, UPDATE and the rest are not relayed.
    case unsupportedOpcode(Int)
    /// QDCOUNT is not 1.
    case questionCount(Int)
    /// A compression pointer (top bits 11) in a query's question, where nothing can be pointed at.
    case compressionPointer(offset: Int)
    /// A compression pointer that does not point to a prior occurrence: a
    /// name after the header, wholly before the labels the pointer ends; or
    /// more pointers in one name than it can have labels.
    case invalidPointer(offset: Int)
    /// A label type 01 or 10 (RFC 6891 §5: reserved).
    case reservedLabelType(offset: Int)
    /// The name is longer than 255 bytes in wire form.
    case nameTooLong(offset: Int)
    /// The message ends inside the question.
    case truncatedQuestion(offset: Int)
    /// The message ends inside a resource record of the answer, authority or additional section.
    case truncatedRecord(offset: Int)

    public var description: String {
        switch self {
        case .truncatedHeader(let length): "message of \(length) bytes is shorter than a DNS header"
        case .tooLong(let length): "message of \(length) bytes is longer than 65535 bytes"
        case .notAQuery: "message is a response (QR = 1), not a query"
        case .notAResponse: "message is a query (QR = 0), not a response"
        case .unsupportedOpcode(let opcode): "opcode \(opcode) is not a standard query"
        case .questionCount(let count): "\(count) questions (a query has exactly one)"
        case .compressionPointer(let offset): "compression pointer at byte \(offset) of the question"
        case .invalidPointer(let offset): "compression pointer at byte \(offset) does not point back to an earlier name"
        case .reservedLabelType(let offset): "reserved label type at byte \(offset)"
        case .nameTooLong(let offset): "name longer than 255 bytes at byte \(offset)"
        case .truncatedQuestion(let offset): "message ends inside the question at byte \(offset)"
        case .truncatedRecord(let offset): "message ends inside a resource record at byte \(offset)"
        }
    }
}
