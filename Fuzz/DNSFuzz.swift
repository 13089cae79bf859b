// The libFuzzer target for the DNS message parsers the split-DNS forwarder runs on bytes from its clients
// and from upstream servers. Scripts/fuzz-dns.sh compiles it in one module with the pure message files of
// Sources/DNSConfig (DNSName, DNSMessageError, DNSQuery, DNSMessage, DNSQuery+Answer), with
// -sanitize=fuzzer,address; it is not part of the SwiftPM package.
//
// An input's first byte picks a target (modulo the number of targets), the rest is that target's data.
// Every target checks invariants against a model, not only that nothing traps; a broken invariant prints
// what broke and aborts, so libFuzzer saves the input as a reproducer.
//
//   0 message       DNSMessage(parsing:) against a reference parser written here (recursive, its own
//                   bounds): both accept or both refuse, with the same result; every name at most 255 bytes
//                   and labels 1–63; what was read re-encodes uncompressed and re-parses equal; a strict
//                   prefix of what was read is refused, bytes after it change nothing; udpPayloadLimit and
//                   truncated(toFit:) against their definitions (fits, TC, same id and questions, OPT only)
//   1 query         DNSQuery(parsing:) against a reference (QR 0, opcode 0, one question, no pointer):
//                   same verdict and fields; a parsed query re-encodes and re-parses equal; it agrees with
//                   DNSMessage; the same bytes with QR set answer it exactly when they parse as a message
//   2 answer check  a query made from the data and an answer made from it with the changes the data
//                   picks (id, QR, opcode, QDCOUNT, a name byte, ASCII case, type, class, TC, records cut):
//                   check(answer:) gives the verdict the changes call for
//   3 raw answer    check(answer:) of raw bytes against a fixed query: whatever it accepts has the query's
//                   id, QR 1, opcode 0, one question equal to the query's but for ASCII case, and parses
//                   (or has TC set); what it rejects it rejects for the first reason that holds
//   4 names         DNSName(text), description, equalsIgnoringASCIICase and isInDomain against models

import Glibc

// MARK: - Entry points

@_cdecl("LLVMFuzzerInitialize")
public func fuzzInitialize(_ argc: UnsafeMutablePointer<CInt>,
                           _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>) -> CInt {
    if let dir = getenv("DNS_FUZZ_SEED_DIR") {
        FuzzSeeds.write(to: String(cString: dir))
    }
    return 0
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ start: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    guard let start, count >= 1 else { return 0 }
    let data = Array(UnsafeBufferPointer(start: start, count: count))
    let payload = Array(data[1...])
    switch data[0] % 5 {
    case 0: FuzzTargets.message(payload)
    case 1: FuzzTargets.query(payload)
    case 2: FuzzTargets.answerCheck(payload)
    case 3: FuzzTargets.rawAnswer(payload)
    default: FuzzTargets.names(payload)
    }
    return 0
}

/// Reports a broken invariant and aborts: libFuzzer's SIGABRT handler writes the reproducer.
func check(_ condition: Bool, _ message: @autoclosure () -> String, file: StaticString = #fileID, line: UInt = #line) {
    guard !condition else { return }
    printError("INVARIANT BROKEN (\(file):\(line)): \(message())")
    abort()
}

// MARK: - The reference: the RFC 1035 §4.1 rules written out again, recursively

enum Reference {
    struct Name: Equatable { var labels: [[UInt8]]; var end: Int }

    /// The name at `offset`: labels in place, then the root or a pointer to a prior occurrence, a name
    /// that starts at or after the header and before `limit` (the start of the labels read in place) and
    /// ends before it too; at most 127 pointers deep. Nothing at or after `bound` is read.
    static func name(_ m: [UInt8], at offset: Int, limit: Int, bound: Int? = nil, pointers: Int = 0) -> Name? {
        let bound = bound ?? m.count
        guard offset < bound else { return nil }
        let b = Int(m[offset])
        switch b >> 6 {
        case 3:
            guard offset + 1 < bound, pointers < 127 else { return nil }
            let target = (b & 0x3f) * 256 + Int(m[offset + 1])
            guard target >= 12, target < limit,
                  let rest = name(m, at: target, limit: target, bound: limit, pointers: pointers + 1) else { return nil }
            return Name(labels: rest.labels, end: offset + 2)
        case 1, 2:
            return nil
        default:
            if b == 0 { return Name(labels: [], end: offset + 1) }
            guard offset + 1 + b <= bound,
                  let rest = name(m, at: offset + 1 + b, limit: limit, bound: bound, pointers: pointers) else { return nil }
            let labels = [Array(m[(offset + 1)...(offset + b)])] + rest.labels
            guard labels.reduce(1, { $0 + 1 + $1.count }) <= 255 else { return nil }
            return Name(labels: labels, end: rest.end)
        }
    }

