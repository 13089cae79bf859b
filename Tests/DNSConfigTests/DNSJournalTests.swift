import XCTest
@testable import DNSConfig

final class DNSJournalTests: XCTestCase {
    func testRoundTripOfEveryOriginal() throws {
        let originals: [DNSJournal.Original] = [
            .absent,
            .file(bytes: Array("nameserver 10.0.0.1\n# ünïcode, no trailing newline".utf8), permissions: 0o640, owner: 0, group: 4),
            .file(bytes: [], permissions: 0o600, owner: 1000, group: 1000),
            .file(bytes: [0, 0xff, 0x0a, 0x20], permissions: 0o4755, owner: 0, group: 0),
            .symbolicLink(target: Array("../run/systemd/resolve/stub-resolv.conf".utf8)),
        ]
        for original in originals {
            let journal = DNSJournal(tunnel: "tg0", backend: .namespaceResolvConf(namespace: "blue"),
                                     path: "/tmp/x y/etc/netns/blue/resolv.conf",
                                     createdDirectories: ["/tmp/x y/etc/netns", "/tmp/x y/etc/netns/blue"],
                                     original: original, forwarder: "127.0.0.153")
            XCTAssertEqual(try DNSJournal(parsing: journal.encoded, source: "j"), journal)
        }
        let plain = DNSJournal(tunnel: "tg0", backend: .resolvConf, path: "/etc/resolv.conf", original: .absent)
        XCTAssertEqual(String(decoding: plain.encoded, as: UTF8.self), """
            tunnelgate-dns 1
            tunnel tg0
            backend resolv.conf
            path /etc/resolv.conf
            original absent

            """)
        XCTAssertEqual(try DNSJournal(parsing: plain.encoded, source: "j"), plain)
    }

    func testSystemdResolvedJournalNamesTheLink() throws {
        let journal = DNSJournal(tunnel: "corp0", resolvedLinkIndex: 7, name: "corp0")
        XCTAssertEqual(String(decoding: journal.encoded, as: UTF8.self), """
            tunnelgate-dns 1
            tunnel corp0
            backend systemd-resolved
            link 7 corp0

            """)
        XCTAssertEqual(try DNSJournal(parsing: journal.encoded, source: "j"), journal)
        XCTAssertNil(journal.path)
        XCTAssertEqual(journal.change, .resolvedLink(index: 7, name: "corp0"))
    }

    func testCorruptJournalsAreRefusedWithAReason() {
        let cases: [(String, String)] = [
            ("", "the first line"),
            ("tunnelgate-dns 2\n", "the first line"),
            ("tunnelgate-dns 1\ntunnel a\nbackend resolv.conf\npath /etc/resolv.conf\n", "no 'original' record"),
            ("tunnelgate-dns 1\ntunnel a\nbackend resolv.conf\npath etc/resolv.conf\noriginal absent\n", "absolute"),
            ("tunnelgate-dns 1\ntunnel a\nbackend dnsmasq\n", "unknown backend"),
            ("tunnelgate-dns 1\ntunnel a\nbackend resolv.conf\npath /r\noriginal file 644 0 0 abc\n", "malformed"),
            ("tunnelgate-dns 1\ntunnel a\nbackend resolv.conf\npath /r\noriginal symlink\n", "malformed"),
            ("tunnelgate-dns 1\ntunnel a\nsurprise x\n", "unknown record"),
            ("tunnelgate-dns 1\ntunnel a\nbackend systemd-resolved\n", "no 'link' record"),
            ("tunnelgate-dns 1\ntunnel a\nbackend systemd-resolved\nlink 0 a\n", "malformed 'link'"),
            ("tunnelgate-dns 1\ntunnel a\nbackend systemd-resolved\nlink x a\n", "malformed 'link'"),
            ("tunnelgate-dns 1\ntunnel a\nbackend systemd-resolved\nlink 7\n", "malformed 'link'"),
            ("tunnelgate-dns 1\ntunnel a\nbackend systemd-resolved\nlink 7 a b\n", "malformed 'link'"),
            ("tunnelgate-dns 1\ntunnel a\nbackend systemd-resolved\nlink 7 a\npath /etc/resolv.conf\n", "file's records"),
            ("tunnelgate-dns 1\ntunnel a\nbackend resolv.conf\nlink 7 a\npath /r\noriginal absent\n", "'link' record in"),
        ]
        for (text, reason) in cases {
            XCTAssertThrowsError(try DNSJournal(parsing: Array(text.utf8), source: "/s/a.dns"), text) { error in
                guard case .corruptJournal(let path, let why)? = error as? DNSConfigError else {
                    return XCTFail("\(error)")
                }
                XCTAssertEqual(path, "/s/a.dns")
                XCTAssertTrue(why.contains(reason), "\(why) does not say \(reason)")
            }
        }
    }
}
