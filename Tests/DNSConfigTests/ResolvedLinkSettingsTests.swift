import Glibc
import TunnelgateSettings
import XCTest
@testable import DNSConfig

/// NEDNSSettings → systemd-resolved's per-link settings (docs/dns.md).
final class ResolvedLinkSettingsTests: XCTestCase {
    let v4 = IPAddress("10.8.0.1")!, v6 = IPAddress("fd00:8::1")!, linkLocal = IPAddress("fe80::1")!

    func domains(_ settings: DNSSettings) -> [String] { ResolvedLinkSettings(settings).domains.map(\.description) }

    func testTheTunnelAsTheDefaultResolver() {
        for match in [nil, [], [""], ["", "corp.example"]] as [[String]?] {
            let settings = DNSSettings(servers: [v4, v6, linkLocal, IPAddress("10.8.0.4")!], matchDomains: match)
            let link = ResolvedLinkSettings(settings)
            XCTAssertEqual(link.servers, settings.servers, "all servers, in order: resolved reads more than three")
            XCTAssertTrue(link.defaultRoute, "\(String(describing: match))")
            XCTAssertEqual(link.domains.last, .init(".", routingOnly: true), "~. keeps other links' DefaultRoute out")
        }
        XCTAssertEqual(domains(DNSSettings(servers: [v4])), ["~."])
        XCTAssertEqual(domains(DNSSettings(servers: [v4], matchDomains: ["", "corp.example"])), ["corp.example", "~."])
        XCTAssertEqual(domains(DNSSettings(servers: [v4], searchDomains: ["a.example"], domainName: "b.example")),
                       ["a.example", "b.example", "~."])
    }

    func testSplitDNS() {
        let split = DNSSettings(servers: [v4], searchDomains: ["Search.Example."], matchDomains: ["corp.example", "10.in-addr.arpa"],
                                domainName: "corp.example")
        let link = ResolvedLinkSettings(split)
        XCTAssertFalse(link.defaultRoute, "only the match domains go to the tunnel")
        // Match domains are search domains too unless matchDomainsNoSearch (NEDNSSettings' default);
        // in resolved a search domain also routes. Duplicates (corp.example) appear once, first wins.
        XCTAssertEqual(link.domains.map(\.description), ["search.example", "corp.example", "10.in-addr.arpa"])
        var noSearch = split
        noSearch.matchDomainsNoSearch = true
        XCTAssertEqual(domains(noSearch), ["search.example", "corp.example", "~10.in-addr.arpa"],
                       "routing-only, except where a search or domainName entry already routes them")
        noSearch.domainName = nil
        noSearch.searchDomains = []
        XCTAssertEqual(domains(noSearch), ["~corp.example", "~10.in-addr.arpa"])
    }

    func testFixedPerLinkSettings() {
        let link = ResolvedLinkSettings(DNSSettings(servers: [v4]))
        XCTAssertEqual([link.llmnr, link.multicastDNS, link.dnsOverTLS], ["no", "no", "no"])
    }

    func testArgumentsAndTheirReadingBack() {
        let link = ResolvedLinkSettings(DNSSettings(servers: [v4, v6], matchDomains: ["corp.example"], matchDomainsNoSearch: true))
        let servers = link.serversArgument
        XCTAssertEqual(servers, .array(element: "(iay)", [
            .structure([.int32(AF_INET), .bytes([10, 8, 0, 1])]),
            .structure([.int32(AF_INET6), .bytes([0xfd, 0, 0, 8] + Array(repeating: 0, count: 11) + [1])]),
        ]))
        XCTAssertEqual(link.domainsArgument, .array(element: "(sb)", [.structure([.string("corp.example"), .boolean(true)])]))
        XCTAssertEqual(ResolvedLinkSettings.servers(from: servers), [v4, v6])
        XCTAssertEqual(ResolvedLinkSettings.domains(from: link.domainsArgument), link.domains)
        XCTAssertNil(ResolvedLinkSettings.servers(from: .array(element: "(iay)", [.structure([.int32(AF_INET), .bytes([1, 2])])])))
        XCTAssertNil(ResolvedLinkSettings.domains(from: .string("x")))
    }

    func testDifferences() {
        let wanted = ResolvedLinkSettings(DNSSettings(servers: [v4], matchDomains: ["corp.example"], matchDomainsNoSearch: true))
        var actual = wanted
        actual.domains = [.init("Corp.Example.", routingOnly: true)]
        XCTAssertEqual(wanted.differences(from: actual), [], "case and a trailing dot do not count")
        actual.servers = []
        actual.defaultRoute = true
        actual.domains = []
        XCTAssertEqual(wanted.differences(from: actual), [
            "DNS servers are [], not [10.8.0.1]", "domains are [], not [~corp.example]", "DefaultRoute is true, not false",
        ])
    }
}
