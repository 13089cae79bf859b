import XCTest
@testable import DNSConfig

/// Whole-message parsing, EDNS payload sizes and truncation, against bytes
/// written out by hand from RFC 1035 §4.1 and RFC 6891 §6.1.
final class DNSMessageTests: XCTestCase {
    /// id 0xbeef, QR RD RA, one question "www.Corp.example" A IN and two
    /// answers: one owned by a pointer to the question's name, one by
    /// "abc" followed by a pointer to "Corp.example" inside it.
    let compressed: [UInt8] = [
        0xbe, 0xef, 0x81, 0x80, 0x00, 0x01, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00,
        0x03, 0x77, 0x77, 0x77, 0x04, 0x43, 0x6f, 0x72, 0x70,              // 12: 3 "www" 4 "Corp"
        0x07, 0x65, 0x78, 0x61, 0x6d, 0x70, 0x6c, 0x65, 0x00,              // 21: 7 "example" root
        0x00, 0x01, 0x00, 0x01,                                            // 30: A IN
        0xc0, 0x0c, 0x00, 0x01, 0x00, 0x01, 0x00, 0x00, 0x0e, 0x10, 0x00, 0x04, 10, 2, 2, 2,   // 34
        0x03, 0x61, 0x62, 0x63, 0xc0, 0x10,                                // 50: 3 "abc" → 16
        0x00, 0x01, 0x00, 0x01, 0x00, 0x00, 0x0e, 0x10, 0x00, 0x04, 10, 2, 2, 3,
    ]

    func testParsesHeaderQuestionAndCompressedRecords() throws {
        let m = try DNSMessage(parsing: compressed)
        XCTAssertEqual(m.id, 0xbeef)
        XCTAssertTrue(m.isResponse)
        XCTAssertFalse(m.isTruncated)
        XCTAssertEqual(m.opcode, 0)
        XCTAssertEqual(m.questions, [DNSQuestion(name: DNSName("www.Corp.example")!, type: 1)])
        XCTAssertEqual(m.answers.map(\.name), [DNSName("www.Corp.example")!, DNSName("abc.Corp.example")!])
        XCTAssertEqual(m.answers.map(\.data), [[10, 2, 2, 2], [10, 2, 2, 3]])
        XCTAssertEqual(m.answers.map(\.ttl), [3600, 3600])
        XCTAssertEqual(m.authorities, [])
        XCTAssertEqual(m.additionals, [])
        XCTAssertEqual(m.length, compressed.count)
    }

    func testBytesAfterTheLastRecordAreNotRead() throws {
        let m = try DNSMessage(parsing: compressed + [1, 2, 3])
        XCTAssertEqual(m.length, compressed.count)
        XCTAssertEqual(m.answers.count, 2)
    }

    func testEveryStrictPrefixIsRefused() {
        for length in 0..<compressed.count {
            XCTAssertThrowsError(try DNSMessage(parsing: Array(compressed.prefix(length))), "prefix \(length)")
        }
    }

    func testCountsLargerThanTheMessageAreRefused() {
        var m = compressed
        m[7] = 3 // ANCOUNT 3, two present
        XCTAssertThrowsError(try DNSMessage(parsing: m)) {
            XCTAssertEqual($0 as? DNSMessageError, .truncatedRecord(offset: compressed.count))
        }
        m = compressed
        m[11] = 0xff // ARCOUNT 255, none present
        XCTAssertThrowsError(try DNSMessage(parsing: m))
    }

