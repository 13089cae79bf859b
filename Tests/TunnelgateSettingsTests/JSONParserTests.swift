import XCTest
@testable import TunnelgateSettings

final class JSONParserTests: XCTestCase {
    func parse(_ s: String) throws -> JSONValue { try JSONParser.parse(Array(s.utf8)) }

    func testValuesAndOrder() throws {
        let v = try parse(#"{"b": [1, -2.5e3, true, null, "x\u00e9\n"], "a": {}}"#)
        guard case .object(let members) = v else { return XCTFail("not an object") }
        XCTAssertEqual(members.map(\.key), ["b", "a"])
        XCTAssertEqual(members[0].value, .array([.number(1, literal: "1"), .number(-2500, literal: "-2.5e3"),
                                                 .bool(true), .null, .string("xé\n")]))
    }

    func testSurrogatePairs() throws {
        XCTAssertEqual(try parse(#""\ud83d\ude00""#), .string("😀"))
        XCTAssertThrowsError(try parse(#""\ud83d""#))
    }

    func testSyntaxErrorsCarryLineAndColumn() {
        XCTAssertThrowsError(try parse("{\n  \"a\": 1,\n}")) { error in
            let e = error as! JSONSyntaxError
            XCTAssertEqual(e.line, 3)
            XCTAssertEqual(e.reason, "expected a key in quotes")
        }
        XCTAssertThrowsError(try parse(#"{"a": 1, "a": 2}"#)) { error in
            XCTAssertEqual((error as! JSONSyntaxError).reason, "duplicate key \"a\"")
        }
        for bad in ["", "{", "[1,]", "01", "1.", "\"\t\"", "tru", "{} x", "[" + String(repeating: "[", count: 70) + "]"] {
            XCTAssertThrowsError(try parse(bad), bad)
        }
    }

    func testQuotedRoundTrips() throws {
        for text in ["plain", "quote \" and \\ backslash", "line\nbreak\ttab", "\u{01}control", "é 😀"] {
            XCTAssertEqual(try parse(JSONValue.quoted(text)), .string(text), text)
        }
        XCTAssertEqual(JSONValue.quoted("\u{01}"), "\"\\u0001\"")
    }

    /// A parsed document embedded in a Codable report comes out as the same JSON: integers stay integers
    /// (a 64-bit counter keeps its digits). JSONEncoder does not keep key order; with .sortedKeys, as the
    /// status report is encoded, the keys come out sorted.
    func testEncodesAsTheJSONItIs() throws {
        let text = #"{"state":"ready","interface":null,"bytes":18446744073709551615,"ratio":0.5,"peers":[{"up":true}]}"#
        let sorted = #"{"bytes":18446744073709551615,"interface":null,"peers":[{"up":true}],"ratio":0.5,"state":"ready"}"#
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        let encoded = String(decoding: try encoder.encode(try parse(text)), as: UTF8.self)
        XCTAssertEqual(encoded, sorted)
        XCTAssertTrue(encoded.contains("18446744073709551615"), encoded)
        let decoded = try JSONDecoder().decode(JSONValue.self, from: Data(text.utf8))
        guard case .object(let members) = decoded else { return XCTFail("not an object: \(decoded)") }
        XCTAssertEqual(Set(members.map(\.key)), ["state", "interface", "bytes", "ratio", "peers"])
        XCTAssertEqual(members.first { $0.key == "interface" }?.value, .null)
        XCTAssertEqual(members.first { $0.key == "peers" }?.value, .array([.object([(key: "up", value: .bool(true))])]))
    }
}
