import XCTest
@testable import TunnelgateSettings

/// The callback runtime's `symbols` and `resultCodes`: how a runtime built with its own names and its own
/// code values is described, and what is refused, each problem named by its key path.
final class CallbackRuntimeSettingsTests: XCTestCase {
    /// A callback runtime section with `extra` (JSON members, each starting with a comma) appended.
    func json(_ extra: String) -> String {
        """
        {"tunnelRemoteAddress": "198.18.0.10",
         "runtime": {"kind": "callback", "library": "/opt/rt.so"\(extra)}}
        """
    }

    func callback(_ extra: String, file: StaticString = #filePath, line: UInt = #line) throws -> CallbackRuntimeSettings {
        let s = try TunnelSettings.parse(json: Array(json(extra).utf8))
        guard case .callback(let c) = s.runtime else {
            XCTFail("not a callback runtime: \(s.runtime)", file: file, line: line)
            throw CancellationError()
        }
        return c
    }

    /// The problems of a refused configuration, as printed.
    func problems(_ extra: String, file: StaticString = #filePath, line: UInt = #line) -> [String] {
        do {
            _ = try TunnelSettings.parse(json: Array(json(extra).utf8))
            XCTFail("expected the configuration to be refused", file: file, line: line)
            return []
        } catch {
            return error.problems.map(\.description)
        }
    }

    // MARK: resultCodes

