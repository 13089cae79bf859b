import TunnelgateSettings
import XCTest
@testable import DNSConfig

final class SplitDNSPolicyTests: XCTestCase {
    func name(_ text: String) -> DNSName { DNSName(text)! }

    func testSuffixMatchOnLabelBoundaries() {
        let corp = name("corp.example")
        XCTAssertTrue(name("corp.example").isInDomain(corp))
        XCTAssertTrue(name("a.corp.example").isInDomain(corp))
        XCTAssertTrue(name("a.b.corp.example").isInDomain(corp))
        XCTAssertFalse(name("notcorp.example").isInDomain(corp), "a suffix inside a label is not a subdomain")
        XCTAssertFalse(name("corp.example.org").isInDomain(corp))
        XCTAssertFalse(name("example").isInDomain(corp))
        XCTAssertFalse(name("corp.exampl").isInDomain(corp))
    }

    func testMatchIgnoresASCIICaseAndTrailingDot() {
        let corp = name("Corp.Example.")
        XCTAssertTrue(name("HOST.CORP.EXAMPLE").isInDomain(corp))
        XCTAssertTrue(name("host.corp.example.").isInDomain(corp))
        // Only ASCII letters fold: 0xC3 is not 0xE3.
        XCTAssertFalse(DNSName(validatedLabels: [[0xc3]]).isInDomain(DNSName(validatedLabels: [[0xe3]])))
    }

    func testRootContainsEverything() {
        XCTAssertTrue(name("anything.example").isInDomain(.root))
        XCTAssertFalse(DNSName.root.isInDomain(name("example")))
        XCTAssertEqual(DNSName(""), .root)
        XCTAssertEqual(DNSName("."), .root)
    }

    func testInvalidPresentationNames() {
        XCTAssertNil(DNSName("a..b"))
        XCTAssertNil(DNSName(".a"))
        XCTAssertNil(DNSName(String(repeating: "x", count: 64) + ".example"))
        XCTAssertNotNil(DNSName(String(repeating: "x", count: 63) + ".example"))
    }

    func testPolicyRoutesMatchDomainsToTheTunnel() {
        let policy = SplitDNSPolicy(matchDomains: ["corp.example", "lab.test"])
        XCTAssertTrue(policy.sendsToTunnel(name("git.corp.example")))
        XCTAssertTrue(policy.sendsToTunnel(name("LAB.TEST")))
        XCTAssertFalse(policy.sendsToTunnel(name("www.example.org")))
        XCTAssertFalse(policy.sendsToTunnel(name("test")))
        XCTAssertFalse(policy.sendsToTunnel(.root))
    }

    func testWhichSettingsAreSplit() {
        let server = [IPAddress("10.8.0.1")!]
        XCTAssertFalse(DNSSettings(servers: server).isSplitDNS)
        XCTAssertFalse(DNSSettings(servers: server, matchDomains: []).isSplitDNS)
        XCTAssertFalse(DNSSettings(servers: server, matchDomains: [""]).isSplitDNS)
        XCTAssertFalse(DNSSettings(servers: server, matchDomains: ["", "corp.example"]).isSplitDNS)
        XCTAssertTrue(DNSSettings(servers: server, matchDomains: ["corp.example"]).isSplitDNS)
    }

    func testSearchListOrderAndDuplicates() {
        let settings = DNSSettings(servers: [IPAddress("10.8.0.1")!], searchDomains: ["b.example", "a.example"],
                                   matchDomains: ["", "corp.example", "a.example"], domainName: "corp.example")
        XCTAssertEqual(settings.searchList(), ["b.example", "a.example", "corp.example"])
        XCTAssertEqual(settings.searchList(appending: ["home.lan", "B.EXAMPLE."]),
                       ["b.example", "a.example", "corp.example", "home.lan"])
        var noSearch = settings
        noSearch.matchDomains = ["lab.test"]
        XCTAssertEqual(noSearch.searchList(), ["b.example", "a.example", "corp.example", "lab.test"])
        noSearch.matchDomainsNoSearch = true
        XCTAssertEqual(noSearch.searchList(), ["b.example", "a.example", "corp.example"])
    }
}