    static func u16(_ m: [UInt8], _ at: Int) -> Int { Int(m[at]) * 256 + Int(m[at + 1]) }

    struct Record: Equatable { var labels: [[UInt8]]; var type: Int; var rclass: Int; var ttl: UInt32; var data: [UInt8] }
    struct Message: Equatable {
        var id: Int, flags: Int
        var questions: [(labels: [[UInt8]], type: Int, qclass: Int)]
        var sections: [[Record]]
        var end: Int
        static func == (a: Message, b: Message) -> Bool {
            a.id == b.id && a.flags == b.flags && a.sections == b.sections && a.end == b.end
                && a.questions.count == b.questions.count
                && zip(a.questions, b.questions).allSatisfy { $0.labels == $1.labels && $0.type == $1.type && $0.qclass == $1.qclass }
        }
    }

    static func message(_ m: [UInt8]) -> Message? {
        guard m.count >= 12, m.count <= 65535 else { return nil }
        var at = 12
        var questions: [(labels: [[UInt8]], type: Int, qclass: Int)] = []
        for _ in 0..<u16(m, 4) {
            guard let n = name(m, at: at, limit: at), n.end + 4 <= m.count else { return nil }
            questions.append((n.labels, u16(m, n.end), u16(m, n.end + 2)))
            at = n.end + 4
        }
        var sections: [[Record]] = []
        for c in [6, 8, 10] {
            var records: [Record] = []
            for _ in 0..<u16(m, c) {
                guard let n = name(m, at: at, limit: at), n.end + 10 <= m.count else { return nil }
                let length = u16(m, n.end + 8)
                guard n.end + 10 + length <= m.count else { return nil }
                let ttl = UInt32(u16(m, n.end + 4)) << 16 | UInt32(u16(m, n.end + 6))
                records.append(Record(labels: n.labels, type: u16(m, n.end), rclass: u16(m, n.end + 2), ttl: ttl,
                                      data: Array(m[(n.end + 10)..<(n.end + 10 + length)])))
                at = n.end + 10 + length
            }
            sections.append(records)
        }
        return Message(id: u16(m, 0), flags: u16(m, 2), questions: questions, sections: sections, end: at)
    }

    static func lower(_ labels: [[UInt8]]) -> [[UInt8]] {
        labels.map { $0.map { $0 >= 0x41 && $0 <= 0x5a ? $0 + 0x20 : $0 } }
    }

    /// A message in wire form, every name uncompressed.
    static func encode(id: Int, flags: Int, questions: [(labels: [[UInt8]], type: Int, qclass: Int)], sections: [[Record]]) -> [UInt8] {
        func w(_ v: Int) -> [UInt8] { [UInt8(v >> 8 & 0xff), UInt8(v & 0xff)] }
        func n(_ labels: [[UInt8]]) -> [UInt8] { labels.flatMap { [UInt8($0.count)] + $0 } + [0] }
        var out = w(id) + w(flags) + w(questions.count) + w(sections[0].count) + w(sections[1].count) + w(sections[2].count)
        for q in questions { out += n(q.labels) + w(q.type) + w(q.qclass) }
        for section in sections {
            for r in section {
                out += n(r.labels) + w(r.type) + w(r.rclass) + w(Int(r.ttl >> 16)) + w(Int(r.ttl & 0xffff)) + w(r.data.count) + r.data
            }
        }
        return out
    }
}

extension Reference.Message {
    init(_ m: DNSMessage) {
        func r(_ x: DNSRecord) -> Reference.Record {
            Reference.Record(labels: x.name.labels, type: Int(x.type), rclass: Int(x.recordClass), ttl: x.ttl, data: x.data)
        }
        self.init(id: Int(m.id), flags: Int(m.flags),
                  questions: m.questions.map { ($0.name.labels, Int($0.type), Int($0.questionClass)) },
                  sections: [m.answers.map(r), m.authorities.map(r), m.additionals.map(r)], end: m.length)
    }
}

