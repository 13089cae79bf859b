import Glibc
import LinuxSystem
import TunnelgateSettings
import XCTest
@testable import DNSConfig

/// Journal and restore against a temporary root: the real /etc is never touched.
final class DNSConfiguratorTests: XCTestCase {
    let full = DNSSettings(servers: [IPAddress("10.8.0.1")!], searchDomains: ["corp.example"])

    func configurator(_ root: TemporaryRoot, _ backend: DNSBackendKind) -> DNSConfigurator {
        DNSConfigurator(paths: root.paths, backend: backend)
    }

    func apply(_ root: TemporaryRoot, _ backend: DNSBackendKind, _ settings: DNSSettings? = nil,
               tunnel: String = "tg0") throws -> DNSApplied {
        try configurator(root, backend).apply(settings: settings ?? full, interfaceName: tunnel, interfaceIndex: 7,
                                              stateDirectory: root.stateDirectory, tunnelName: tunnel)
    }

    func restore(_ root: TemporaryRoot, tunnel: String = "tg0") throws {
        try DNSConfigurator.restore(stateDirectory: root.stateDirectory, tunnelName: tunnel)
    }

    // MARK: Round trips

    func testExistingRegularFileIsRewrittenInPlaceAndRestoredByteForByte() throws {
        let root = try TemporaryRoot()
        try root.write("/etc/resolv.conf", "# from DHCP\nnameserver 192.168.1.1\r\noptions rotate", mode: 0o640)
        let inode = try FileSystem.status(root.path + "/etc/resolv.conf")?.inode
        let before = try root.snapshot()

        let applied = try apply(root, .resolvConf)
        XCTAssertEqual(applied.backend, .resolvConf)
        XCTAssertEqual(applied.path, root.path + "/etc/resolv.conf")
        XCTAssertNil(applied.forwarder)
        let written = try XCTUnwrap(try root.read("/etc/resolv.conf"))
        XCTAssertTrue(written.contains("\nnameserver 10.8.0.1\nsearch corp.example\n"), written)
        XCTAssertFalse(written.contains("192.168.1.1"))
        let status = try XCTUnwrap(try FileSystem.status(root.path + "/etc/resolv.conf"))
        XCTAssertEqual(status.inode, inode, "rewritten in place, so bind mounts of it see the change")
        XCTAssertEqual(status.permissions, 0o640)
        XCTAssertNotNil(try root.read("/state/tg0.dns"))

        try restore(root)
        XCTAssertEqual(try root.snapshot(), before)
        XCTAssertEqual(try FileSystem.status(root.path + "/etc/resolv.conf")?.inode, inode)
    }

    func testExistingSymbolicLinkIsReplacedAndRestored() throws {
        let root = try TemporaryRoot()
        try FileSystem.createSymbolicLink(at: root.path + "/etc/resolv.conf",
                                          target: Array("../run/systemd/resolve/stub-resolv.conf".utf8))
        let before = try root.snapshot()

        _ = try apply(root, .resolvConf)
        XCTAssertEqual(try FileSystem.status(root.path + "/etc/resolv.conf")?.kind, .regular)
        XCTAssertEqual(try FileSystem.status(root.path + "/etc/resolv.conf")?.permissions, 0o644)
        XCTAssertTrue(try XCTUnwrap(try root.read("/etc/resolv.conf")).contains("nameserver 10.8.0.1"))

        try restore(root)
        XCTAssertEqual(try root.snapshot(), before)
    }

    func testMissingFileIsCreatedAndRemovedAgain() throws {
        let root = try TemporaryRoot()
        let before = try root.snapshot()
        _ = try apply(root, .resolvConf)
        XCTAssertTrue(try XCTUnwrap(try root.read("/etc/resolv.conf")).contains("nameserver 10.8.0.1"))
        try restore(root)
        XCTAssertNil(try FileSystem.status(root.path + "/etc/resolv.conf"))
        XCTAssertEqual(try root.snapshot(), before)
    }

