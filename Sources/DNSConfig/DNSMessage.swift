/// A whole DNS message (RFC 1035 §4.1): the header, every question and every
/// resource record of the answer, authority and additional sections. The
/// split-DNS forwarder parses each upstream answer with it before relaying
/// it, and reads a query's EDNS payload size (RFC 6891) from it.
///
/// Parsing is strict and bounded, and reads nothing twice but names:
/// - every section holds exactly as many entries as the header counts, and
///   every entry ends inside the message (`truncatedQuestion`,
///   `truncatedRecord`); bytes after the last record are not read;
/// - labels are 1–63 bytes, label types 01 and 10 are refused, a name is at
///   most 255 bytes in wire form (`nameTooLong`);
/// - a compression pointer (RFC 1035 §4.1.4) must point to a prior
///   occurrence: a name after the header that lies wholly before the start
///   of the stretch of labels the pointer ends. So a chain of pointers
///   strictly descends, reads no byte twice and nothing after the name's
///   place. A name follows at most 127 pointers (it has at most 127
///   labels) (`invalidPointer`).
///
/// RDATA is kept as it came: names inside it (NS, CNAME, MX, …) may be
/// compressed, pointing into the message they came from.
public struct DNSMessage: Hashable, Sendable {
    public var id: UInt16
    /// The header's second word: QR, OPCODE, AA, TC, RD, RA, Z, AD, CD, RCODE.
    public var flags: UInt16
    public var questions: [DNSQuestion]
    public var answers: [DNSRecord]
    public var authorities: [DNSRecord]
    public var additionals: [DNSRecord]
    /// Where the last record ends: the bytes the parse read.
    public var length: Int

    /// QR (RFC 1035 §4.1.1).
    public static let responseFlag: UInt16 = 0x8000
    /// TC: the message was cut to fit its transport.
    public static let truncatedFlag: UInt16 = 0x0200
    /// The payload every UDP client takes (RFC 1035 §4.2.1), and the least an EDNS client may advertise (RFC 6891 §6.2.5).
    public static let minimumUDPPayload = 512
    /// The most a UDP datagram over IPv4 carries (65535 − 20 − 8).
    public static let maximumUDPPayload = 65507

    public var isResponse: Bool { flags & Self.responseFlag != 0 }
    public var opcode: Int { Int(flags >> 11 & 0x0f) }
    public var isTruncated: Bool { flags & Self.truncatedFlag != 0 }

    public init(id: UInt16, flags: UInt16, questions: [DNSQuestion], answers: [DNSRecord] = [],
                authorities: [DNSRecord] = [], additionals: [DNSRecord] = [], length: Int = 0) {
        self.id = id
        self.flags = flags
        self.questions = questions
        self.answers = answers
        self.authorities = authorities
        self.additionals = additionals
        self.length = length
    }

    /// Parses a message, query or response.
    public init(parsing message: [UInt8]) throws(DNSMessageError) {
        guard message.count >= DNSQuery.headerLength else { throw .truncatedHeader(length: message.count) }
        guard message.count <= DNSQuery.maximumMessageLength else { throw .tooLong(length: message.count) }
        id = Self.word(message, 0)
        flags = Self.word(message, 2)
        var offset = DNSQuery.headerLength
        questions = []
        for _ in 0..<Int(Self.word(message, 4)) {
            let (question, end) = try Self.readQuestion(message, at: offset)
            questions.append(question)
            offset = end
        }
        var sections: [[DNSRecord]] = []
        for countOffset in [6, 8, 10] {
            var records: [DNSRecord] = []
            for _ in 0..<Int(Self.word(message, countOffset)) {
                let (record, end) = try Self.readRecord(message, at: offset)
                records.append(record)
                offset = end
            }
            sections.append(records)
        }
        answers = sections[0]
        authorities = sections[1]
        additionals = sections[2]
        length = offset
    }

