import TunnelgateSettings
import XCTest
@testable import DNSConfig

final class ResolvConfTests: XCTestCase {
    let header = """
        # Written by tunnelgate for tunnel corp0: the DNS settings of the tunnel.
        # `tunnelgate down corp0` puts back what was here before; edits made meanwhile are lost then.

        """

    func render(_ settings: DNSSettings, forwarder: IPAddress? = nil, original: ResolvConf = ResolvConf()) -> String {
        ResolvConf.render(settings, tunnelName: "corp0", interfaceName: "corp0", forwarder: forwarder, original: original)
    }

    func testServersOnly() {
        let settings = DNSSettings(servers: [IPAddress("10.8.0.1")!, IPAddress("fd00:8::1")!])
        XCTAssertEqual(render(settings), header + """
            nameserver 10.8.0.1
            nameserver fd00:8::1

            """)
    }

    func testDefaultResolverWithEveryDomainKind() {
        let settings = DNSSettings(servers: [IPAddress("10.8.0.1")!], searchDomains: ["corp.example", "eng.corp.example"],
                                   matchDomains: [""], matchDomainsNoSearch: false, domainName: "corp.example")
        XCTAssertEqual(render(settings), header + """
            nameserver 10.8.0.1
            search corp.example eng.corp.example

            """)
    }

    func testAtMostThreeNameserversAndTheRestNamed() {
        let settings = DNSSettings(servers: ["10.8.0.1", "10.8.0.2", "10.8.0.3", "10.8.0.4", "fd00::5"].map { IPAddress($0)! })
        XCTAssertEqual(render(settings), header + """
            nameserver 10.8.0.1
            nameserver 10.8.0.2
            nameserver 10.8.0.3
            # Not listed, as glibc reads at most 3 nameserver lines: 10.8.0.4 fd00::5

            """)
    }

    func testLinkLocalServerIsScopedToTheTunnel() {
        let settings = DNSSettings(servers: [IPAddress("fe80::1")!])
        XCTAssertEqual(render(settings), header + "nameserver fe80::1%corp0\n")
    }

    func testMatchDomainsJoinTheSearchListUnlessNoSearch() {
        var settings = DNSSettings(servers: [IPAddress("10.8.0.1")!], searchDomains: ["a.example"],
                                   matchDomains: ["", "corp.example"], domainName: "b.example")
        XCTAssertTrue(render(settings).hasSuffix("search a.example b.example corp.example\n"))
        settings.matchDomainsNoSearch = true
        XCTAssertTrue(render(settings).hasSuffix("search a.example b.example\n"))
    }

    func testSplitDNSPointsAtTheForwarderAndKeepsTheOldSearchList() {
        let settings = DNSSettings(servers: [IPAddress("10.8.0.1")!], matchDomains: ["corp.example", "lab.test"])
        let original = ResolvConf(parsing: Array("nameserver 192.168.1.1\nsearch home.lan\n".utf8))
        XCTAssertEqual(render(settings, forwarder: IPAddress("127.0.0.153"), original: original), header + """
            # Split DNS: tunnelgate's forwarder on 127.0.0.153 sends names in corp.example lab.test to the
            # tunnel's servers (10.8.0.1) and every other name to the servers listed here before (192.168.1.1).
            nameserver 127.0.0.153
            search corp.example lab.test home.lan

            """)
    }

    func testSplitDNSWithoutPreviousServersFallsBackToGlibcsDefault() {
        let settings = DNSSettings(servers: [IPAddress("10.8.0.1")!], matchDomains: ["corp.example"],
                                   matchDomainsNoSearch: true)
        let text = render(settings, forwarder: IPAddress("127.0.0.153"))
        XCTAssertTrue(text.contains("servers listed here before (127.0.0.1 (none were listed))"))
        XCTAssertFalse(text.contains("search"))
    }

    func testParsingReadsWhatGlibcReads() {
        let text = """
            # comment nameserver 1.1.1.1
            ; nameserver 2.2.2.2
             nameserver 3.3.3.3
            nameserver 10.0.0.1
            nameserver fe80::1%eth0
            nameserver not-an-address
            nameserver\t10.0.0.2
            nameserver 10.0.0.3
            search a.example b.example
            domain c.example
            options edns0 trust-ad
            """
        let conf = ResolvConf(parsing: Array(text.utf8))
        XCTAssertEqual(conf.nameservers.map(\.description), ["10.0.0.1", "fe80::1%eth0", "10.0.0.2"])
        XCTAssertEqual(conf.searchDomains, ["c.example"], "the last of search and domain wins")
    }
}
