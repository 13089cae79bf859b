import Foundation
@testable import NetworkExtension
import XCTest

/// NETunnelProviderProtocol's encoding (the preferences' `protocol` object, and what the host hands the
/// provider as protocolConfiguration): every property, and every property-list type of
/// providerConfiguration, read back as it was.
final class ProtocolConfigurationTests: XCTestCase {
    /// One of each property-list type, and the corners where a weaker encoding (plain JSON) loses the type.
    static var everyPlistType: [String: Any] {
        [
            "string": "tunnel", "empty": "", "unicode": "ü\u{1F600}\n\"quoted\"",
            "int": 1400, "negative": -7, "int64max": Int64.max, "int64min": Int64.min, "uint64max": UInt64.max,
            "real": 0.1, "whole real": 2.0, "negative zero": -0.0, "infinity": Double.infinity, "float": Float(1.5),
            "true": true, "false": false,
            "data": Data([0, 1, 2, 0xFF, 0x80]), "empty data": Data(),
            "date": Date(timeIntervalSinceReferenceDate: 123_456_789.123_456_7),
            "array": ["a", 1, true, Data([9]), [String: Any]()] as [Any],
            "dictionary": ["nested": ["deeper": [1, 2, 3]], "flag": false] as [String: Any],
            "ns": ["string": NSString(string: "ns"), "number": NSNumber(value: 42), "bool": NSNumber(value: true),
                   "double": NSNumber(value: 2.5), "data": NSData(data: Data([7])),
                   "date": NSDate(timeIntervalSinceReferenceDate: 5)] as [String: Any],
        ]
    }

    func plist(_ value: Any) throws -> PropertyListValue { try PropertyListValue(value, keyPath: "v") }

    func testEveryPlistTypeSurvivesTheTaggedEncoding() throws {
        let original = try plist(Self.everyPlistType)
        // Through bytes, as the preferences file and the handoff carry it.
        let bytes = try JSONSerialization.data(withJSONObject: original.tagged, options: [.sortedKeys])
        let back = try PropertyListValue(tagged: try JSONSerialization.jsonObject(with: bytes), keyPath: "v")
        XCTAssertEqual(back, original)
        // And to the Swift values a provider reads, then once more.
        XCTAssertEqual(try plist(back.any), original)

        guard case .dictionary(let d) = back else { return XCTFail("not a dictionary") }
        XCTAssertEqual(d["whole real"], .real(2.0), "a whole real stays a real")
        XCTAssertEqual(d["true"], .bool(true), "a boolean stays a boolean, not the number 1")
        XCTAssertEqual(d["int"], .integer(1400))
        XCTAssertEqual(d["uint64max"], .unsigned(UInt64.max))
        XCTAssertEqual(d["negative zero"], .real(-0.0))
        XCTAssertNotEqual(d["negative zero"], .real(0.0))
        XCTAssertEqual(d["date"], .date(Date(timeIntervalSinceReferenceDate: 123_456_789.123_456_7)))
        XCTAssertEqual(d["data"], .data(Data([0, 1, 2, 0xFF, 0x80])))
        XCTAssertEqual(try plist(Double.nan), try PropertyListValue(tagged: try plist(Double.nan).tagged, keyPath: "v"))
    }

    func testValuesReadAsOnIOS() throws {
        let any = try plist(Self.everyPlistType).any as! [String: Any]
        XCTAssertEqual(any["int"] as? Int, 1400)
        XCTAssertEqual(any["int"] as? Double, 1400, "an NSNumber, as iOS hands it: as? Double works")
        XCTAssertEqual(any["true"] as? Bool, true)
        XCTAssertEqual(any["real"] as? Double, 0.1)
        XCTAssertEqual(any["string"] as? String, "tunnel")
        XCTAssertEqual(any["data"] as? Data, Data([0, 1, 2, 0xFF, 0x80]))
        XCTAssertEqual((any["date"] as? Date)?.timeIntervalSinceReferenceDate, 123_456_789.123_456_7)
        XCTAssertEqual((any["dictionary"] as? [String: Any])?["flag"] as? Bool, false)
        XCTAssertEqual(((any["dictionary"] as? [String: Any])?["nested"] as? [String: Any])?["deeper"] as? [Int], [1, 2, 3])
        XCTAssertEqual((any["array"] as? [Any])?.first as? String, "a")
        XCTAssertEqual((any["ns"] as? [String: Any])?["double"] as? Double, 2.5)
    }