    func testPointersThatDoNotPointBackwardsAreRefused() {
        // The second record's pointer at 54: to itself, forwards, into the header, to just before itself.
        for target: UInt8 in [54, 60, 0, 11] {
            var m = compressed
            m[55] = target
            XCTAssertThrowsError(try DNSMessage(parsing: m), "pointer to \(target)") {
                XCTAssertEqual($0 as? DNSMessageError, .invalidPointer(offset: 54), "pointer to \(target)")
            }
        }
        // A pointer into the labels of its own name ("abc" at 50): not before the stretch it ends.
        var m = compressed
        m[55] = 50
        XCTAssertThrowsError(try DNSMessage(parsing: m)) { XCTAssertEqual($0 as? DNSMessageError, .invalidPointer(offset: 54)) }
        // A pointer in the question, where nothing comes before it.
        let pointerQuestion: [UInt8] = [0, 1, 0x81, 0x80, 0, 1, 0, 0, 0, 0, 0, 0, 0xc0, 0x0c, 0, 1, 0, 1]
        XCTAssertThrowsError(try DNSMessage(parsing: pointerQuestion)) {
            XCTAssertEqual($0 as? DNSMessageError, .invalidPointer(offset: 12))
        }
    }

    func testAPointerMustPointToAPriorOccurrence() throws {
        // Question "1" A IN (12–18); the record's owner is a pointer at 19, then type, class, TTL, 10 bytes of data.
        func message(pointingTo target: UInt8) -> [UInt8] {
            [0, 1, 0x81, 0x80, 0, 1, 0, 1, 0, 0, 0, 0, 1, 0x31, 0, 0, 1, 0, 1, 0xc0, target,
             0, 1, 0, 1, 0, 0, 0, 0, 0, 10] + [UInt8](repeating: 0, count: 10)
        }
        // To 17 (the class's zero byte, read as the root): before the pointer, wholly. Accepted.
        XCTAssertEqual(try DNSMessage(parsing: message(pointingTo: 17)).answers.first?.name, .root)
        // To 18: a label of length 1 whose byte is the pointer itself, and on past it. Refused.
        XCTAssertThrowsError(try DNSMessage(parsing: message(pointingTo: 18))) {
            XCTAssertEqual($0 as? DNSMessageError, .invalidPointer(offset: 19))
        }
    }

    func testPointerChainsAreBounded() throws {
        /// A message whose record k is owned by a pointer to record k − 1's owner (record 1: to the question).
        func chain(_ records: Int) -> [UInt8] {
            var m: [UInt8] = [0, 1, 0x81, 0x80, 0, 1, UInt8(records >> 8), UInt8(records & 0xff), 0, 0, 0, 0,
                              1, 0x61, 0, 0, 1, 0, 1]
            var previous = 12
            for _ in 0..<records {
                let here = m.count
                m += [0xc0 | UInt8(previous >> 8), UInt8(previous & 0xff), 0, 1, 0, 1, 0, 0, 0, 1, 0, 0]
                previous = here
            }
            return m
        }
        let longest = try DNSMessage(parsing: chain(127))
        XCTAssertEqual(longest.answers.last?.name, DNSName("a"))
        XCTAssertThrowsError(try DNSMessage(parsing: chain(128))) {
            guard case .invalidPointer = $0 as? DNSMessageError else { return XCTFail("\($0)") }
        }
    }

    func testNamesLongerThan255BytesThroughPointersAreRefused() {
        // The question: 63 + 63 + 63 + 61 = 255 bytes in wire form; a record owned by "ab" and a pointer to it: 258.
        var m: [UInt8] = [0, 1, 0x81, 0x80, 0, 1, 0, 1, 0, 0, 0, 0]
        for _ in 0..<3 { m += [63] + [UInt8](repeating: 0x61, count: 63) }
        m += [61] + [UInt8](repeating: 0x62, count: 61) + [0, 0, 1, 0, 1]
        var alone = m
        alone[7] = 0
        XCTAssertEqual(try DNSMessage(parsing: alone).questions.first?.name.wireLength, 255)
        m += [2, 0x61, 0x62, 0xc0, 0x0c, 0, 1, 0, 1, 0, 0, 0, 1, 0, 0]
        XCTAssertThrowsError(try DNSMessage(parsing: m)) {
            // Where the name crossed 255 bytes: the question's last label, reached through the pointer.
            XCTAssertEqual($0 as? DNSMessageError, .nameTooLong(offset: 12 + 3 * 64))
        }
    }

