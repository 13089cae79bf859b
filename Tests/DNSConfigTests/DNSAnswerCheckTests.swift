import LinuxSystem
import XCTest
@testable import DNSConfig

/// An upstream answer against the query the forwarder sent (RFC 5452 §9.1):
/// what is accepted, and why anything else is not.
final class DNSAnswerCheckTests: XCTestCase {
    let sent = DNSQuery(id: 0x4a4a, name: DNSName("Host.Corp.example")!, type: 1)
    let server = SocketAddress.ipv4([10, 8, 0, 1], port: 53)

    /// The answer the server would send, with one A record.
    var reply: [UInt8] { answer(to: sent.encoded, address: [10, 2, 2, 2])! }

    func verdict(_ bytes: [UInt8], from source: SocketAddress? = nil) -> DNSAnswerVerdict {
        UpstreamAnswer.check(bytes, from: source ?? server, server: server, query: sent)
    }

    /// An answer to a query like `sent` with some of its question changed.
    func reply(name: String? = nil, type: UInt16? = nil, questionClass: UInt16? = nil, id: UInt16? = nil) -> [UInt8] {
        let other = DNSQuery(id: id ?? sent.id, name: name.map { DNSName($0)! } ?? sent.name, type: type ?? sent.type,
                             questionClass: questionClass ?? sent.questionClass)
        return answer(to: other.encoded, address: [10, 6, 6, 6])!
    }

    func testTheAnswerIsAccepted() {
        guard case .answer(let message) = verdict(reply) else { return XCTFail("\(verdict(reply))") }
        XCTAssertEqual(message.answers.map(\.data), [[10, 2, 2, 2]])
        XCTAssertEqual(message.questions, [sent.question])
    }

    func testANameThatDiffersInASCIICaseOnlyIsAccepted() {
        for name in ["host.corp.example", "HOST.CORP.EXAMPLE", "hOsT.cOrP.ExAmPlE", "Host.Corp.example"] {
            guard case .answer = verdict(reply(name: name)) else { return XCTFail("\(name): \(verdict(reply(name: name)))") }
        }
    }

    func testAWrongIDIsRejected() {
        for bit in 0..<16 {
            XCTAssertEqual(verdict(reply(id: sent.id ^ UInt16(1) << UInt16(bit))), .rejected(.wrongID), "bit \(bit)")
        }
    }

    func testAWrongNameIsRejected() {
        for name in ["host.corp.example.org", "host.corp.exampl", "ost.corp.example", "corp.example", "host-corp.example",
                     "host.corp.exbmple", ".", "forged.example"] {
            XCTAssertEqual(verdict(reply(name: name)), .rejected(.wrongQuestion), name)
        }
        // The same bytes cut into other labels: "host.corp" as one label.
        var split = DNSQuery(id: sent.id, name: DNSName(validatedLabels: [Array("Host.Corp".utf8), Array("example".utf8)]), type: 1)
        XCTAssertEqual(verdict(answer(to: split.encoded, address: [10, 6, 6, 6])!), .rejected(.wrongQuestion))
        // Case is folded for ASCII only: Latin-1 "È" (0xc8) is not "è" (0xe8).
        let query8 = DNSQuery(id: 1, name: DNSName(validatedLabels: [[0xe8]]), type: 1)
        split = DNSQuery(id: 1, name: DNSName(validatedLabels: [[0xc8]]), type: 1)
        XCTAssertEqual(query8.check(answer: answer(to: split.encoded, address: [10, 6, 6, 6])!), .rejected(.wrongQuestion))
    }

    func testAWrongTypeOrClassIsRejected() {
        for type: UInt16 in [28, 5, 255, 0, 257] {
            XCTAssertEqual(verdict(reply(type: type)), .rejected(.wrongQuestion), "type \(type)")
        }
        for questionClass: UInt16 in [3, 4, 255, 0, 257] {
            XCTAssertEqual(verdict(reply(questionClass: questionClass)), .rejected(.wrongQuestion), "class \(questionClass)")
        }
    }

    func testAnAnswerFromAnotherAddressOrPortIsRejected() {
        let others: [SocketAddress] = [
            .ipv4([10, 8, 0, 1], port: 5353), .ipv4([10, 8, 0, 2], port: 53), .ipv4([10, 8, 0, 1], port: 0),
            .ipv6([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 8, 0, 1], port: 53), .unix("/run/x"),
        ]
        for source in others {
            XCTAssertEqual(verdict(reply, from: source), .rejected(.wrongSource), "\(source)")
        }
        XCTAssertEqual(UpstreamAnswer.check(reply, from: nil, server: server, query: sent), .rejected(.wrongSource))
    }