    func testNamespaceDirectoriesAreCreatedAndRemovedAgain() throws {
        let root = try TemporaryRoot()
        try root.write("/etc/resolv.conf", "nameserver 192.168.1.1\n")
        let before = try root.snapshot()

        let applied = try apply(root, .namespaceResolvConf(namespace: "blue"))
        XCTAssertEqual(applied.path, root.path + "/etc/netns/blue/resolv.conf")
        XCTAssertEqual(try FileSystem.status(root.path + "/etc/netns/blue")?.kind, .directory)
        XCTAssertTrue(try XCTUnwrap(try root.read("/etc/netns/blue/resolv.conf")).contains("nameserver 10.8.0.1"))
        XCTAssertEqual(try root.read("/etc/resolv.conf"), "nameserver 192.168.1.1\n", "the host's file is not touched")

        try restore(root)
        XCTAssertNil(try FileSystem.status(root.path + "/etc/netns"))
        XCTAssertEqual(try root.snapshot(), before)
    }

    func testExistingNamespaceDirectoryAndFileAreKept() throws {
        let root = try TemporaryRoot()
        try FileSystem.makeDirectory(root.path + "/etc/netns", mode: 0o755)
        try FileSystem.makeDirectory(root.path + "/etc/netns/blue", mode: 0o700)
        try root.write("/etc/netns/blue/resolv.conf", "nameserver 10.1.1.1\n", mode: 0o600)
        try root.write("/etc/netns/blue/hosts", "10.1.1.2 other\n")
        let before = try root.snapshot()
        _ = try apply(root, .namespaceResolvConf(namespace: "blue"))
        try restore(root)
        XCTAssertEqual(try root.snapshot(), before)
    }

    func testRestoreLeavesADirectorySomeoneElseFilledMeanwhile() throws {
        let root = try TemporaryRoot()
        _ = try apply(root, .namespaceResolvConf(namespace: "blue"))
        try root.write("/etc/netns/blue/hosts", "10.1.1.2 other\n")
        try restore(root)
        XCTAssertNil(try FileSystem.status(root.path + "/etc/netns/blue/resolv.conf"))
        XCTAssertEqual(try root.read("/etc/netns/blue/hosts"), "10.1.1.2 other\n")
        XCTAssertNil(try FileSystem.status(root.stateDirectory + "/tg0.dns"))
    }

    func testRestoreIsIdempotent() throws {
        let root = try TemporaryRoot()
        try root.write("/etc/resolv.conf", "nameserver 192.168.1.1\n")
        let before = try root.snapshot()
        try restore(root) // nothing applied: nothing to do
        _ = try apply(root, .resolvConf)
        try restore(root)
        try restore(root)
        XCTAssertEqual(try root.snapshot(), before)
    }

    // MARK: Crashes

    func testRestoreAfterACrashFromTheFilesAlone() throws {
        let root = try TemporaryRoot()
        try root.write("/etc/resolv.conf", "nameserver 192.168.1.1\nsearch home.lan\n", mode: 0o664)
        let before = try root.snapshot()
        // The process applies and "dies": nothing of it survives but the files.
        do { _ = try apply(root, .namespaceResolvConf(namespace: "blue")) }
        try root.write("/etc/resolv.conf", "nameserver 192.168.1.1\nsearch home.lan\n", mode: 0o664) // untouched anyway
        try restore(root)
        XCTAssertEqual(try root.snapshot(), before)
    }