// MARK: - Targets

enum FuzzTargets {
    // MARK: 0: whole messages

    static func message(_ d: [UInt8]) {
        let parsed = try? DNSMessage(parsing: d)
        let model = Reference.message(d)
        check((parsed == nil) == (model == nil),
              "DNSMessage \(parsed == nil ? "refused" : "accepted") \(d.count) bytes the reference \(model == nil ? "refuses" : "accepts")")
        guard let parsed, let model else { return }
        check(Reference.Message(parsed) == model, "DNSMessage and the reference read different messages")
        check(parsed.length <= d.count && parsed.length >= 12, "length \(parsed.length) of \(d.count)")
        for name in parsed.questions.map(\.name) + (parsed.answers + parsed.authorities + parsed.additionals).map(\.name) {
            check(name.wireLength <= 255 && name.labels.allSatisfy { (1...63).contains($0.count) }, "a name out of bounds: \(name)")
        }

        // What was read is all that matters: cut there, or followed by anything, it reads the same.
        let read = Array(d.prefix(parsed.length))
        check((try? DNSMessage(parsing: read)) == parsed, "the bytes read do not parse alone to the same message")
        check((try? DNSMessage(parsing: read + [0xc0, 0x0c, 0x3f])) == parsed, "trailing bytes changed the message")
        // Any strict prefix of them is refused (the byte chosen by the data's last byte, and one short).
        for cut in Set([parsed.length - 1, Int(d.last ?? 0) % parsed.length]) {
            check((try? DNSMessage(parsing: Array(d.prefix(cut)))) == nil, "a prefix of \(cut) of \(parsed.length) bytes parsed")
        }

        // Uncompressed, it re-parses to the same message.
        let plain = Reference.encode(id: model.id, flags: model.flags, questions: model.questions, sections: model.sections)
        if plain.count <= 65535 {
            var again = (try? DNSMessage(parsing: plain))
            again?.length = parsed.length
            check(again == parsed, "the uncompressed re-encoding reads differently")
        }

        // EDNS: the one OPT record with the root as owner, 512 ... 65507.
        let options = parsed.additionals.filter { $0.type == 41 }
        let limit = parsed.udpPayloadLimit
        let expected = options.count == 1 && options[0].name.labels.isEmpty ? min(max(Int(options[0].recordClass), 512), 65507) : 512
        check(limit == expected, "udpPayloadLimit \(limit), expected \(expected)")

        // Truncation: fits, TC, the same id and flags, the questions that fit, the OPT record or nothing.
        let asked = Int(Reference.u16(d, 0) ^ Reference.u16(d, 2)) % 2000
        let bytes = parsed.truncated(toFit: asked)
        check(bytes.count <= max(asked, 512), "truncated to \(bytes.count) bytes for a limit of \(asked)")
        guard let cut = try? DNSMessage(parsing: bytes) else { return check(false, "a truncated message does not parse") }
        check(cut.length == bytes.count, "a truncated message has bytes after its records")
        check(cut.id == parsed.id && cut.flags == parsed.flags | 0x0200, "truncation changed the id or flags other than TC")
        check(Array(parsed.questions.prefix(cut.questions.count)) == cut.questions, "truncation changed the questions")
        check(cut.questions.count == parsed.questions.count || bytes.count + parsed.questions[cut.questions.count].wireBytes.count > max(asked, 512),
              "truncation dropped a question that fits")
        check(cut.answers.isEmpty && cut.authorities.isEmpty, "records left in a truncated message")
        check(cut.additionals == [] || (options.count == 1 && cut.additionals == options), "truncation kept a record other than the one OPT")
    }

    // MARK: 1: queries from clients