    func testIPv6SourcesAndLinkLocalScopes() {
        let global = SocketAddress.ipv6([0xfd, 0, 0, 8] + [UInt8](repeating: 0, count: 11) + [1], port: 53)
        let linkLocal = SocketAddress.ipv6([0xfe, 0x80] + [UInt8](repeating: 0, count: 13) + [1], port: 53, scope: 7)
        func check(_ source: SocketAddress, _ server: SocketAddress) -> DNSAnswerVerdict {
            UpstreamAnswer.check(reply, from: source, server: server, query: sent)
        }
        guard case .answer = check(global, global) else { return XCTFail() }
        guard case .answer = check(linkLocal, linkLocal) else { return XCTFail() }
        // The same link-local address on another link is another host.
        XCTAssertEqual(check(.ipv6([0xfe, 0x80] + [UInt8](repeating: 0, count: 13) + [1], port: 53, scope: 8), linkLocal),
                       .rejected(.wrongSource))
        XCTAssertEqual(check(.ipv6([0xfd, 0, 0, 8] + [UInt8](repeating: 0, count: 11) + [2], port: 53), global),
                       .rejected(.wrongSource))
    }

    func testQuestionCountsOtherThanOneAreRejected() {
        var none = reply
        none[5] = 0
        XCTAssertEqual(verdict(none), .rejected(.wrongQuestion))
        var two = reply
        two[5] = 2
        XCTAssertEqual(verdict(two), .rejected(.wrongQuestion))
        // The bare header a server sends for FORMERR, with the right id: still not this query's answer.
        XCTAssertEqual(verdict([0x4a, 0x4a, 0x81, 0x81, 0, 0, 0, 0, 0, 0, 0, 0]), .rejected(.wrongQuestion))
    }

    func testQueriesOtherOpcodesAndBrokenMessagesAreMalformed() {
        var query = reply
        query[2] &= 0x7f
        XCTAssertEqual(verdict(query), .rejected(.malformed(.notAResponse)))
        var notify = reply
        notify[2] = 0x80 | 4 << 3
        XCTAssertEqual(verdict(notify), .rejected(.malformed(.unsupportedOpcode(4))))
        XCTAssertEqual(verdict(Array(reply.prefix(11))), .rejected(.malformed(.truncatedHeader(length: 11))))
        // The question cut short, and a pointer in the question.
        XCTAssertEqual(verdict(Array(reply.prefix(20))), .rejected(.malformed(.truncatedQuestion(offset: 17))))
        XCTAssertEqual(verdict([0x4a, 0x4a, 0x81, 0x80, 0, 1, 0, 0, 0, 0, 0, 0, 0xc0, 0x0c, 0, 1, 0, 1]),
                       .rejected(.malformed(.invalidPointer(offset: 12))))
        // A record that runs past the end, without TC.
        XCTAssertEqual(verdict(Array(reply.dropLast())), .rejected(.malformed(.truncatedRecord(offset: reply.count - 6))))
    }

    func testTruncatedAnswers() {
        // TC with the record cut: the answer, truncated, to be asked again over TCP.
        var cut = Array(reply.dropLast(3))
        cut[2] |= 0x02
        XCTAssertEqual(verdict(cut), .truncated)
        // TC with no records, as dnsmasq sends it: parses, and says it is truncated.
        var empty = answer(to: sent.encoded, address: [10, 2, 2, 2], records: 0)!
        empty[2] |= 0x02
        guard case .answer(let message) = verdict(empty), message.isTruncated else { return XCTFail("\(verdict(empty))") }
        // TC does not excuse a wrong id, name or source.
        var forged = reply(name: "forged.example")
        forged[2] |= 0x02
        XCTAssertEqual(verdict(forged), .rejected(.wrongQuestion))
        XCTAssertEqual(verdict(cut, from: .ipv4([10, 8, 0, 1], port: 54)), .rejected(.wrongSource))
    }

    func testTheFirstFailingCheckNamesTheReason() {
        // Wrong source beats everything; a wrong id beats a wrong question and QR = 0.
        XCTAssertEqual(verdict(reply(name: "forged.example", id: 1), from: .ipv4([10, 8, 0, 9], port: 53)), .rejected(.wrongSource))
        XCTAssertEqual(verdict(reply(name: "forged.example", id: 1)), .rejected(.wrongID))
        var query = reply(name: "forged.example")
        query[2] &= 0x7f
        XCTAssertEqual(verdict(query), .rejected(.malformed(.notAResponse)))
    }
}