    func testNonPlistValuesAreRefusedByKeyPath() {
        let cases: [(Any, String)] = [
            (["url": URL(string: "https://198.18.0.1/")!], "v.url"),
            (["list": [1, NSNull()] as [Any]], "v.list[1]"),
            (["deep": ["keys": [1: "x"]]], "v.deep.keys"),
            (["object": NSObject()], "v.object"),
        ]
        for (value, keyPath) in cases {
            XCTAssertThrowsError(try plist(value)) { error in
                XCTAssertEqual((error as? PropertyListValue.Failure)?.keyPath, keyPath, "\(error)")
            }
        }
    }

    func testBadTaggedValuesAreRefused() {
        for bad: Any in [["integer": true], ["bool": 1], ["real": 1.5], ["data": "%%"], ["kind": "x"], ["string": "a", "integer": 1], "bare"] {
            XCTAssertThrowsError(try PropertyListValue(tagged: bad, keyPath: "v"), "\(bad)")
        }
    }

    static func fullProtocol() -> NETunnelProviderProtocol {
        let p = NETunnelProviderProtocol()
        p.serverAddress = "198.18.0.10"
        p.username = "alice"
        p.passwordReference = TunnelgateSecretStore.reference(named: "vpn-password")
        p.identityReference = Data([1, 2, 3])
        p.disconnectOnSleep = true
        p.includeAllNetworks = true
        p.excludeLocalNetworks = true
        p.providerBundleIdentifier = "/usr/local/bin/provider"
        p.providerConfiguration = everyPlistType
        p.tunnelgateInterfaceName = "tgx"
        p.tunnelgateArguments = ["--provider", "config"]
        return p
    }

    static func assertSame(_ a: NETunnelProviderProtocol, _ b: NETunnelProviderProtocol, file: StaticString = #filePath, line: UInt = #line) throws {
        XCTAssertEqual(a.serverAddress, b.serverAddress, file: file, line: line)
        XCTAssertEqual(a.username, b.username, file: file, line: line)
        XCTAssertEqual(a.passwordReference, b.passwordReference, file: file, line: line)
        XCTAssertEqual(a.identityReference, b.identityReference, file: file, line: line)
        XCTAssertEqual(a.disconnectOnSleep, b.disconnectOnSleep, file: file, line: line)
        XCTAssertEqual(a.includeAllNetworks, b.includeAllNetworks, file: file, line: line)
        XCTAssertEqual(a.excludeLocalNetworks, b.excludeLocalNetworks, file: file, line: line)
        XCTAssertEqual(a.providerBundleIdentifier, b.providerBundleIdentifier, file: file, line: line)
        XCTAssertEqual(a.tunnelgateInterfaceName, b.tunnelgateInterfaceName, file: file, line: line)
        XCTAssertEqual(a.tunnelgateArguments, b.tunnelgateArguments, file: file, line: line)
        XCTAssertEqual(try a.providerConfiguration.map { try PropertyListValue($0, keyPath: "c") },
                       try b.providerConfiguration.map { try PropertyListValue($0, keyPath: "c") }, file: file, line: line)
    }

    func testProtocolRoundTripsEveryProperty() throws {
        let p = Self.fullProtocol()
        let back = try NETunnelProviderProtocol.tunnelgateDecoded(try p.tunnelgateEncoded())
        try Self.assertSame(p, back)
        XCTAssertNotNil(back.providerConfiguration)
        // Defaults survive too.
        let empty = try NETunnelProviderProtocol.tunnelgateDecoded(try NETunnelProviderProtocol().tunnelgateEncoded())
        XCTAssertNil(empty.serverAddress)
        XCTAssertNil(empty.passwordReference)
        XCTAssertNil(empty.providerConfiguration)
        XCTAssertFalse(empty.disconnectOnSleep)
        XCTAssertEqual(empty.tunnelgateInterfaceName, "tg0")
    }