    static func query(_ d: [UInt8]) {
        let parsed = try? DNSQuery(parsing: d)
        // The reference: a header, QR 0, opcode 0, QDCOUNT 1, a question whose name has no pointer.
        var expected: (id: Int, labels: [[UInt8]], type: Int, qclass: Int)?
        if d.count >= 12, d.count <= 65535, d[2] & 0x80 == 0, (d[2] >> 3) & 0x0f == 0, Reference.u16(d, 4) == 1,
           let n = Reference.name(d, at: 12, limit: 12), n.end + 4 <= d.count {
            expected = (Reference.u16(d, 0), n.labels, Reference.u16(d, n.end), Reference.u16(d, n.end + 2))
        }
        check((parsed == nil) == (expected == nil), "DNSQuery \(parsed == nil ? "refused" : "accepted") what the reference does not")
        guard let parsed, let expected else { return }
        check(Int(parsed.id) == expected.id && parsed.name.labels == expected.labels
              && Int(parsed.type) == expected.type && Int(parsed.questionClass) == expected.qclass, "DNSQuery read other fields")
        check((try? DNSQuery(parsing: parsed.encoded)) == parsed, "a query does not survive encoding")
        check(parsed.encoded.count == 12 + parsed.name.wireLength + 4, "encoded length")
        if let message = try? DNSMessage(parsing: d) {
            check(message.id == parsed.id && message.questions == [parsed.question], "DNSQuery and DNSMessage disagree")
        }
        // The same bytes with QR set answer the query exactly when they parse as a whole message.
        var answer = d
        answer[2] |= 0x80
        let whole = (try? DNSMessage(parsing: answer)) != nil
        switch parsed.check(answer: answer) {
        case .answer(let m): check(whole && m.questions == [parsed.question], "accepted an answer that does not parse")
        case .truncated: check(!whole && answer[2] & 0x02 != 0, "truncated verdict for a whole message or without TC")
        case .rejected(.malformed): check(!whole && answer[2] & 0x02 == 0, "a whole message, or TC, refused as malformed")
        case .rejected(let other): check(false, "its own bytes rejected as \(other)")
        }
    }

    // MARK: 2: an answer made from a query, with the changes the data picks

    static func answerCheck(_ d: [UInt8]) {
        guard d.count >= 8 else { return }
        let id = UInt16(d[0]) << 8 | UInt16(d[1])
        let type = UInt16(d[2]) << 8 | UInt16(d[3])
        let qclass = UInt16(d[4] & 0x03) // 0…3: IN, CH and their neighbours
        let changes = UInt16(d[5]) << 8 | UInt16(d[6])
        let tweak = d[7]
        // The name: labels cut from the rest of the data by a length byte each, within 255 bytes.
        var labels: [[UInt8]] = []
        var i = 8, wire = 1
        while i < d.count {
            let length = Int(d[i] % 64)
            i += 1
            guard length > 0, i + length <= d.count, wire + 1 + length <= 255 else { break }
            labels.append(Array(d[i..<(i + length)]))
            wire += 1 + length
            i += length
        }
        let query = DNSQuery(id: id, name: DNSName(validatedLabels: labels), type: type, questionClass: qclass)

        var answerID = Int(id), flags = 0x8180, qdcount = 1, answerLabels = labels
        var answerType = Int(type), answerClass = Int(qclass)
        if changes & 0x0001 != 0 { answerID ^= Int(tweak) | 1 }
        if changes & 0x0002 != 0 { flags &= ~0x8000 }                         // QR 0
        if changes & 0x0004 != 0 { flags |= (Int(tweak % 15) + 1) << 11 }    // opcode 1…15
        if changes & 0x0008 != 0 { qdcount = changes & 0x0100 != 0 ? 0 : 2 }
        if changes & 0x0010 != 0 { answerType ^= Int(tweak) | 1 }
        if changes & 0x0020 != 0 { answerClass ^= Int(tweak) | 1 }
        var caseOnly = true
        if changes & 0x0040 != 0, !answerLabels.isEmpty {                      // ASCII case flipped, where it is a letter
            for (l, label) in answerLabels.enumerated() {
                answerLabels[l] = label.enumerated().map { (k, b) in
                    let letter = (b | 0x20) >= 0x61 && (b | 0x20) <= 0x7a
                    return letter && (Int(tweak) + k + l) % 3 == 0 ? b ^ 0x20 : b
                }
            }
        }
        if changes & 0x0080 != 0, !answerLabels.isEmpty {                      // one byte of the name changed
            let l = Int(tweak) % answerLabels.count, k = Int(tweak / 3) % answerLabels[l].count
            let old = answerLabels[l][k]
            answerLabels[l][k] = old &+ (tweak | 1)
            caseOnly = Reference.lower([[old]]) == Reference.lower([[answerLabels[l][k]]])
        }
        let truncated = changes & 0x0200 != 0
        if truncated { flags |= 0x0200 }
        let records = [Reference.Record(labels: answerLabels, type: 1, rclass: 1, ttl: UInt32(tweak), data: [10, 0, 0, tweak])]
        var answer = Reference.encode(id: answerID, flags: flags,
                                      questions: Array(repeating: (answerLabels, answerType, answerClass), count: max(qdcount, 1)),
                                      sections: [records, [], []])
        if qdcount == 0 { answer[5] = 0 }
        let cut = changes & 0x0400 != 0
        if cut { answer.removeLast(1 + Int(tweak % 4)) }                       // inside the record's data

        let sameQuestion = Reference.lower(answerLabels) == Reference.lower(labels) && answerType == Int(type) && answerClass == Int(qclass)
        let verdict = query.check(answer: answer)
        let expected: String
        if answerID != Int(id) { expected = "wrongID" }
        else if flags & 0x8000 == 0 { expected = "notAResponse" }
        else if (flags >> 11) & 0x0f != 0 { expected = "opcode" }
        else if qdcount != 1 { expected = "wrongQuestion" }
        else if !sameQuestion { expected = "wrongQuestion" }
        else if cut { expected = truncated ? "truncated" : "malformed" }
        else { expected = "answer" }
        let got: String
        switch verdict {
        case .answer(let m):
            got = "answer"
            check(m.answers.map(\.data) == [records[0].data] && m.isTruncated == truncated, "the accepted answer reads wrong")
        case .truncated: got = "truncated"
        case .rejected(.wrongID): got = "wrongID"
        case .rejected(.wrongQuestion): got = "wrongQuestion"
        case .rejected(.malformed(.notAResponse)): got = "notAResponse"
        case .rejected(.malformed(.unsupportedOpcode)): got = "opcode"
        case .rejected(.malformed): got = "malformed"
        case .rejected(.wrongSource): got = "wrongSource"
        }
        check(got == expected, "verdict \(got), expected \(expected) (changes \(String(changes, radix: 16)), case only \(caseOnly))")
    }

