import Foundation
@testable import NetworkExtension
import XCTest

/// On-demand rules: evaluated as iOS does (first match wins, every criterion set must match), saved
/// and loaded with the manager, refused on save when malformed.
final class OnDemandTests: XCTestCase {
    typealias Network = TunnelgateOnDemand.Network

    func rule<R: NEOnDemandRule>(_ r: R, _ set: (R) -> Void = { _ in }) -> R { set(r); return r }

    func decide(_ rules: [NEOnDemandRule], _ network: Network, probe: (URL) -> Bool = { _ in XCTFail("probed"); return false })
        -> NEOnDemandRuleAction? {
        TunnelgateOnDemand.evaluate(rules, on: network, probe: probe)?.action
    }

    /// The classic list: trusted office Wi-Fi disconnects, home Wi-Fi ignores, everything else connects.
    func testFirstMatchingRuleWins() {
        let rules: [NEOnDemandRule] = [
            rule(NEOnDemandRuleDisconnect()) { $0.interfaceTypeMatch = .wiFi; $0.ssidMatch = ["Office"] },
            rule(NEOnDemandRuleIgnore()) { $0.ssidMatch = ["Home", "Home-5G"] },
            rule(NEOnDemandRuleDisconnect()) { $0.interfaceTypeMatch = .ethernet; $0.dnsSearchDomainMatch = ["*.corp.example"] },
            NEOnDemandRuleConnect(),
        ]
        XCTAssertEqual(decide(rules, Network(interfaceType: .wireless, ssid: "Office")), .disconnect)
        XCTAssertEqual(decide(rules, Network(interfaceType: .wireless, ssid: "Home-5G")), .ignore)
        XCTAssertEqual(decide(rules, Network(interfaceType: .wireless, ssid: "office")), .connect, "SSIDs are case-sensitive")
        XCTAssertEqual(decide(rules, Network(interfaceType: .wireless, ssid: nil)), .connect, "no SSID known: no SSID rule matches")
        XCTAssertEqual(decide(rules, Network(interfaceType: .wired, dnsSearchDomains: ["lan", "eng.corp.example."])), .disconnect)
        XCTAssertEqual(decide(rules, Network(interfaceType: .wired, dnsSearchDomains: ["corp.example"])), .connect,
                       "*.corp.example does not match corp.example itself")
        XCTAssertEqual(decide(rules, Network(interfaceType: .wireless, ssid: "Cafe", dnsSearchDomains: ["x.corp.example"])), .connect,
                       "the search domain rule is for wired links")
        XCTAssertEqual(decide(rules, Network(interfaceType: .cellular)), .connect)
        XCTAssertEqual(TunnelgateOnDemand.evaluate(rules, on: Network(interfaceType: .wireless, ssid: "Home"), probe: { _ in false })?.ruleIndex, 1)
        // An SSID is only a wireless link's: a wired link cannot match it even if one were given.
        XCTAssertEqual(decide(rules, Network(interfaceType: .wired, ssid: "Office")), .connect)
    }

    func testNoRuleMatchesIsNil() {
        let rules: [NEOnDemandRule] = [rule(NEOnDemandRuleConnect()) { $0.interfaceTypeMatch = .cellular }]
        XCTAssertNil(decide(rules, Network(interfaceType: .wired)))
        XCTAssertNil(decide([], Network(interfaceType: .wired)))
        XCTAssertEqual(decide(rules, Network(interfaceType: .cellular)), .connect)
        XCTAssertNil(decide([rule(NEOnDemandRuleConnect()) { $0.interfaceTypeMatch = .wiFi }], Network(interfaceType: .other)))
        XCTAssertEqual(decide([NEOnDemandRuleConnect()], Network(interfaceType: .other)), .connect, ".any matches other links")
    }

    func testDNSServerMatchNeedsEachServer() {
        let rules: [NEOnDemandRule] = [rule(NEOnDemandRuleDisconnect()) { $0.dnsServerAddressMatch = ["10.0.0.53", "172.16.*", "2001:db8::53"] }]
        XCTAssertEqual(decide(rules, Network(interfaceType: .wired, dnsServers: ["10.0.0.53", "172.16.9.9"])), .disconnect)
        XCTAssertEqual(decide(rules, Network(interfaceType: .wired, dnsServers: ["2001:DB8:0::53"])), .disconnect, "compared in canonical form")
        XCTAssertNil(decide(rules, Network(interfaceType: .wired, dnsServers: ["10.0.0.53", "198.18.0.53"])), "each server must match")
        XCTAssertNil(decide(rules, Network(interfaceType: .wired, dnsServers: [])))
    }

