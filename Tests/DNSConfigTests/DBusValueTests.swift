import XCTest
@testable import DNSConfig

final class DBusValueTests: XCTestCase {
    func testSignatures() {
        XCTAssertEqual(DBusValue.signature(of: [.int32(1), .array(element: "(iay)", [])]), "ia(iay)")
        XCTAssertEqual(DBusValue.structure([.string("corp.example"), .boolean(true)]).signature, "(sb)")
        XCTAssertEqual(DBusValue.bytes([1, 2]).signature, "ay")
        XCTAssertEqual(DBusValue.array(element: "{sv}", []).signature, "a{sv}")
        XCTAssertEqual(DBusValue.dictionaryEntry(.string("k"), .variant(.uint64(1))).signature, "{sv}")
        let all: [DBusValue] = [.byte(0), .boolean(true), .int16(0), .uint16(0), .int32(0), .uint32(0), .int64(0),
                                .uint64(0), .double(0), .string(""), .objectPath("/"), .signature(""), .variant(.byte(0))]
        XCTAssertEqual(DBusValue.signature(of: all), "ybnqiuxtdsogv")
    }

    func testValuesAMessageCannotCarryAreNamed() {
        XCTAssertNil(DBusValue.array(element: "(sb)", [.structure([.string("a"), .boolean(false)])]).problem)
        XCTAssertEqual(DBusValue.array(element: "(sb)", [.structure([.string("a")])]).problem,
                       "array element (s) in an array of (sb)")
        XCTAssertEqual(DBusValue.array(element: "y", [.byte(1)]).problem, "an array of bytes is .bytes")
        XCTAssertEqual(DBusValue.array(element: "", []).problem, "array without an element signature")
        XCTAssertEqual(DBusValue.structure([]).problem, "empty structure")
        XCTAssertEqual(DBusValue.dictionaryEntry(.string("k"), .int32(1)).problem, "dictionary entry outside an array")
        XCTAssertEqual(DBusValue.array(element: "{(s)i}", [.dictionaryEntry(.structure([.string("k")]), .int32(1))]).problem,
                       "dictionary key (s) is not a basic type")
        XCTAssertEqual(DBusValue.variant(.string("a\u{0}b")).problem, "s value contains a NUL byte")
        XCTAssertEqual(DBusValue.structure([.int32(1), .array(element: "s", [.int32(2)])]).problem,
                       "array element i in an array of s")
    }

    func testDescriptionReadsLikeBusctl() {
        let servers = DBusValue.array(element: "(iay)", [.structure([.int32(2), .bytes([10, 8, 0, 1])])])
        XCTAssertEqual(servers.description, "[(2, [10, 8, 0, 1])]")
        XCTAssertEqual(DBusValue.variant(.string("no")).description, "<s \"no\">")
    }
}