    func testResultCodesDefaultToTheHeadersValues() throws {
        let codes = try callback("").resultCodes
        XCTAssertEqual([codes.ok, codes.queueFull, codes.invalidState, codes.invalidArgument, codes.bufferTooSmall, codes.failed],
                       [0, 1, 2, 3, 4, 5])
        XCTAssertEqual(try callback(#", "resultCodes": {}"#).resultCodes, CallbackRuntimeSettings.ResultCodes())
    }

    /// The example's MEHS-named variant (docs/runtime-abi.md, netns/tests/runtime-binding.sh).
    func testAFullMappingIsTaken() throws {
        let codes = try callback(#"""
        , "resultCodes": {"ok": 0, "queueFull": 11, "invalidState": 12, "invalidArgument": 13,
                          "bufferTooSmall": 14, "failed": 15}
        """#).resultCodes
        XCTAssertEqual([codes.ok, codes.queueFull, codes.invalidState, codes.invalidArgument, codes.bufferTooSmall, codes.failed],
                       [0, 11, 12, 13, 14, 15])
    }

    func testAPartialMappingKeepsTheOtherDefaultsAndTakesNegativeValues() throws {
        let codes = try callback(#", "resultCodes": {"ok": 1, "queueFull": -11, "failed": -1}"#).resultCodes
        XCTAssertEqual([codes.ok, codes.queueFull, codes.invalidState, codes.invalidArgument, codes.bufferTooSmall, codes.failed],
                       [1, -11, 2, 3, 4, -1])
    }

    func testTheInt32EdgesAreValues() throws {
        let codes = try callback(#", "resultCodes": {"queueFull": 2147483647, "failed": -2147483648}"#).resultCodes
        XCTAssertEqual(codes.queueFull, Int32.max)
        XCTAssertEqual(codes.failed, Int32.min)
    }

    func testAnUnknownKeyIsNamedWithTheNearestKnownOne() {
        XCTAssertEqual(problems(#", "resultCodes": {"queue_full": 11}"#),
                       ["runtime.resultCodes.queue_full: unknown key (did you mean 'queueFull'?)"])
        XCTAssertEqual(problems(#", "resultCodes": {"retry": 11}"#),
                       ["runtime.resultCodes.retry: unknown key (known here: ok, queueFull, invalidState, invalidArgument, bufferTooSmall, failed)"])
    }

    func testAValueThatIsNotAWholeNumberIsNamed() {
        XCTAssertEqual(problems(#", "resultCodes": {"queueFull": "11"}"#),
                       ["runtime.resultCodes.queueFull: expected a whole number, found a string"])
        XCTAssertEqual(problems(#", "resultCodes": {"invalidState": 1.5}"#),
                       ["runtime.resultCodes.invalidState: expected a whole number, found 1.5"])
        XCTAssertEqual(problems(#", "resultCodes": {"ok": null}"#),
                       ["runtime.resultCodes.ok: expected a whole number, found null"])
        XCTAssertEqual(problems(#", "resultCodes": {"failed": 1e3}"#),
                       ["runtime.resultCodes.failed: expected a whole number, found 1e3"])
        XCTAssertEqual(problems(#", "resultCodes": [0, 11]"#),
                       ["runtime.resultCodes: expected an object, found an array"])
    }

    func testAValueOutsideInt32IsNamed() {
        XCTAssertEqual(problems(#", "resultCodes": {"queueFull": 2147483648}"#),
                       ["runtime.resultCodes.queueFull: 2147483648 is outside int32_t, the type the runtime returns (-2147483648…2147483647)"])
        XCTAssertEqual(problems(#", "resultCodes": {"failed": -2147483649}"#),
                       ["runtime.resultCodes.failed: -2147483649 is outside int32_t, the type the runtime returns (-2147483648…2147483647)"])
    }

    func testTwoCodesWithOneValueAreNamed() {
        XCTAssertEqual(problems(#"""
        , "resultCodes": {"ok": 0, "queueFull": 11, "invalidState": 12, "invalidArgument": 13,
                          "bufferTooSmall": 14, "failed": 11}
        """#), ["runtime.resultCodes.failed: 11 is also queueFull's value; every code needs a value of its own"])
    }

    /// A value given for one code can collide with a default the configuration left in place: the
    /// problem is reported at the key the configuration gave, naming the default.
    func testACodeThatCollidesWithADefaultIsNamed() {
        XCTAssertEqual(problems(#", "resultCodes": {"queueFull": 2}"#),
                       ["runtime.resultCodes.queueFull: 2 is also invalidState's value (its default); every code needs a value of its own"])
        XCTAssertEqual(problems(#", "resultCodes": {"failed": 0}"#),
                       ["runtime.resultCodes.failed: 0 is also ok's value (its default); every code needs a value of its own"])
    }

    func testEveryBadCodeIsReportedAtOnce() {
        XCTAssertEqual(problems(#", "resultCodes": {"ok": "0", "queueFull": 4294967296, "oops": 1}"#), [
            "runtime.resultCodes.oops: unknown key (known here: ok, queueFull, invalidState, invalidArgument, bufferTooSmall, failed)",
            "runtime.resultCodes.ok: expected a whole number, found a string",
            "runtime.resultCodes.queueFull: 4294967296 is outside int32_t, the type the runtime returns (-2147483648…2147483647)",
        ])
    }

    // MARK: symbols

    /// MEHS's names for the four it has; its missing app_message and batch call said with null.
    func testMEHSNamesWithNullForTheOptionalOnes() throws {
        let symbols = try callback(#"""
        , "symbols": {"start": "mehs_ios_runtime_start", "packetIn": "mehs_ios_runtime_packet_in",
                      "packetInBatch": null, "status": "mehs_runtime_status", "stop": "mehs_runtime_stop",
                      "appMessage": null}
        """#).symbols
        XCTAssertEqual(symbols.start, "mehs_ios_runtime_start")
        XCTAssertEqual(symbols.packetIn, "mehs_ios_runtime_packet_in")
        XCTAssertEqual(symbols.status, "mehs_runtime_status")
        XCTAssertEqual(symbols.stop, "mehs_runtime_stop")
        XCTAssertNil(symbols.packetInBatch)
        XCTAssertNil(symbols.appMessage)
    }

    func testMissingSymbolKeysKeepTheDefaultNames() throws {
        let symbols = try callback(#", "symbols": {"appMessage": "mehs_example_app_message"}"#).symbols
        XCTAssertEqual(symbols.appMessage, "mehs_example_app_message")
        XCTAssertEqual(symbols.start, "tunnelgate_runtime_start")
        XCTAssertEqual(symbols.packetIn, "tunnelgate_runtime_packet_in")
        XCTAssertEqual(symbols.packetInBatch, "tunnelgate_runtime_packet_in_batch")
        XCTAssertEqual(symbols.status, "tunnelgate_runtime_status")
        XCTAssertEqual(symbols.stop, "tunnelgate_runtime_stop")
    }

    func testNullForARequiredSymbolIsNamed() {
        for key in ["start", "packetIn", "status", "stop"] {
            XCTAssertEqual(problems(#", "symbols": {"\#(key)": null}"#),
                           ["runtime.symbols.\(key): null, but \(key) is required; only the optional appMessage and packetInBatch may be null (none)"])
        }
    }

    func testASymbolThatIsNotACNameIsNamed() {
        XCTAssertEqual(problems(#", "symbols": {"start": "mehs-ios-runtime-start"}"#),
                       ["runtime.symbols.start: 'mehs-ios-runtime-start' is not a C symbol name"])
        XCTAssertEqual(problems(#", "symbols": {"stop": ""}"#),
                       ["runtime.symbols.stop: '' is not a C symbol name"])
        XCTAssertEqual(problems(#", "symbols": {"appMessage": 7}"#),
                       ["runtime.symbols.appMessage: expected a string, found a number"])
        XCTAssertEqual(problems(#", "symbols": {"packet_in": "mehs_ios_runtime_packet_in"}"#),
                       ["runtime.symbols.packet_in: unknown key (did you mean 'packetIn'?)"])
    }
}
