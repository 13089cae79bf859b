import Foundation
import TunnelgateSettings
import XCTest

/// JSONCoding: Codable over JSONValue, without Foundation (what the engine–plane channel speaks). Checked
/// against Foundation's own JSONEncoder and JSONDecoder as the oracle: each reads what the other wrote
/// into an equal value, and the errors name what is wrong and where.
final class JSONCodingTests: XCTestCase {
    enum Shape: Codable, Equatable {
        case none
        case circle(radius: Double)
        case labelled(String, tags: [String]?)
        case nested(Inner)
    }

    struct Inner: Codable, Equatable {
        var big: UInt64
        var small: Int64
        var byte: UInt8
        var flag: Bool
        var optional: Int?
        var bytes: [UInt8]
        var float: Float
        var text: String
        /// (One member per object: Foundation keeps no key order, and JSONValue's == compares it.)
        var raw: JSONValue
    }

    struct Everything: Codable, Equatable {
        var shapes: [Shape]
        var table: [String: Int]
        var nothing: String?
        var nullable: Int?
    }

    let sample = Everything(
        shapes: [.none, .circle(radius: 0.1), .circle(radius: -1e300), .labelled("a\"b\\c\n\u{1}é😀", tags: nil),
                 .labelled("", tags: ["x", "y"]),
                 .nested(Inner(big: .max, small: .min, byte: 255, flag: true, optional: nil, bytes: Array(0...255),
                               float: 1.5, text: "tunnel", raw: .array([.null, .object([("z", .number(1, literal: "1"))])])))],
        table: ["one": 1, "minus": -1], nothing: nil, nullable: 0)

    func testRoundTripKeepsEveryValue() throws {
        let bytes = try JSONCoding.encode(sample)
        XCTAssertEqual(try JSONCoding.decode(Everything.self, from: bytes), sample)
    }

    func testFoundationReadsWhatItWrites() throws {
        let ours = try JSONCoding.encode(sample)
        XCTAssertEqual(try JSONDecoder().decode(Everything.self, from: Data(ours)), sample)
        let theirs = try JSONEncoder().encode(sample)
        XCTAssertEqual(try JSONCoding.decode(Everything.self, from: [UInt8](theirs)), sample)
    }

    func testIntegersKeepEveryDigit() throws {
        let text = String(decoding: try JSONCoding.encode([UInt64.max, 9_007_199_254_740_993]), as: UTF8.self)
        XCTAssertEqual(text, "[18446744073709551615,9007199254740993]")
        XCTAssertEqual(try JSONCoding.decode([UInt64].self, from: Array(text.utf8)), [.max, 9_007_199_254_740_993])
    }

    func testNilIsLeftOutAndCompact() throws {
        struct Two: Codable { var a: Int?; var b: String }
        XCTAssertEqual(String(decoding: try JSONCoding.encode(Two(a: nil, b: "x")), as: UTF8.self), #"{"b":"x"}"#)
    }

    func testNonFiniteDoubleIsRefused() {
        XCTAssertThrowsError(try JSONCoding.encode([Double.nan])) { error in
            XCTAssertTrue("\(error)".contains("not a JSON number"), "\(error)")
        }
    }

    func testErrorsNameWhatAndWhere() {
        struct Holder: Codable { var inner: Inner }
        let cases: [(String, String)] = [
            (#"{"inner": {"big": -1}}"#, "-1 is not a UInt64"),
            (#"{"inner": {"big": 1, "small": 1.5}}"#, "1.5 is not a Int64"),
            (#"{"inner": {"big": 1, "small": 1, "byte": 256}}"#, "256 is not a UInt8"),
            (#"{"inner": {"big": "1"}}"#, "expected a number, found a string"),
            (#"{"inner": {"big": 1, "small": 1, "byte": 1}}"#, #"no member "flag""#),
            (#"{"inner": [1]}"#, "expected an object, found an array"),
            (#"{"inner": "#, "not JSON"),
        ]
        for (text, expected) in cases {
            XCTAssertThrowsError(try JSONCoding.decode(Holder.self, from: Array(text.utf8)), text) { error in
                XCTAssertTrue("\(error)".contains(expected), "\(text): \(error)")
                if !expected.contains("not JSON") {
                    XCTAssertTrue("\(error)".contains("inner"), "\(text): the path is named: \(error)")
                }
            }
        }
    }

    func testIntegralDoublesAndIntegersWrittenOtherwise() throws {
        XCTAssertEqual(try JSONCoding.decode([Int].self, from: Array("[1.0, 1e3, -0]".utf8)), [1, 1000, 0])
        XCTAssertEqual(try JSONCoding.decode([Double].self, from: Array("[1, 2.5e-3]".utf8)), [1, 0.0025])
        XCTAssertEqual(String(decoding: try JSONCoding.encode([2.0, 0.5, 1e20]), as: UTF8.self), "[2,0.5,1e+20]")
    }
}