    func testDecodingNamesWhatIsWrong() {
        for (json, key) in [(#"{"username": 5}"#, "protocolConfiguration.username"),
                            (#"{"disconnectOnSleep": "yes"}"#, "protocolConfiguration.disconnectOnSleep"),
                            (#"{"passwordReference": "not base64!"}"#, "protocolConfiguration.passwordReference"),
                            (#"{"providerConfigurationPlist": {"string": "x"}}"#, "protocolConfiguration.providerConfigurationPlist"),
                            (#"{"providerConfigurationPlist": {"dictionary": {"a": {"bool": 3}}}}"#, "protocolConfiguration.providerConfiguration.a"),
                            ("[]", "protocol configuration")] {
            XCTAssertThrowsError(try NETunnelProviderProtocol.tunnelgateDecoded(Array(json.utf8))) { error in
                XCTAssertEqual((error as? NEVPNError)?.code, .configurationInvalid)
                XCTAssertTrue("\(error)".contains(key), "\(error) names \(key)")
            }
        }
    }

    func testCopyIsDeep() throws {
        let p = Self.fullProtocol()
        let c = try XCTUnwrap(p.copy() as? NETunnelProviderProtocol)
        XCTAssertFalse(c === p)
        try Self.assertSame(p, c)
        c.serverAddress = "198.18.0.99"
        c.providerConfiguration?["string"] = "changed"
        XCTAssertEqual(p.serverAddress, "198.18.0.10")
        XCTAssertEqual(p.providerConfiguration?["string"] as? String, "tunnel")
    }

    /// The provider's side: what the host delivers is what protocolConfiguration returns, the same object
    /// each time; before a delivery, what a manager's handoff holds.
    func testProviderSeesTheDeliveredConfiguration() throws {
        final class Provider: NEPacketTunnelProvider, @unchecked Sendable {}
        let provider = Provider()
        let handoff = TunnelgateHostHandoff(configuration: TunnelgateHostConfiguration(interfaceName: "tgh", includeAllNetworks: true),
                                            serverAddress: "198.18.0.20", providerConfigurationJSON: #"{"mtu":1280}"#)
        let fromHandoff = NETunnelProvider.protocolConfigurationFromHandoff(handoff)
        XCTAssertEqual(fromHandoff.serverAddress, "198.18.0.20")
        XCTAssertEqual(fromHandoff.providerConfiguration?["mtu"] as? Int, 1280)
        XCTAssertEqual(fromHandoff.tunnelgateInterfaceName, "tgh")
        XCTAssertTrue(fromHandoff.includeAllNetworks)

        let saved = Self.fullProtocol()
        try provider.tunnelgateDeliverProtocolConfiguration(encoded: try saved.tunnelgateEncoded())
        let seen = try XCTUnwrap(provider.protocolConfiguration as? NETunnelProviderProtocol)
        XCTAssertTrue(seen === provider.protocolConfiguration)
        try Self.assertSame(saved, seen)
        XCTAssertEqual(seen.providerConfiguration?["data"] as? Data, Data([0, 1, 2, 0xFF, 0x80]))
        XCTAssertEqual(seen.passwordReference.flatMap(TunnelgateSecretStore.name(fromReference:)), "vpn-password")

        // Saved again: the provider sees the new one.
        saved.serverAddress = "198.18.0.30"
        provider.tunnelgateDeliverProtocolConfiguration(saved)
        XCTAssertEqual(provider.protocolConfiguration.serverAddress, "198.18.0.30")
        XCTAssertThrowsError(try provider.tunnelgateDeliverProtocolConfiguration(encoded: Array("{".utf8)))
        XCTAssertEqual(provider.protocolConfiguration.serverAddress, "198.18.0.30", "a bad delivery changes nothing")
    }
}