    func testCrashBetweenJournalAndChangeIsRestored() throws {
        // Each case: the journal is written, then the change stops halfway and the process dies.
        for stage in ["journal only", "partial in-place write", "temporary file left", "replaced by a link",
                      "replaced by another writer", "directories only"] {
            let root = try TemporaryRoot()
            // 0664: a file created with it under the usual umask (022) would lose g+w, so the mode must be set.
            try root.write("/etc/resolv.conf", "nameserver 192.168.1.1\n", mode: 0o664)
            let before = try root.snapshot()
            let path = root.path + "/etc/resolv.conf"
            let status = try XCTUnwrap(try FileSystem.status(path))
            var journal = DNSJournal(tunnel: "tg0", backend: .resolvConf, path: path,
                                     original: .file(bytes: Array("nameserver 192.168.1.1\n".utf8),
                                                     permissions: 0o664, owner: status.owner, group: status.group))
            if stage == "directories only" {
                journal = DNSJournal(tunnel: "tg0", backend: .namespaceResolvConf(namespace: "n"),
                                     path: root.path + "/etc/netns/n/resolv.conf",
                                     createdDirectories: [root.path + "/etc/netns", root.path + "/etc/netns/n"],
                                     original: .absent)
            }
            try FileSystem.writeAtomically(root.stateDirectory + "/tg0.dns", journal.encoded)
            switch stage {
            case "partial in-place write":
                try root.write("/etc/resolv.conf", "nameserver 10.8.0.1\n.168.1.1\n", mode: 0o664)
            case "temporary file left":
                try root.write("/etc/resolv.conf.tunnelgate-tmp", "nameserver 10.8", mode: 0o644)
            case "replaced by a link":
                try FileSystem.removeFile(path)
                try FileSystem.createSymbolicLink(at: path, target: Array("/run/elsewhere".utf8))
            case "replaced by another writer":
                try FileSystem.removeFile(path)
                try root.write("/etc/resolv.conf", "nameserver 10.8.0.1\n", mode: 0o644)
            case "directories only":
                try FileSystem.makeDirectory(root.path + "/etc/netns", mode: 0o755)
                try FileSystem.makeDirectory(root.path + "/etc/netns/n", mode: 0o755)
            default:
                break
            }
            try restore(root)
            XCTAssertEqual(try root.snapshot(), before, stage)
        }
    }

    func testOwnerAndSpecialModeBitsComeBack() throws {
        // Root only (the project's tests run as root): a file of another owner, replaced meanwhile.
        let root = try TemporaryRoot()
        try root.write("/etc/resolv.conf", "nameserver 192.168.1.1\n", mode: 0o2640)
        XCTAssertEqual(chown(root.path + "/etc/resolv.conf", 1234, 5678), 0, "needs root")
        let before = try root.snapshot()
        _ = try apply(root, .resolvConf)
        try FileSystem.removeFile(root.path + "/etc/resolv.conf")
        try root.write("/etc/resolv.conf", "nameserver 10.8.0.1\n", mode: 0o644)
        try restore(root)
        XCTAssertEqual(try root.snapshot(), before)
        let status = try XCTUnwrap(try FileSystem.status(root.path + "/etc/resolv.conf"))
        XCTAssertEqual([status.owner, status.group, status.permissions], [1234, 5678, 0o2640])
    }

    // MARK: Refusals

    func testRefusesWhenAJournalOfTheTunnelExists() throws {
        let root = try TemporaryRoot()
        _ = try apply(root, .resolvConf)
        XCTAssertThrowsError(try apply(root, .resolvConf)) { error in
            guard case .journalExists(let path)? = error as? DNSConfigError else { return XCTFail("\(error)") }
            XCTAssertEqual(path, root.stateDirectory + "/tg0.dns")
        }
        try restore(root)
    }

    func testRefusesAFileAnotherTunnelOwns() throws {
        let root = try TemporaryRoot()
        try root.write("/etc/resolv.conf", "nameserver 192.168.1.1\n")
        let before = try root.snapshot(excludingState: true)
        _ = try apply(root, .resolvConf, tunnel: "a")
        XCTAssertThrowsError(try apply(root, .resolvConf, tunnel: "b")) { error in
            guard case .fileInUse(_, let tunnel)? = error as? DNSConfigError else { return XCTFail("\(error)") }
            XCTAssertEqual(tunnel, "a")
            XCTAssertTrue("\(error)".contains("managed by tunnel a"))
        }
        try restore(root, tunnel: "a")
        XCTAssertEqual(try root.snapshot(excludingState: true), before)
    }

    func testAFailedChangeIsRolledBack() throws {
        let root = try TemporaryRoot()
        try root.write("/etc/netns", "not a directory\n") // mkdir /etc/netns/blue fails with ENOTDIR
        let before = try root.snapshot()
        XCTAssertThrowsError(try apply(root, .namespaceResolvConf(namespace: "blue"))) { error in
            XCTAssertTrue("\(error)".contains("mkdir(\(root.path)/etc/netns/blue) failed: Not a directory (20)"), "\(error)")
        }
        XCTAssertEqual(try root.snapshot(), before)
    }