    func testReservedLabelTypesAndRecordsRunningPastTheEndAreRefused() {
        var m = compressed
        m[50] = 0x43 // label type 01
        XCTAssertThrowsError(try DNSMessage(parsing: m)) { XCTAssertEqual($0 as? DNSMessageError, .reservedLabelType(offset: 50)) }
        m = compressed
        m[compressed.count - 5] = 5 // RDLENGTH 5, 4 bytes left
        XCTAssertThrowsError(try DNSMessage(parsing: m)) {
            XCTAssertEqual($0 as? DNSMessageError, .truncatedRecord(offset: compressed.count - 6))
        }
    }

    // MARK: EDNS

    func testUDPPayloadLimitComesFromTheOneOPTRecord() throws {
        XCTAssertEqual(try DNSMessage(parsing: query("a.example")).udpPayloadLimit, 512)
        XCTAssertEqual(try DNSMessage(parsing: ednsQuery("a.example", payload: 4096)).udpPayloadLimit, 4096)
        XCTAssertEqual(try DNSMessage(parsing: ednsQuery("a.example", payload: 1232)).udpPayloadLimit, 1232)
        // Below 512 counts as 512 (RFC 6891 §6.2.5); more than a datagram holds, as much as it holds.
        XCTAssertEqual(try DNSMessage(parsing: ednsQuery("a.example", payload: 100)).udpPayloadLimit, 512)
        XCTAssertEqual(try DNSMessage(parsing: ednsQuery("a.example", payload: 65535)).udpPayloadLimit, 65507)
        // Two OPT records, or one with an owner other than the root: malformed, 512.
        var two = ednsQuery("a.example", payload: 4096)
        two[11] = 2
        two += [0, 0, 41, 0x10, 0, 0, 0, 0, 0, 0, 0]
        XCTAssertEqual(try DNSMessage(parsing: two).udpPayloadLimit, 512)
        var owned = query("a.example")
        owned[11] = 1
        owned += [1, 0x61, 0, 0, 41, 0x10, 0, 0, 0, 0, 0, 0, 0]
        XCTAssertEqual(try DNSMessage(parsing: owned).udpPayloadLimit, 512)
    }

    // MARK: Truncation

    func testTruncationKeepsHeaderQuestionAndOPTOnly() throws {
        var big = answer(to: query("big.corp.example", id: 0x5151), address: [10, 2, 2, 1], records: 60)!
        XCTAssertGreaterThan(big.count, 512)
        let plain = try DNSMessage(parsing: big).truncated(toFit: 512)
        let cut = try DNSMessage(parsing: plain)
        XCTAssertEqual(cut.id, 0x5151)
        XCTAssertTrue(cut.isTruncated)
        XCTAssertTrue(cut.isResponse)
        XCTAssertEqual(cut.flags & ~DNSMessage.truncatedFlag, 0x8180, "the other flags and RCODE stay")
        XCTAssertEqual(cut.questions, [DNSQuestion(name: DNSName("big.corp.example")!, type: 1)])
        XCTAssertEqual(cut.answers + cut.authorities + cut.additionals, [])
        XCTAssertEqual(plain.count, 12 + 18 + 4)

        // With an OPT record in the answer, it stays (RFC 6891 §7), with its options.
        let opt: [UInt8] = [0, 0, 41, 0x04, 0xd0, 0, 0, 0x80, 0, 0, 6, 0, 10, 0, 2, 0xab, 0xcd]
        big[11] = 1
        big += opt
        let withOPT = try DNSMessage(parsing: big).truncated(toFit: 1232)
        XCTAssertEqual(withOPT.count, 12 + 18 + 4 + opt.count)
        XCTAssertEqual(Array(withOPT.suffix(opt.count)), opt)
        let parsed = try DNSMessage(parsing: withOPT)
        XCTAssertEqual(parsed.additionals.map(\.type), [41])
        XCTAssertEqual(parsed.answers, [])
        // A limit below 512 counts as 512.
        XCTAssertEqual(try DNSMessage(parsing: big).truncated(toFit: 20).count, withOPT.count)
    }
}