    func testProbeIsLastAndOnlyWhenTheRestMatched() {
        let url = URL(string: "http://198.18.0.80/inside")!
        let rules: [NEOnDemandRule] = [
            rule(NEOnDemandRuleDisconnect()) { $0.interfaceTypeMatch = .ethernet; $0.probeURL = url },
            NEOnDemandRuleConnect(),
        ]
        var probed: [URL] = []
        XCTAssertEqual(decide(rules, Network(interfaceType: .wired)) { probed.append($0); return true }, .disconnect)
        XCTAssertEqual(decide(rules, Network(interfaceType: .wired)) { probed.append($0); return false }, .connect)
        XCTAssertEqual(probed, [url, url])
        XCTAssertEqual(decide(rules, Network(interfaceType: .wireless)), .connect, "not probed: the interface did not match")
    }

    func testEmptyCriteriaAreNotCriteria() {
        let r = rule(NEOnDemandRuleIgnore()) { $0.ssidMatch = []; $0.dnsSearchDomainMatch = []; $0.dnsServerAddressMatch = [] }
        XCTAssertEqual(decide([r], Network(interfaceType: .wired)), .ignore)
    }

    func testEvaluateConnectionRules() {
        let never = NEEvaluateConnectionRule(matchDomains: ["portal.example.com"], andAction: .neverConnect)
        let needed = NEEvaluateConnectionRule(matchDomains: ["example.com", "*.internal"], andAction: .connectIfNeeded)
        let rules = [never, needed]
        XCTAssertTrue(TunnelgateOnDemand.evaluateConnection(toHost: "portal.example.com", rules: rules) === never)
        XCTAssertTrue(TunnelgateOnDemand.evaluateConnection(toHost: "WWW.Example.COM.", rules: rules) === needed)
        XCTAssertTrue(TunnelgateOnDemand.evaluateConnection(toHost: "example.com", rules: rules) === needed)
        XCTAssertTrue(TunnelgateOnDemand.evaluateConnection(toHost: "git.internal", rules: rules) === needed)
        XCTAssertNil(TunnelgateOnDemand.evaluateConnection(toHost: "notexample.com", rules: rules))
        let e = NEOnDemandRuleEvaluateConnection()
        e.connectionRules = rules
        XCTAssertEqual(decide([e], Network(interfaceType: .wired)), .evaluateConnection)
    }

    func testApplesRawValues() {
        XCTAssertEqual([NEOnDemandRuleAction.connect, .disconnect, .evaluateConnection, .ignore].map(\.rawValue), [1, 2, 3, 4])
        XCTAssertEqual([NEOnDemandRuleInterfaceType.any, .ethernet, .wiFi, .cellular].map(\.rawValue), [0, 1, 2, 3])
        XCTAssertEqual([NEEvaluateConnectionRuleAction.connectIfNeeded, .neverConnect].map(\.rawValue), [1, 2])
        XCTAssertEqual(NEOnDemandRuleConnect().action, .connect)
        XCTAssertEqual(NEOnDemandRuleEvaluateConnection().action, .evaluateConnection)
    }

    func testRuleCopy() throws {
        let e = rule(NEOnDemandRuleEvaluateConnection()) {
            $0.interfaceTypeMatch = .wiFi; $0.ssidMatch = ["A"]; $0.probeURL = URL(string: "https://198.18.0.1/")
            $0.connectionRules = [NEEvaluateConnectionRule(matchDomains: ["example.com"], andAction: .connectIfNeeded)]
        }
        let c = try XCTUnwrap(e.copy() as? NEOnDemandRuleEvaluateConnection)
        XCTAssertFalse(c === e)
        XCTAssertEqual(c.interfaceTypeMatch, .wiFi)
        XCTAssertEqual(c.ssidMatch, ["A"])
        XCTAssertEqual(c.probeURL, e.probeURL)
        XCTAssertEqual(c.connectionRules?.first?.matchDomains, ["example.com"])
        c.ssidMatch = ["B"]
        XCTAssertEqual(e.ssidMatch, ["A"])
    }
}
