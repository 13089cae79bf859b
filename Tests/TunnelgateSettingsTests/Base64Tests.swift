import Foundation
import TunnelgateSettings
import XCTest

/// Base64 (what the control socket's messages travel as) and the sorted, pretty JSON `status --json`
/// prints, both checked against Foundation as the oracle they replace.
final class Base64Tests: XCTestCase {
    func testEncodingIsFoundationsForEveryLengthAndByte() {
        var generator = SystemRandomNumberGenerator()
        for length in 0..<200 {
            let bytes = (0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) }
            let text = Base64.encode(bytes)
            XCTAssertEqual(text, Data(bytes).base64EncodedString(), "length \(length)")
            XCTAssertEqual(Base64.decode(text), bytes, "length \(length)")
        }
        let all = Array(0...255).map(UInt8.init)
        XCTAssertEqual(Base64.encode(all), Data(all).base64EncodedString())
        XCTAssertEqual(Base64.decode(Data(all).base64EncodedString()), all)
    }

    func testDecodingRefusesWhatIsNotOneBase64Text() {
        for bad in ["A", "AB", "ABC", "AB=C", "A===", "====", "AA==AA==", "AA=A", "AB==", "AAB=", "AA== ", " AA==",
                    "AA\nA", "QUJD\n", "QU*D", "QUJD=", "QUJDRA"] {
            XCTAssertNil(Base64.decode(bad), bad)
        }
        XCTAssertEqual(Base64.decode(""), [])
        XCTAssertEqual(Base64.decode("AA=="), [0])
        XCTAssertEqual(Base64.decode("AAA="), [0, 0])
        XCTAssertEqual(Base64.decode("QUJD"), Array("ABC".utf8))
    }

    struct Report: Encodable {
        var name: String
        var status: String
        var pid: Int32?
        var residue: Bool
        var counters: [String: UInt64]
        var addresses: [String]
        var nested: [Inner]
        struct Inner: Encodable { var zeta: Int; var alpha: String; var middle: Bool? }
    }

    func testPrettyPrintedSortedIsWhatFoundationsSortedPrettyEncoderWrote() throws {
        let report = Report(name: "tg0", status: "connected", pid: 4242, residue: false,
                            counters: ["txPackets": 17, "rxBytes": UInt64.max, "dropped": 0],
                            addresses: ["10.0.0.2", "fd00::2"],
                            nested: [.init(zeta: -3, alpha: "quote \" and \\ and tab\t", middle: nil),
                                     .init(zeta: 9, alpha: "é ☃", middle: true)])
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        let foundation = String(decoding: try encoder.encode(report), as: UTF8.self)
        XCTAssertEqual(try JSONCoding.encodeValue(report).prettyPrintedSorted(), foundation)
    }

    func testSortingKeysSortsEveryObjectAndKeepsArrayOrder() throws {
        let value = try JSONParser.parse(Array(#"{"b":[{"z":1,"a":2}],"a":{"y":true,"x":null}}"#.utf8))
        XCTAssertEqual(value.sortingKeys().serialized(), #"{"a":{"x":null,"y":true},"b":[{"a":2,"z":1}]}"#)
        XCTAssertEqual(JSONValue.array([]).prettyPrintedSorted(), "[]")
        XCTAssertEqual(JSONValue.string("/run/tunnelgate").prettyPrintedSorted(), #""/run/tunnelgate""#)
    }
}
