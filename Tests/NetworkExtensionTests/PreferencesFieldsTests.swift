import Foundation
import Glibc
@testable import NetworkExtension
import XCTest

/// What the preferences file gained: passwordReference, identityReference, disconnectOnSleep,
/// providerConfiguration's property-list types, isOnDemandEnabled and onDemandRules; saved, loaded as
/// saved, refused when malformed, and files written before them still read.
final class PreferencesFieldsTests: XCTestCase {
    var directory = ""
    var file: String { directory + "/preferences.json" }

    override func setUpWithError() throws {
        directory = NSTemporaryDirectory() + "tunnelgate-preferences-fields-\(getpid())-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        NEVPNManager.tunnelgateSetPreferencesPath(file)
    }

    override func tearDown() {
        NEVPNManager.tunnelgateSetPreferencesPath(nil)
        try? FileManager.default.removeItem(atPath: directory)
    }

    func rules() -> [NEOnDemandRule] {
        let office = NEOnDemandRuleDisconnect()
        office.interfaceTypeMatch = .wiFi
        office.ssidMatch = ["Office", "Office-5G"]
        office.dnsSearchDomainMatch = ["*.corp.example"]
        office.dnsServerAddressMatch = ["10.0.0.53", "172.16.*"]
        office.probeURL = URL(string: "http://198.18.0.80/inside")
        let evaluate = NEOnDemandRuleEvaluateConnection()
        evaluate.interfaceTypeMatch = .cellular
        let never = NEEvaluateConnectionRule(matchDomains: ["portal.example.com"], andAction: .neverConnect)
        let needed = NEEvaluateConnectionRule(matchDomains: ["example.com"], andAction: .connectIfNeeded)
        needed.useDNSServers = ["10.0.0.53"]
        needed.probeURL = URL(string: "https://198.18.0.81/")
        evaluate.connectionRules = [never, needed]
        let ignore = NEOnDemandRuleIgnore()
        ignore.interfaceTypeMatch = .ethernet
        return [office, evaluate, ignore, NEOnDemandRuleConnect()]
    }

    func testEveryNewFieldRoundTrips() async throws {
        let m = NETunnelProviderManager()
        m.protocolConfiguration = ProtocolConfigurationTests.fullProtocol()
        m.isEnabled = true
        m.isOnDemandEnabled = true
        m.onDemandRules = rules()
        try await m.saveToPreferences()

        let loadedAll = try await NETunnelProviderManager.loadAllFromPreferences()
        let loaded = try XCTUnwrap(loadedAll.first)
        XCTAssertTrue(loaded.isOnDemandEnabled)
        let p = try XCTUnwrap(loaded.protocolConfiguration as? NETunnelProviderProtocol)
        try ProtocolConfigurationTests.assertSame(ProtocolConfigurationTests.fullProtocol(), p)
        XCTAssertEqual(p.providerConfiguration?["date"] as? Date, Date(timeIntervalSinceReferenceDate: 123_456_789.123_456_7))

        let r = try XCTUnwrap(loaded.onDemandRules)
        XCTAssertEqual(r.map(\.action), [.disconnect, .evaluateConnection, .ignore, .connect])
        XCTAssertTrue(r[0] is NEOnDemandRuleDisconnect && r[1] is NEOnDemandRuleEvaluateConnection && r[2] is NEOnDemandRuleIgnore
                      && r[3] is NEOnDemandRuleConnect)
        XCTAssertEqual(r[0].interfaceTypeMatch, .wiFi)
        XCTAssertEqual(r[0].ssidMatch, ["Office", "Office-5G"])
        XCTAssertEqual(r[0].dnsSearchDomainMatch, ["*.corp.example"])
        XCTAssertEqual(r[0].dnsServerAddressMatch, ["10.0.0.53", "172.16.*"])
        XCTAssertEqual(r[0].probeURL?.absoluteString, "http://198.18.0.80/inside")
        XCTAssertEqual(r[1].interfaceTypeMatch, .cellular)
        let cr = try XCTUnwrap((r[1] as? NEOnDemandRuleEvaluateConnection)?.connectionRules)
        XCTAssertEqual(cr.map(\.action), [.neverConnect, .connectIfNeeded])
        XCTAssertEqual(cr.map(\.matchDomains), [["portal.example.com"], ["example.com"]])
        XCTAssertEqual(cr[1].useDNSServers, ["10.0.0.53"])
        XCTAssertEqual(cr[1].probeURL?.absoluteString, "https://198.18.0.81/")
        XCTAssertEqual(r[2].interfaceTypeMatch, .ethernet)
        XCTAssertNil(r[3].ssidMatch)

        // The loaded rules decide as the saved ones do.
        XCTAssertEqual(TunnelgateOnDemand.evaluate(r, on: .init(interfaceType: .wireless, ssid: "Office", dnsSearchDomains: ["a.corp.example"],
                                                                dnsServers: ["172.16.0.1"]), probe: { _ in true })?.action, .disconnect)

        // Removing the rules is saved too.
        loaded.onDemandRules = nil
        loaded.isOnDemandEnabled = false
        try await loaded.saveToPreferences()
        let againAll = try await NETunnelProviderManager.loadAllFromPreferences()
        let again = try XCTUnwrap(againAll.first)
        XCTAssertNil(again.onDemandRules)
        XCTAssertFalse(again.isOnDemandEnabled)
    }

    func testTheFileHoldsReferencesNotSecrets() async throws {
        let m = NETunnelProviderManager()
        let p = NETunnelProviderProtocol()
        p.providerBundleIdentifier = "/bin/true"
        p.passwordReference = TunnelgateSecretStore.reference(named: "office-vpn")
        m.protocolConfiguration = p
        try await m.saveToPreferences()
        let text = try String(contentsOfFile: file, encoding: .utf8)
        XCTAssertTrue(text.contains(Data("tunnelgate-secret:office-vpn".utf8).base64EncodedString()))
    }