    // MARK: 3: raw bytes as an answer to a fixed query

    static let fixedQuery = DNSQuery(id: 0x5a5a, name: DNSName("Host.Corp.example")!, type: 1)

    static func rawAnswer(_ d: [UInt8]) {
        // Half the inputs carry the query's id, so the checks behind the id are reached.
        var answer = d
        if answer.count >= 2, answer[0] & 1 == 0 { answer[0] = 0x5a; answer[1] = 0x5a }
        let verdict = fixedQuery.check(answer: answer)
        guard answer.count >= 12 else {
            return check(verdict == .rejected(.malformed(.truncatedHeader(length: answer.count))), "a short message: \(verdict)")
        }
        // The documented order: id, QR, opcode, QDCOUNT, the question's form, the question, the sections, TC.
        let question = Reference.name(answer, at: 12, limit: 12).flatMap { $0.end + 4 <= answer.count ? $0 : nil }
        let expected: String
        if Reference.u16(answer, 0) != 0x5a5a { expected = "wrongID" }
        else if answer[2] & 0x80 == 0 { expected = "notAResponse" }
        else if (answer[2] >> 3) & 0x0f != 0 { expected = "opcode" }
        else if Reference.u16(answer, 4) != 1 { expected = "wrongQuestion" }
        else if question == nil { expected = "malformed" }
        else if Reference.lower(question!.labels) != Reference.lower(fixedQuery.name.labels)
                    || Reference.u16(answer, question!.end) != 1 || Reference.u16(answer, question!.end + 2) != 1 {
            expected = "wrongQuestion"
        }
        else if Reference.message(answer) != nil { expected = "answer" }
        else if answer[2] & 0x02 != 0 { expected = "truncated" }
        else { expected = "malformed" }
        let got: String
        switch verdict {
        case .answer(let m):
            got = "answer"
            check(m.questions.count == 1 && m.questions[0].matches(fixedQuery.question) && m.id == fixedQuery.id,
                  "the accepted answer asks another question")
        case .truncated: got = "truncated"
        case .rejected(.wrongID): got = "wrongID"
        case .rejected(.wrongQuestion): got = "wrongQuestion"
        case .rejected(.malformed(.notAResponse)): got = "notAResponse"
        case .rejected(.malformed(.unsupportedOpcode)): got = "opcode"
        case .rejected(.malformed): got = "malformed"
        case .rejected(.wrongSource): got = "wrongSource"
        }
        check(got == expected, "verdict \(got), expected \(expected)")
    }

