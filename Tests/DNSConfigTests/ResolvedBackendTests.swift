import Glibc
import LinuxSystem
import TunnelgateSettings
import XCTest
@testable import DNSConfig

/// The systemd-resolved backend's journal, rollback and restore decisions,
/// with a real dbus-daemon and a peer answering for org.freedesktop.resolve1
/// at ROOT/run/dbus/system_bus_socket. (The real resolved is exercised by
/// netns/tests/dns-resolved.sh.) Link "lo" (index 1) stands for the tunnel's
/// interface where a link that exists is needed.
final class ResolvedBackendTests: XCTestCase {
    var root: TemporaryRoot!
    var journalPath: String { root.stateDirectory + "/tg0.dns" }
    let settings = DNSSettings(servers: [IPAddress("10.8.0.1")!], matchDomains: ["corp.example"], matchDomainsNoSearch: true)
    let linkPath = "/org/freedesktop/resolve1/link/_31"

    override func setUpWithError() throws {
        root = try TemporaryRoot()
        try FileSystem.makeDirectory(root.path + "/run/dbus", mode: 0o755)
    }

    override func tearDown() { root = nil }

    func startBus() throws -> TestBusDaemon { try TestBusDaemon(socketPath: root.path + "/run/dbus/system_bus_socket") }

    /// A peer whose Link object reads back as `readBack`.
    func resolved(_ daemon: TestBusDaemon, readBack: ResolvedLinkSettings, errors: [String: String] = [:]) throws -> TestPeer {
        try TestPeer(address: daemon.address, name: ResolvedClient.service, objects: [ResolvedClient.managerPath, linkPath],
                     replies: ["GetLink": [.objectPath(linkPath)], "Get DNS": [.variant(readBack.serversArgument)],
                               "Get Domains": [.variant(readBack.domainsArgument)],
                               "Get DefaultRoute": [.variant(.boolean(readBack.defaultRoute))]],
                     errors: errors, watching: journalPath)
    }

    func apply(interface: String = "lo", index: Int32 = 1) throws -> DNSApplied {
        try DNSConfigurator(paths: root.paths, backend: .systemdResolved)
            .apply(settings: settings, interfaceName: interface, interfaceIndex: index,
                   stateDirectory: root.stateDirectory, tunnelName: "tg0")
    }

    func restore() throws {
        try DNSConfigurator.restore(stateDirectory: root.stateDirectory, tunnelName: "tg0", paths: root.paths)
    }

    func testApplyJournalsFirstThenSetsAndReadsBackAndRestoreReverts() throws {
        let daemon = try startBus()
        let peer = try resolved(daemon, readBack: ResolvedLinkSettings(settings))
        defer { peer.close() }
        let applied = try apply()
        XCTAssertEqual(applied.backend, .systemdResolved)
        XCTAssertNil(applied.path)
        XCTAssertNil(applied.forwarder)
        XCTAssertEqual(try root.read("/state/tg0.dns"), "tunnelgate-dns 1\ntunnel tg0\nbackend systemd-resolved\nlink 1 lo\n")
        XCTAssertEqual(peer.calls.map(\.member), ["SetLinkDNS", "SetLinkDomains", "SetLinkDefaultRoute", "SetLinkLLMNR",
                                                  "SetLinkMulticastDNS", "SetLinkDNSOverTLS", "GetLink", "Get", "Get", "Get"])
        XCTAssertTrue(peer.calls.allSatisfy(\.watchedFileExisted), "every call comes after the journal is on disk")

        try restore()
        XCTAssertEqual(peer.calls.last?.member, "RevertLink")
        XCTAssertEqual(peer.calls.last?.arguments, [.int32(1)])
        XCTAssertFalse(FileSystem.exists(journalPath))
    }