    func testMalformedRulesAreRefusedOnSaveByKeyPath() async throws {
        let cases: [(NEOnDemandRule, String)] = [
            ({ let r = NEOnDemandRuleConnect(); r.ssidMatch = [String(repeating: "s", count: 33)]; return r }(), "onDemandRules[0].ssidMatch[0]"),
            ({ let r = NEOnDemandRuleConnect(); r.dnsSearchDomainMatch = ["bad domain"]; return r }(), "onDemandRules[0].dnsSearchDomainMatch[0]"),
            ({ let r = NEOnDemandRuleConnect(); r.dnsServerAddressMatch = ["not-an-address"]; return r }(), "onDemandRules[0].dnsServerAddressMatch[0]"),
            ({ let r = NEOnDemandRuleConnect(); r.probeURL = URL(string: "ftp://198.18.0.1/"); return r }(), "onDemandRules[0].probeURL"),
            (NEOnDemandRuleEvaluateConnection(), "onDemandRules[0].connectionRules"),
            ({ let r = NEOnDemandRuleEvaluateConnection()
               r.connectionRules = [NEEvaluateConnectionRule(matchDomains: [], andAction: .connectIfNeeded)]; return r }(),
             "onDemandRules[0].connectionRules[0].matchDomains"),
        ]
        for (rule, keyPath) in cases {
            let m = NETunnelProviderManager()
            m.protocolConfiguration = NETunnelProviderProtocol()
            m.onDemandRules = [rule]
            do {
                try await m.saveToPreferences()
                XCTFail("saved \(keyPath)")
            } catch {
                XCTAssertEqual((error as? NEVPNError)?.code, .configurationInvalid)
                XCTAssertTrue("\(error)".hasPrefix(keyPath + ":"), "\(error) names \(keyPath)")
            }
        }
        XCTAssertFalse(FileManager.default.fileExists(atPath: file), "nothing was written")
    }

    /// A file as Tunnelgate wrote it before these fields (providerConfiguration as plain JSON): read
    /// with every old field, the new ones at their defaults.
    func testAnOlderFileIsStillRead() async throws {
        let old = #"""
        {
          "managers" : [
            {
              "identifier" : "6C1F3E52-0000-4000-8000-000000000001",
              "isEnabled" : true,
              "localizedDescription" : "Test VPN",
              "protocol" : {
                "arguments" : ["--provider", "counting"],
                "excludeLocalNetworks" : false,
                "includeAllNetworks" : true,
                "interfaceName" : "tgold",
                "providerBundleIdentifier" : "/bin/true",
                "providerConfiguration" : {"mtu" : 1400, "nested" : {"on" : true}, "peers" : ["a", "b"], "ratio" : 0.5},
                "serverAddress" : "198.18.0.10"
              }
            }
          ]
        }
        """#
        try old.write(toFile: file, atomically: true, encoding: .utf8)
        let mAll = try await NETunnelProviderManager.loadAllFromPreferences()
        let m = try XCTUnwrap(mAll.first)
        XCTAssertEqual(m.localizedDescription, "Test VPN")
        XCTAssertTrue(m.isEnabled)
        XCTAssertFalse(m.isOnDemandEnabled)
        XCTAssertNil(m.onDemandRules)
        let p = try XCTUnwrap(m.protocolConfiguration as? NETunnelProviderProtocol)
        XCTAssertEqual(p.providerBundleIdentifier, "/bin/true")
        XCTAssertEqual(p.serverAddress, "198.18.0.10")
        XCTAssertEqual(p.tunnelgateInterfaceName, "tgold")
        XCTAssertEqual(p.tunnelgateArguments, ["--provider", "counting"])
        XCTAssertTrue(p.includeAllNetworks)
        XCTAssertNil(p.passwordReference)
        XCTAssertFalse(p.disconnectOnSleep)
        XCTAssertEqual(p.providerConfiguration?["mtu"] as? Int, 1400)
        XCTAssertEqual(p.providerConfiguration?["ratio"] as? Double, 0.5)
        XCTAssertEqual(p.providerConfiguration?["peers"] as? [String], ["a", "b"])
        XCTAssertEqual((p.providerConfiguration?["nested"] as? [String: Any])?["on"] as? Bool, true)

        // Saved again, it is written in the new form and reads back the same.
        try await m.saveToPreferences()
        let text = try String(contentsOfFile: file, encoding: .utf8)
        XCTAssertTrue(text.contains("providerConfigurationPlist"))
        let againAll = try await NETunnelProviderManager.loadAllFromPreferences()
        let again = try XCTUnwrap(againAll.first)
        XCTAssertEqual((again.protocolConfiguration as? NETunnelProviderProtocol)?.providerConfiguration?["mtu"] as? Int, 1400)
    }

    func testAMalformedEntryIsNamed() async throws {
        let bad = #"{"managers": [{"identifier": "x", "protocol": {}}, {"identifier": "y", "onDemandRules": [{"action": "sometimes"}]}]}"#
        try bad.write(toFile: file, atomically: true, encoding: .utf8)
        do {
            _ = try await NETunnelProviderManager.loadAllFromPreferences()
            XCTFail("loaded an unknown action")
        } catch {
            XCTAssertEqual((error as? NEVPNError)?.code, .configurationReadWriteFailed)
            XCTAssertTrue("\(error)".contains("managers[1].onDemandRules[0].action"), "\(error)")
            XCTAssertTrue("\(error)".contains(file), "\(error)")
        }
    }
}