    // MARK: 4: names

    static func names(_ d: [UInt8]) {
        guard let split = d.firstIndex(of: 0x7c) else { return } // "|" separates a name from a domain
        let nameText = String(decoding: d[..<split], as: UTF8.self)
        let domainText = String(decoding: d[(split + 1)...], as: UTF8.self)
        for text in [nameText, domainText] {
            guard let name = DNSName(text) else { continue }
            check(name.wireLength <= 255 && name.labels.allSatisfy { (1...63).contains($0.count) }, "DNSName(\(text)) out of bounds")
            let printable = name.labels.allSatisfy { $0.allSatisfy { $0 > 0x20 && $0 < 0x7f && $0 != 0x5c } }
            if printable { check(DNSName(name.description) == name, "\(name) does not re-parse from its description") }
            check(name.isInDomain(name) && name.isInDomain(.root) && name.equalsIgnoringASCIICase(name), "a name is in itself and the root")
            check(name.wireBytes.count == name.wireLength, "wireBytes")
        }
        guard let name = DNSName(nameText), let domain = DNSName(domainText) else { return }
        let lowerName = Reference.lower(name.labels), lowerDomain = Reference.lower(domain.labels)
        let inDomain = lowerDomain.count <= lowerName.count && Array(lowerName.suffix(lowerDomain.count)) == lowerDomain
        check(name.isInDomain(domain) == inDomain, "isInDomain(\(name), \(domain)) != model")
        check(name.equalsIgnoringASCIICase(domain) == (lowerName == lowerDomain), "equalsIgnoringASCIICase(\(name), \(domain))")
        check(DNSQuestion(name: name, type: 1).matches(DNSQuestion(name: domain, type: 1)) == (lowerName == lowerDomain), "matches")
    }
}

/// Writes a line to standard error (fd 2; the C `stderr` global is not concurrency-safe in Swift 6).
func printError(_ text: String) {
    let bytes = Array((text + "\n").utf8)
    var offset = 0
    while offset < bytes.count {
        let n = bytes[offset...].withUnsafeBytes { write(2, $0.baseAddress, $0.count) }
        if n <= 0 { break }
        offset += n
    }
}

// MARK: - Seeds: valid inputs for each target, made by the code under test