    func testWhatResolvedDidNotTakeIsRevertedAndReported() throws {
        let daemon = try startBus()
        var other = ResolvedLinkSettings(settings)
        other.servers = []
        let peer = try resolved(daemon, readBack: other)
        defer { peer.close() }
        let before = try root.snapshot()
        XCTAssertThrowsError(try apply()) { error in
            XCTAssertEqual("\(error)", "systemd-resolved does not hold the DNS settings of link lo (1): DNS servers are [], not [10.8.0.1]")
        }
        XCTAssertEqual(peer.calls.last?.member, "RevertLink")
        XCTAssertEqual(try root.snapshot(), before, "the journal is gone again")
    }

    func testAFailedCallIsRevertedAndReported() throws {
        let daemon = try startBus()
        let peer = try resolved(daemon, readBack: ResolvedLinkSettings(settings),
                                errors: ["SetLinkDomains": "org.freedesktop.DBus.Error.InvalidArgs"])
        defer { peer.close() }
        XCTAssertThrowsError(try apply()) { error in
            XCTAssertEqual("\(error)", "systemd-resolved: org.freedesktop.resolve1.Manager.SetLinkDomains(1, "
                + "[(\"corp.example\", true)]) failed: org.freedesktop.DBus.Error.InvalidArgs: test peer: SetLinkDomains fails")
        }
        XCTAssertEqual(peer.calls.map(\.member), ["SetLinkDNS", "SetLinkDomains", "RevertLink"])
        XCTAssertFalse(FileSystem.exists(journalPath))
    }

    func testNoBusFailsAndLeavesNothing() throws {
        let before = try root.snapshot()
        XCTAssertThrowsError(try apply(interface: "tg-none", index: 4242)) { error in
            XCTAssertTrue("\(error)".hasPrefix("systemd-resolved: connect to the D-Bus bus unix:path=\(root.path)/run/dbus/"), "\(error)")
        }
        XCTAssertEqual(try root.snapshot(), before)
    }

    /// After a crash the tunnel's interface is gone with its owner, and
    /// resolved dropped its settings with it: restore sends nothing, needs
    /// no bus, and removes the journal.
    func testRestoreOfAVanishedLinkNeedsNoBus() throws {
        try FileSystem.writeAtomically(journalPath, DNSJournal(tunnel: "tg0", resolvedLinkIndex: 4242, name: "tg-gone").encoded)
        try restore()
        XCTAssertFalse(FileSystem.exists(journalPath))
    }

    /// The index now belongs to another interface: not ours to revert.
    func testRestoreLeavesAnIndexSomeoneElseHasNow() throws {
        let daemon = try startBus()
        let peer = try resolved(daemon, readBack: ResolvedLinkSettings(settings))
        defer { peer.close() }
        try FileSystem.writeAtomically(journalPath, DNSJournal(tunnel: "tg0", resolvedLinkIndex: 1, name: "tg0").encoded)
        try restore()
        XCTAssertEqual(peer.calls, [])
        XCTAssertFalse(FileSystem.exists(journalPath))
    }

    func testRestoreWhenResolvedNoLongerKnowsTheLink() throws {
        let daemon = try startBus()
        let peer = try resolved(daemon, readBack: ResolvedLinkSettings(settings), errors: ["RevertLink": ResolvedClient.noSuchLink])
        defer { peer.close() }
        try FileSystem.writeAtomically(journalPath, DNSJournal(tunnel: "tg0", resolvedLinkIndex: 1, name: "lo").encoded)
        try restore()
        XCTAssertEqual(peer.calls.map(\.member), ["RevertLink"])
        XCTAssertFalse(FileSystem.exists(journalPath))
    }

    /// The link is still there and resolved does not answer: the journal stays for the next try.
    func testRestoreWithoutResolvedKeepsTheJournal() throws {
        let daemon = try startBus()
        try FileSystem.writeAtomically(journalPath, DNSJournal(tunnel: "tg0", resolvedLinkIndex: 1, name: "lo").encoded)
        XCTAssertThrowsError(try restore()) { error in
            XCTAssertTrue("\(error)".contains("RevertLink(1) failed: org.freedesktop.DBus.Error.ServiceUnknown"), "\(error)")
        }
        XCTAssertTrue(FileSystem.exists(journalPath))
        _ = daemon
    }
}
