import XCTest
@testable import DNSConfig

/// QNAME parsing against query bytes written out by hand from RFC 1035 §4.1.
final class DNSQueryTests: XCTestCase {
    /// id 0xbeef, RD, QDCOUNT 1; "www.Corp.example" A IN.
    let wwwCorpExample: [UInt8] = [
        0xbe, 0xef, 0x01, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x03, 0x77, 0x77, 0x77,                          // 3 "www"
        0x04, 0x43, 0x6f, 0x72, 0x70,                    // 4 "Corp"
        0x07, 0x65, 0x78, 0x61, 0x6d, 0x70, 0x6c, 0x65,  // 7 "example"
        0x00,                                            // root
        0x00, 0x01, 0x00, 0x01,                          // A, IN
    ]

    func testParsesIDNameTypeAndClass() throws {
        let q = try DNSQuery(parsing: wwwCorpExample)
        XCTAssertEqual(q.id, 0xbeef)
        XCTAssertEqual(q.name.labels, [Array("www".utf8), Array("Corp".utf8), Array("example".utf8)])
        XCTAssertEqual(q.name.description, "www.Corp.example")
        XCTAssertEqual(q.type, 1)
        XCTAssertEqual(q.questionClass, 1)
    }

    func testEncodingIsTheHandWrittenBytes() {
        let q = DNSQuery(id: 0xbeef, name: DNSName("www.Corp.example")!, type: 1)
        XCTAssertEqual(q.encoded, wwwCorpExample)
    }

    func testTrailingEDNSRecordIsAcceptedAndNotRead() throws {
        var message = wwwCorpExample
        message[11] = 1 // ARCOUNT 1
        message += [0x00, 0x00, 0x29, 0x04, 0xd0, 0, 0, 0, 0, 0, 0] // OPT, root owner, 1232-byte payload
        let q = try DNSQuery(parsing: message)
        XCTAssertEqual(q.name, DNSName("www.Corp.example"))
        XCTAssertEqual(q.type, 1)
    }

    func testRootQuery() throws {
        // ". NS IN"
        let message: [UInt8] = [0, 7, 0x01, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0x00, 0x00, 0x02, 0x00, 0x01]
        let q = try DNSQuery(parsing: message)
        XCTAssertEqual(q.name, .root)
        XCTAssertEqual(q.name.description, ".")
        XCTAssertEqual(q.type, 2)
    }

    func testRefusesShortHeader() {
        XCTAssertThrowsError(try DNSQuery(parsing: Array(wwwCorpExample.prefix(11)))) {
            XCTAssertEqual($0 as? DNSMessageError, .truncatedHeader(length: 11))
        }
        XCTAssertThrowsError(try DNSQuery(parsing: [])) {
            XCTAssertEqual($0 as? DNSMessageError, .truncatedHeader(length: 0))
        }
    }

    func testRefusesResponses() {
        var message = wwwCorpExample
        message[2] |= 0x80 // QR
        XCTAssertThrowsError(try DNSQuery(parsing: message)) { XCTAssertEqual($0 as? DNSMessageError, .notAQuery) }
    }

    func testRefusesOtherOpcodes() {
        var message = wwwCorpExample
        message[2] = 5 << 3 // UPDATE
        XCTAssertThrowsError(try DNSQuery(parsing: message)) {
            XCTAssertEqual($0 as? DNSMessageError, .unsupportedOpcode(5))
        }
    }

    func testRefusesQuestionCountsOtherThanOne() {
        for count: UInt8 in [0, 2] {
            var message = wwwCorpExample
            message[5] = count
            XCTAssertThrowsError(try DNSQuery(parsing: message)) {
                XCTAssertEqual($0 as? DNSMessageError, .questionCount(Int(count)))
            }
        }
    }

    func testRefusesCompressionPointerInQuestion() {
        // "www" then a pointer to offset 12 (itself a loop, were it followed).
        let message: [UInt8] = [0, 1, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0,
                                0x03, 0x77, 0x77, 0x77, 0xc0, 0x0c, 0, 1, 0, 1]
        XCTAssertThrowsError(try DNSQuery(parsing: message)) {
            XCTAssertEqual($0 as? DNSMessageError, .compressionPointer(offset: 16))
        }
    }

    func testRefusesReservedLabelTypes() {
        for type: UInt8 in [0x40, 0x80] {
            let message: [UInt8] = [0, 1, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, type | 1, 0x61, 0, 0, 1, 0, 1]
            XCTAssertThrowsError(try DNSQuery(parsing: message)) {
                XCTAssertEqual($0 as? DNSMessageError, .reservedLabelType(offset: 12))
            }
        }
    }

    func testRefusesLabelRunningPastTheEnd() {
        // Label length 10, only 3 bytes follow.
        let message: [UInt8] = [0, 1, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 10, 0x61, 0x62, 0x63]
        XCTAssertThrowsError(try DNSQuery(parsing: message)) {
            XCTAssertEqual($0 as? DNSMessageError, .truncatedQuestion(offset: 12))
        }
    }

    func testRefusesMissingTypeAndClass() {
        XCTAssertThrowsError(try DNSQuery(parsing: Array(wwwCorpExample.dropLast(2)))) {
            XCTAssertEqual($0 as? DNSMessageError, .truncatedQuestion(offset: 30))
        }
        // No terminating root label at all.
        XCTAssertThrowsError(try DNSQuery(parsing: Array(wwwCorpExample.prefix(29)))) {
            XCTAssertEqual($0 as? DNSMessageError, .truncatedQuestion(offset: 29))
        }
    }

    func testRefusesNamesLongerThan255Bytes() {
        // Four 63-byte labels: 4 × 64 + 1 = 257 bytes in wire form.
        var message: [UInt8] = [0, 1, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0]
        for _ in 0..<4 { message += [63] + [UInt8](repeating: 0x61, count: 63) }
        message += [0, 0, 1, 0, 1]
        XCTAssertThrowsError(try DNSQuery(parsing: message)) {
            XCTAssertEqual($0 as? DNSMessageError, .nameTooLong(offset: 12 + 3 * 64))
        }
        // Three 63-byte labels and one of 61: exactly 255, accepted.
        var longest: [UInt8] = [0, 1, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0]
        for _ in 0..<3 { longest += [63] + [UInt8](repeating: 0x61, count: 63) }
        longest += [61] + [UInt8](repeating: 0x62, count: 61) + [0, 0, 1, 0, 1]
        XCTAssertEqual(try DNSQuery(parsing: longest).name.wireLength, 255)
    }

    func testRefusesOversizedMessages() {
        let message = wwwCorpExample + [UInt8](repeating: 0, count: 65536)
        XCTAssertThrowsError(try DNSQuery(parsing: message)) {
            XCTAssertEqual($0 as? DNSMessageError, .tooLong(length: message.count))
        }
    }

    func testEveryPrefixOfAQueryIsRefusedWithoutCrashing() {
        for length in 0..<wwwCorpExample.count {
            XCTAssertThrowsError(try DNSQuery(parsing: Array(wwwCorpExample.prefix(length))), "prefix \(length)")
        }
    }

    func testEscapedDescription() {
        let name = DNSName(validatedLabels: [[0x61, 0x2e, 0x62], [0x00, 0x5c]])
        XCTAssertEqual(name.description, "a\\046b.\\000\\092")
    }
}