enum FuzzSeeds {
    static func all() -> [(name: String, bytes: [UInt8])] {
        var seeds: [(String, [UInt8])] = []
        let name = DNSName("www.Corp.example")!
        let query = DNSQuery(id: 0xbeef, name: name, type: 1)
        var edns = DNSQuery(id: 0x1234, name: DNSName("big.corp.example")!, type: 16).encoded
        edns[11] = 1
        edns += [0, 0, 41, 0x10, 0, 0, 0, 0x80, 0, 0, 4, 0, 10, 0, 0]

        // A compressed answer: one record owned by the question's name, one by "abc" + a pointer into it,
        // and an OPT record.
        var compressed = query.encoded
        compressed[2] = 0x81; compressed[3] = 0x80; compressed[7] = 2; compressed[11] = 1
        compressed += [0xc0, 0x0c, 0, 1, 0, 1, 0, 0, 0x0e, 0x10, 0, 4, 10, 2, 2, 2]
        compressed += [3, 0x61, 0x62, 0x63, 0xc0, 0x10, 0, 1, 0, 1, 0, 0, 0x0e, 0x10, 0, 4, 10, 2, 2, 3]
        compressed += [0, 0, 41, 0x04, 0xd0, 0, 0, 0, 0, 0, 0]
        // dnsmasq's truncated answer: TC, the question, OPT.
        var truncated = Array(edns)
        truncated[2] = 0x87; truncated[3] = 0x80
        // Pointer chains: records each owned by a pointer to the previous owner; 127 pointers deep is the
        // most a name may follow, 128 is refused (both are seeds: the bound is where the bugs would be).
        func chain(_ records: Int) -> [UInt8] {
            var bytes: [UInt8] = [0, 1, 0x81, 0x80, 0, 1, UInt8(records >> 8), UInt8(records & 0xff), 0, 0, 0, 0,
                                  1, 0x61, 0, 0, 1, 0, 1]
            var previous = 12
            for _ in 0..<records {
                let here = bytes.count
                bytes += [0xc0 | UInt8(previous >> 8), UInt8(previous & 0xff), 0, 1, 0, 1, 0, 0, 0, 1, 0, 0]
                previous = here
            }
            return bytes
        }
        // 0: whole messages.
        for (label, bytes) in [("compressed", compressed), ("truncated", truncated), ("edns-query", edns), ("chain-3", chain(3)),
                               ("chain-127", chain(127)), ("chain-128", chain(128)), ("query", query.encoded)] {
            seeds.append(("message-\(label)", [0] + bytes))
        }
        // EDNS payload sizes at the bounds (below 512 counts as 512; above 65507, as 65507).
        for payload in [0, 511, 512, 513, 65507, 65535] {
            var sized = edns
            sized[edns.count - 15 + 3] = UInt8(payload >> 8)
            sized[edns.count - 15 + 4] = UInt8(payload & 0xff)
            seeds.append(("message-edns-\(payload)", [0] + sized))
        }
        // An answer whose OPT record (480 bytes of padding, RFC 7830) does not fit in 512 with the question:
        // its id equals its flags, so the target truncates it to 512 and the OPT must go.
        var padded = compressed
        padded[0] = 0x81; padded[1] = 0x80
        padded.removeLast(11)
        padded += [0, 0, 41, 0x10, 0, 0, 0, 0, 0, 0x01, 0xe4, 0, 12, 0x01, 0xe0] + [UInt8](repeating: 0, count: 480)
        seeds.append(("message-big-opt", [0] + padded))
        // 1: queries.
        let longest = DNSQuery(id: 7, name: DNSName(validatedLabels: [[UInt8](repeating: 0x61, count: 63), [UInt8](repeating: 0x62, count: 63),
                                                                       [UInt8](repeating: 0x63, count: 63), [UInt8](repeating: 0x64, count: 61)]),
                               type: 28)
        for (label, bytes) in [("a", query.encoded), ("edns", edns), ("root-ns", DNSQuery(id: 1, name: .root, type: 2).encoded),
                               ("longest", longest.encoded)] {
            seeds.append(("query-\(label)", [1] + bytes))
        }
        // 2: id, type, class, changes, tweak, then labels (a length byte each).
        let labels: [UInt8] = [4] + Array("Host".utf8) + [4] + Array("Corp".utf8) + [7] + Array("example".utf8)
        for (label, changes) in [("plain", 0x0000), ("case", 0x0040), ("byte", 0x0080), ("id", 0x0001), ("tc-cut", 0x0600),
                                 ("type", 0x0010), ("qd0", 0x0108)] {
            seeds.append(("check-\(label)", [2, 0xab, 0xcd, 0, 1, 1, UInt8(changes >> 8), UInt8(changes & 0xff), 0x35] + labels))
        }
        // 3: answers to the fixed query, as the code under test would accept them.
        var right = FuzzTargets.fixedQuery.encoded
        right[2] = 0x81; right[3] = 0x80; right[7] = 1
        right += [0xc0, 0x0c, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 10, 2, 2, 2]
        var upper = right
        for i in 13..<17 { upper[i] &= 0xdf }
        var cutTC = Array(right.dropLast(2))
        cutTC[2] |= 0x02
        for (label, bytes) in [("right", right), ("upper", upper), ("cut-tc", cutTC)] {
            seeds.append(("answer-\(label)", [3] + bytes))
        }
        // 4: a name and a domain.
        for (label, text) in [("in", "a.b.Corp.Example|corp.example"), ("out", "notcorp.example|corp.example"), ("root", "x.|.")] {
            seeds.append(("names-\(label)", [4] + Array(text.utf8)))
        }
        return seeds
    }

    /// Writes each seed to `directory`/seed-NAME (the directory must exist).
    static func write(to directory: String) {
        for (name, bytes) in all() {
            let path = "\(directory)/seed-\(name)"
            guard let file = fopen(path, "wb") else {
                printError("cannot write \(path)")
                exit(2)
            }
            _ = bytes.withUnsafeBytes { fwrite($0.baseAddress, 1, $0.count, file) }
            fclose(file)
        }
    }
}