    /// The UDP payload the sender of this query takes (RFC 6891 §6.2.3):
    /// the CLASS of its one OPT record, at least 512, at most what a
    /// datagram holds; 512 without an OPT record, or with more than one, or
    /// with one whose owner is not the root (RFC 6891 §6.1.1: malformed).
    public var udpPayloadLimit: Int {
        let options = additionals.filter { $0.type == DNSRecord.optType }
        guard options.count == 1, options[0].name == .root else { return Self.minimumUDPPayload }
        return min(max(Int(options[0].recordClass), Self.minimumUDPPayload), Self.maximumUDPPayload)
    }

    /// This message as a server sends it over UDP when it does not fit in
    /// `limit` bytes (RFC 2181 §9, RFC 6891 §7): the header with TC set, the
    /// questions, and the OPT record when there is exactly one and it fits;
    /// no other records, so no partial RRset reaches the client, which asks
    /// again over TCP. A `limit` below 512 counts as 512.
    public func truncated(toFit limit: Int) -> [UInt8] {
        let limit = max(limit, Self.minimumUDPPayload)
        var bytes = Self.wordBytes(id) + Self.wordBytes(flags | Self.truncatedFlag) + [UInt8](repeating: 0, count: 8)
        var questionCount: UInt16 = 0
        for question in questions {
            let encoded = question.wireBytes
            guard bytes.count + encoded.count <= limit else { break }
            bytes += encoded
            questionCount += 1
        }
        var additionalCount: UInt16 = 0
        let options = additionals.filter { $0.type == DNSRecord.optType }
        if options.count == 1 {
            let encoded = options[0].wireBytes
            if bytes.count + encoded.count <= limit {
                bytes += encoded
                additionalCount = 1
            }
        }
        bytes.replaceSubrange(4..<6, with: Self.wordBytes(questionCount))
        bytes.replaceSubrange(10..<12, with: Self.wordBytes(additionalCount))
        return bytes
    }

    // MARK: Reading

    static func word(_ message: [UInt8], _ offset: Int) -> UInt16 {
        UInt16(message[offset]) << 8 | UInt16(message[offset + 1])
    }

    static func wordBytes(_ value: UInt16) -> [UInt8] { [UInt8(value >> 8), UInt8(value & 0xff)] }

    /// The question at `offset`, and where it ends.
    static func readQuestion(_ message: [UInt8], at offset: Int) throws(DNSMessageError) -> (DNSQuestion, Int) {
        let (name, end) = try readName(message, at: offset, inQuestion: true)
        guard end + 4 <= message.count else { throw .truncatedQuestion(offset: end) }
        return (DNSQuestion(name: name, type: word(message, end), questionClass: word(message, end + 2)), end + 4)
    }

    /// The resource record at `offset`, and where it ends.
    static func readRecord(_ message: [UInt8], at offset: Int) throws(DNSMessageError) -> (DNSRecord, Int) {
        let (name, end) = try readName(message, at: offset, inQuestion: false)
        guard end + 10 <= message.count else { throw .truncatedRecord(offset: end) }
        let dataLength = Int(word(message, end + 8))
        let dataStart = end + 10
        guard dataStart + dataLength <= message.count else { throw .truncatedRecord(offset: end + 8) }
        let ttl = UInt32(word(message, end + 4)) << 16 | UInt32(word(message, end + 6))
        let record = DNSRecord(name: name, type: word(message, end), recordClass: word(message, end + 2), ttl: ttl,
                               data: Array(message[dataStart..<(dataStart + dataLength)]))
        return (record, dataStart + dataLength)
    }

    /// The most pointers one name follows: a name has at most 127 labels.
    static let maximumPointers = 127

