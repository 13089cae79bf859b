/// The parts of a DNS query message (RFC 1035 §4.1) the split-DNS forwarder
/// needs to choose an upstream: the id, and the one question.
///
/// Parsing is strict and bounded: a standard query (QR = 0, OPCODE = 0) with
/// exactly one question, whose QNAME is a sequence of plain labels. A
/// compression pointer in the question is refused (a query has nothing
/// before its question to point at), as are the reserved label types 01 and
/// 10, labels that run past the message, and names longer than 255 bytes.
/// Everything after the question (an EDNS OPT record, say) is relayed
/// untouched and not read here (`DNSMessage` reads it for the EDNS payload
/// size).
public struct DNSQuery: Hashable, Sendable {
    public var id: UInt16
    public var name: DNSName
    /// QTYPE (1 = A, 28 = AAAA, …).
    public var type: UInt16
    /// QCLASS (1 = IN).
    public var questionClass: UInt16

    /// The header's length (RFC 1035 §4.1.1).
    public static let headerLength = 12
    /// The largest message: a TCP length prefix, or a UDP payload, holds at most this.
    public static let maximumMessageLength = 65535

    public init(id: UInt16, name: DNSName, type: UInt16, questionClass: UInt16 = 1) {
        self.id = id
        self.name = name
        self.type = type
        self.questionClass = questionClass
    }

    /// Parses a query message.
    public init(parsing message: [UInt8]) throws(DNSMessageError) {
        guard message.count >= Self.headerLength else { throw .truncatedHeader(length: message.count) }
        guard message.count <= Self.maximumMessageLength else { throw .tooLong(length: message.count) }
        guard message[2] & 0x80 == 0 else { throw .notAQuery }
        let opcode = Int(message[2] >> 3 & 0x0f)
        guard opcode == 0 else { throw .unsupportedOpcode(opcode) }
        let questions = Int(message[4]) << 8 | Int(message[5])
        guard questions == 1 else { throw .questionCount(questions) }

        var labels: [[UInt8]] = []
        var offset = Self.headerLength
        var wireLength = 1
        while true {
            guard offset < message.count else { throw .truncatedQuestion(offset: offset) }
            let length = Int(message[offset])
            switch length & 0xc0 {
            case 0xc0: throw .compressionPointer(offset: offset)
            case 0x40, 0x80: throw .reservedLabelType(offset: offset)
            default: break
            }
            if length == 0 { offset += 1; break }
            wireLength += 1 + length
            guard wireLength <= DNSName.maximumWireLength else { throw .nameTooLong(offset: offset) }
            guard offset + 1 + length <= message.count else { throw .truncatedQuestion(offset: offset) }
            labels.append(Array(message[(offset + 1)..<(offset + 1 + length)]))
            offset += 1 + length
        }
        guard offset + 4 <= message.count else { throw .truncatedQuestion(offset: offset) }
        id = UInt16(message[0]) << 8 | UInt16(message[1])
        name = DNSName(validatedLabels: labels)
        type = UInt16(message[offset]) << 8 | UInt16(message[offset + 1])
        questionClass = UInt16(message[offset + 2]) << 8 | UInt16(message[offset + 3])
    }

    /// The question: name, type and class.
    public var question: DNSQuestion {
        DNSQuestion(name: name, type: type, questionClass: questionClass)
    }

    /// The message of this query: header (RD set) and question, nothing else.
    public var encoded: [UInt8] {
        [UInt8(id >> 8), UInt8(id & 0xff), 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0] + question.wireBytes
    }
}