    func testADirectoryIsNotReplaced() throws {
        let root = try TemporaryRoot()
        try FileSystem.makeDirectory(root.path + "/etc/resolv.conf", mode: 0o755)
        let before = try root.snapshot()
        XCTAssertThrowsError(try apply(root, .resolvConf)) { error in
            XCTAssertEqual("\(error)", "\(root.path)/etc/resolv.conf is a directory, not a regular file or a symbolic link; it is left alone")
        }
        XCTAssertEqual(try root.snapshot(), before)
    }

    // MARK: Split DNS

    func testSplitDNSBindsTheForwarderAndPointsResolvConfAtIt() throws {
        let root = try TemporaryRoot()
        try root.write("/etc/resolv.conf", "nameserver 192.168.1.1\nnameserver 127.0.0.153\nsearch home.lan\n")
        let before = try root.snapshot()
        let settings = DNSSettings(servers: [IPAddress("10.8.0.1")!, IPAddress("fe80::53")!],
                                   matchDomains: ["corp.example"])
        // Port 0: this test needs no root and does not take port 53.
        var configurator = DNSConfigurator(paths: root.paths, backend: .resolvConf, forwarderPort: 0)
        configurator.forwarderAddress = IPAddress("127.0.0.153")!
        let applied = try configurator.apply(settings: settings, interfaceName: "tg0", interfaceIndex: 7,
                                             stateDirectory: root.stateDirectory, tunnelName: "tg0")
        let forwarder = try XCTUnwrap(applied.forwarder)
        XCTAssertFalse(forwarder.isRunning, "the engine starts it")
        guard case .ipv4([127, 0, 0, 153], let port) = forwarder.listenAddress else {
            return XCTFail("\(forwarder.listenAddress)")
        }
        XCTAssertNotEqual(port, 0, "bound before the file changed")
        let c = forwarder.configuration
        XCTAssertEqual(c.tunnelServers, [.ipv4([10, 8, 0, 1], port: 53), .ipv6(IPAddress("fe80::53")!.bytes, port: 53, scope: 7)])
        XCTAssertEqual(c.tunnelInterface, "tg0")
        XCTAssertEqual(c.fallbackServers, [.ipv4([192, 168, 1, 1], port: 53)], "the forwarder itself is no fallback")
        XCTAssertEqual(c.policy, SplitDNSPolicy(matchDomains: ["corp.example"]))
        let text = try XCTUnwrap(try root.read("/etc/resolv.conf"))
        XCTAssertTrue(text.hasSuffix("\nnameserver 127.0.0.153\nsearch corp.example home.lan\n"), text)
        XCTAssertTrue(try XCTUnwrap(try root.read("/state/tg0.dns")).contains("\nforwarder 127.0.0.153\n"))

        try forwarder.stop()
        try restore(root)
        XCTAssertEqual(try root.snapshot(), before)
    }

    func testABusyForwarderAddressFailsBeforeAnythingChanges() throws {
        let root = try TemporaryRoot()
        try root.write("/etc/resolv.conf", "nameserver 192.168.1.1\n")
        let before = try root.snapshot()
        let squatter = try FileDescriptor.socket(family: AF_INET, type: .datagram, nonBlocking: true)
        defer { squatter.close() }
        try squatter.bind(to: .ipv4([127, 0, 0, 153], port: 0))
        guard case .ipv4(_, let port)? = try squatter.localAddress() else { return XCTFail("no port") }
        let configurator = DNSConfigurator(paths: root.paths, backend: .resolvConf, forwarderPort: port)
        let settings = DNSSettings(servers: [IPAddress("10.8.0.1")!], matchDomains: ["corp.example"])
        XCTAssertThrowsError(try configurator.apply(settings: settings, interfaceName: "tg0", interfaceIndex: 7,
                                                    stateDirectory: root.stateDirectory, tunnelName: "tg0")) { error in
            XCTAssertEqual("\(error)", "the split-DNS forwarder cannot listen on 127.0.0.153:\(port): "
                           + "bind(127.0.0.153:\(port)) failed: Address already in use (98)")
        }
        XCTAssertEqual(try root.snapshot(), before)
    }
}