    /// The name at `start`, following compression pointers, and the offset
    /// just after it where it stands (after its first pointer, if any).
    ///
    /// The name is read in stretches: labels in place, then after each
    /// pointer the labels at its target. A pointer points to a prior
    /// occurrence (RFC 1035 §4.1.4): its target is after the header and
    /// before the start of the stretch the pointer ends, and the stretch it
    /// starts lies wholly before that start too. So stretches never overlap,
    /// each byte of the message is read at most once per name, and nothing
    /// after the name's place is read.
    static func readName(_ message: [UInt8], at start: Int, inQuestion: Bool) throws(DNSMessageError) -> (DNSName, Int) {
        var labels: [[UInt8]] = []
        var wireLength = 1
        var offset = start
        // The stretch being read: it started at `stretch` and must end before `bound`.
        var stretch = start
        var bound = message.count
        // The pointer that started it, if one did: a stretch that runs into its bound is that pointer's fault.
        var pointer: Int?
        var end: Int?
        var pointers = 0
        func overrun(_ at: Int) -> DNSMessageError {
            if let pointer { return .invalidPointer(offset: pointer) }
            return inQuestion ? .truncatedQuestion(offset: at) : .truncatedRecord(offset: at)
        }
        while true {
            guard offset < bound else { throw overrun(offset) }
            let length = Int(message[offset])
            switch length & 0xc0 {
            case 0xc0:
                guard offset + 1 < bound else { throw overrun(offset) }
                let target = (length & 0x3f) << 8 | Int(message[offset + 1])
                pointers += 1
                guard target >= DNSQuery.headerLength, target < stretch, pointers <= Self.maximumPointers else {
                    throw .invalidPointer(offset: offset)
                }
                if end == nil { end = offset + 2 }
                pointer = offset
                bound = stretch
                stretch = target
                offset = target
                continue
            case 0x40, 0x80:
                throw .reservedLabelType(offset: offset)
            default:
                break
            }
            if length == 0 {
                return (DNSName(validatedLabels: labels), end ?? offset + 1)
            }
            wireLength += 1 + length
            guard wireLength <= DNSName.maximumWireLength else { throw .nameTooLong(offset: offset) }
            guard offset + 1 + length <= bound else { throw overrun(offset) }
            labels.append(Array(message[(offset + 1)..<(offset + 1 + length)]))
            offset += 1 + length
        }
    }
}

/// One entry of a message's question section (RFC 1035 §4.1.2).
public struct DNSQuestion: Hashable, Sendable {
    public var name: DNSName
    /// QTYPE (1 = A, 28 = AAAA, …).
    public var type: UInt16
    /// QCLASS (1 = IN).
    public var questionClass: UInt16

    public init(name: DNSName, type: UInt16, questionClass: UInt16 = 1) {
        self.name = name
        self.type = type
        self.questionClass = questionClass
    }

    /// True when `other` asks the same: the name equal but for ASCII case
    /// (RFC 4343; a server may echo it in other case), the same type and class.
    public func matches(_ other: DNSQuestion) -> Bool {
        type == other.type && questionClass == other.questionClass && name.equalsIgnoringASCIICase(other.name)
    }

    /// QNAME (uncompressed), QTYPE, QCLASS.
    public var wireBytes: [UInt8] {
        name.wireBytes + DNSMessage.wordBytes(type) + DNSMessage.wordBytes(questionClass)
    }
}

/// A resource record (RFC 1035 §4.1.3).
public struct DNSRecord: Hashable, Sendable {
    public var name: DNSName
    public var type: UInt16
    /// CLASS; in an OPT record, the sender's UDP payload size.
    public var recordClass: UInt16
    /// TTL; in an OPT record, the extended RCODE, the EDNS version and flags.
    public var ttl: UInt32
    /// RDATA as it came.
    public var data: [UInt8]

    /// OPT, the EDNS pseudo-record (RFC 6891 §6.1.2).
    public static let optType: UInt16 = 41

    public init(name: DNSName, type: UInt16, recordClass: UInt16, ttl: UInt32, data: [UInt8]) {
        self.name = name
        self.type = type
        self.recordClass = recordClass
        self.ttl = ttl
        self.data = data
    }

    /// The record in wire form, its owner uncompressed and its RDATA as it came.
    public var wireBytes: [UInt8] {
        name.wireBytes + DNSMessage.wordBytes(type) + DNSMessage.wordBytes(recordClass)
            + DNSMessage.wordBytes(UInt16(ttl >> 16)) + DNSMessage.wordBytes(UInt16(ttl & 0xffff))
            + DNSMessage.wordBytes(UInt16(data.count)) + data
    }
}
