import Glibc
import LinuxSystem
import XCTest
@testable import DNSConfig

final class DNSBackendDetectionTests: XCTestCase {
    func testDescriptions() {
        XCTAssertEqual(DNSBackendKind.systemdResolved.description, "systemd-resolved")
        XCTAssertEqual(DNSBackendKind.namespaceResolvConf(namespace: "blue").description,
                       "netns resolv.conf (/etc/netns/blue/resolv.conf)")
        XCTAssertEqual(DNSBackendKind.resolvConf.description, "resolv.conf (/etc/resolv.conf)")
    }

    func testNamedNamespaceIsFoundByItsInode() throws {
        let root = try TemporaryRoot()
        try root.write("/proc-thread-ns", "")
        try FileSystem.makeDirectory(root.path + "/run/netns", mode: 0o755)
        try root.write("/run/netns/red", "")
        XCTAssertEqual(try DNSBackendKind.detect(paths: root.paths), .resolvConf)
        // `ip netns add` bind-mounts the namespace at /run/netns/NAME: same device and inode.
        XCTAssertEqual(link(root.path + "/proc-thread-ns", root.path + "/run/netns/blue"), 0)
        XCTAssertEqual(try DNSBackendKind.detect(paths: root.paths), .namespaceResolvConf(namespace: "blue"))
    }

    func testTheRealNamespaceFileIsReadable() throws {
        // This thread's namespace has an inode; with no /run/netns under the root it has no name.
        let root = try TemporaryRoot()
        let paths = DNSPaths(root: root.path)
        XCTAssertNotNil(try FileSystem.status(paths.networkNamespace, followingSymbolicLinks: true))
        XCTAssertEqual(try DNSBackendKind.detect(paths: paths), .resolvConf)
    }

    func testWhichResolvConfSaysSystemdResolved() throws {
        let root = try TemporaryRoot()
        let path = root.path + "/etc/resolv.conf"
        func says() throws -> String? { try DNSBackendKind.resolvConfNamesResolved(path, linkDirectory: "/etc") }
        func link(_ target: String) throws {
            _ = try FileSystem.removeFile(path)
            try FileSystem.createSymbolicLink(at: path, target: Array(target.utf8))
        }
        XCTAssertNil(try says(), "no file")
        try root.write("/etc/resolv.conf", "nameserver 10.0.0.1\n")
        XCTAssertNil(try says())
        try root.write("/etc/resolv.conf", "# stub\nnameserver 127.0.0.53\noptions edns0 trust-ad\nsearch .\n")
        XCTAssertEqual(try says(), "a file whose only nameserver is 127.0.0.53 (systemd-resolved's stub)")
        try root.write("/etc/resolv.conf", "nameserver 127.0.0.54\nnameserver 127.0.0.53\nnameserver 127.0.0.53\n")
        XCTAssertEqual(try says(), "a file whose only nameserver is 127.0.0.53 and 127.0.0.54 (systemd-resolved's stub)")
        try root.write("/etc/resolv.conf", "nameserver 127.0.0.53\nnameserver 192.168.1.1\n")
        XCTAssertNil(try says(), "another server beside the stub: not only resolved")
        try root.write("/etc/resolv.conf", "# nameserver 127.0.0.53\n")
        XCTAssertNil(try says())

        try link("../run/systemd/resolve/stub-resolv.conf")
        XCTAssertEqual(try says(), "a symbolic link to ../run/systemd/resolve/stub-resolv.conf", "dangling here, still resolved's")
        try link("/run/systemd/resolve/resolv.conf")
        XCTAssertEqual(try says(), "a symbolic link to /run/systemd/resolve/resolv.conf")
        // A link elsewhere (resolvconf's) does not, nor one that only looks like it.
        try link("/run/resolvconf/resolv.conf")
        XCTAssertNil(try says())
        try link("../run/systemd/resolve/../resolve-other/x")
        XCTAssertNil(try says())
        // A link elsewhere to a file that lists only the stub: its contents say resolved.
        try root.write("/stub", "nameserver 127.0.0.53\n")
        try link(root.path + "/stub")
        XCTAssertEqual(try says(), "a file whose only nameserver is 127.0.0.53 (systemd-resolved's stub)")
        // The namespace's own file: a relative link is read from /etc/netns/NAME.
        XCTAssertEqual(try DNSBackendKind.resolvConfNamesResolved(root.path + "/stub", linkDirectory: "/etc/netns/blue"),
                       "a file whose only nameserver is 127.0.0.53 (systemd-resolved's stub)")
        try link("../../../run/systemd/resolve/stub-resolv.conf")
        XCTAssertEqual(try DNSBackendKind.resolvConfNamesResolved(path, linkDirectory: "/etc/netns/blue"),
                       "a symbolic link to ../../../run/systemd/resolve/stub-resolv.conf")
        try link("../run/systemd/resolve/stub-resolv.conf")
        XCTAssertNil(try DNSBackendKind.resolvConfNamesResolved(path, linkDirectory: "/etc/netns/blue"),
                     "from /etc/netns/blue that is /etc/netns/run/…")
    }

    /// Every row of the decision once a resolv.conf said resolved.
    func testDecision() throws {
        let silent = ResolvedPresence.silent(SystemBusError("connect", .local(.noSuchEntry)))
        let host = DNSBackendKind.ResolvedEvidence(path: "/etc/resolv.conf", description: "a file", isNamespaceFile: false)
        let own = DNSBackendKind.ResolvedEvidence(path: "/etc/netns/blue/resolv.conf", description: "a link", isNamespaceFile: true)
        func decide(_ named: String?, _ evidence: DNSBackendKind.ResolvedEvidence,
                    _ presence: ResolvedPresence) -> Result<DNSBackendKind, DNSConfigError> {
            Result { () throws(DNSConfigError) in
                try DNSBackendKind.decide(namedNamespace: named, evidence: evidence, resolved: presence)
            }
        }
        func kind(_ r: Result<DNSBackendKind, DNSConfigError>) -> String {
            switch r {
            case .success(let kind): "\(kind)"
            case .failure(.resolvedNotAnswering(let path, _, _)): "not answering: \(path)"
            case .failure(.resolvedInAnotherNamespace(let path, _, let pid)): "elsewhere: \(path) \(pid.map(String.init) ?? "?")"
            case .failure(let e): "\(e)"
            }
        }
        // The host (no named namespace).
        XCTAssertEqual(kind(decide(nil, host, .answers(.same))), "systemd-resolved")
        XCTAssertEqual(kind(decide(nil, host, .answers(.unknown))), "systemd-resolved")
        XCTAssertEqual(kind(decide(nil, host, .answers(.other(pid: 9)))), "elsewhere: /etc/resolv.conf 9")
        XCTAssertEqual(kind(decide(nil, host, silent)), "not answering: /etc/resolv.conf")
        // A named namespace that sees the host's resolv.conf: a resolved elsewhere, or none, does not serve it.
        XCTAssertEqual(kind(decide("blue", host, .answers(.same))), "systemd-resolved")
        XCTAssertEqual(kind(decide("blue", host, .answers(.unknown))), "netns resolv.conf (/etc/netns/blue/resolv.conf)")
        XCTAssertEqual(kind(decide("blue", host, .answers(.other(pid: 9)))), "netns resolv.conf (/etc/netns/blue/resolv.conf)")
        XCTAssertEqual(kind(decide("blue", host, silent)), "netns resolv.conf (/etc/netns/blue/resolv.conf)")
        // A named namespace whose own resolv.conf is resolved's: resolved must answer, here.
        XCTAssertEqual(kind(decide("blue", own, .answers(.same))), "systemd-resolved")
        XCTAssertEqual(kind(decide("blue", own, silent)), "not answering: /etc/netns/blue/resolv.conf")
        XCTAssertEqual(kind(decide("blue", own, .answers(.other(pid: 9)))), "netns resolv.conf (/etc/netns/blue/resolv.conf)")
    }

    /// resolv.conf says resolved, and the bus is real: nothing listening, a
    /// bus without resolved, a bus where org.freedesktop.resolve1 answers
    /// from this namespace, from another one, from a pid this /proc lacks.
    func testDetectionAsksTheSystemBus() throws {
        let root = try TemporaryRoot()
        let paths = root.paths
        try root.write("/proc-thread-ns", "")
        try FileSystem.makeDirectory(root.path + "/run/dbus", mode: 0o755)
        try FileSystem.createSymbolicLink(at: root.path + "/etc/resolv.conf",
                                          target: Array("../run/systemd/resolve/stub-resolv.conf".utf8))
        func detected() -> String {
            do throws(DNSConfigError) {
                return "\(try DNSBackendKind.detect(paths: paths))"
            } catch {
                return "\(error)"
            }
        }
        // No bus at all: a clear error, naming the file, how it says resolved, and what failed.
        XCTAssertEqual(detected(), "\(root.path)/etc/resolv.conf is a symbolic link to ../run/systemd/resolve/stub-resolv.conf, "
            + "so systemd-resolved manages DNS here, but it does not answer on the system bus (connect to the D-Bus bus "
            + "\(paths.systemBusAddress) failed: \(Errno.noSuchEntry)); start systemd-resolved, or replace "
            + "\(root.path)/etc/resolv.conf with a file of your own (Tunnelgate does not write over a resolv.conf that resolved manages)")

        let daemon = try TestBusDaemon(socketPath: root.path + "/run/dbus/system_bus_socket")
        XCTAssertTrue(detected().contains("org.freedesktop.DBus.Error.ServiceUnknown"), detected())

        let resolved = try TestPeer(address: daemon.address, name: ResolvedClient.service)
        defer { resolved.close() }
        // Its pid's namespace file is not there: cannot tell, so the host's resolved it is.
        XCTAssertEqual(detected(), "systemd-resolved")
        let theirs = root.path + "/proc/\(getpid())/ns/net"
        for directory in ["/proc", "/proc/\(getpid())", "/proc/\(getpid())/ns"] {
            try FileSystem.makeDirectory(root.path + directory, mode: 0o755)
        }
        XCTAssertEqual(Glibc.link(root.path + "/proc-thread-ns", theirs), 0)
        XCTAssertEqual(detected(), "systemd-resolved")
        _ = try FileSystem.removeFile(theirs)
        try root.write("/proc/\(getpid())/ns/net", "")
        XCTAssertTrue(detected().contains("runs in another network namespace"), detected())
        XCTAssertTrue(detected().contains("(pid \(getpid()))"), detected())

        // A named namespace: the host's resolved does not serve it.
        try FileSystem.makeDirectory(root.path + "/run/netns", mode: 0o755)
        XCTAssertEqual(Glibc.link(root.path + "/proc-thread-ns", root.path + "/run/netns/blue"), 0)
        XCTAssertEqual(detected(), "netns resolv.conf (/etc/netns/blue/resolv.conf)")
        // Unless the namespace's own resolv.conf is resolved's and resolved runs there.
        try FileSystem.makeDirectory(root.path + "/etc/netns", mode: 0o755)
        try FileSystem.makeDirectory(root.path + "/etc/netns/blue", mode: 0o755)
        try FileSystem.createSymbolicLink(at: root.path + "/etc/netns/blue/resolv.conf",
                                          target: Array("../../../run/systemd/resolve/stub-resolv.conf".utf8))
        XCTAssertEqual(detected(), "netns resolv.conf (/etc/netns/blue/resolv.conf)")
        _ = try FileSystem.removeFile(theirs)
        XCTAssertEqual(Glibc.link(root.path + "/proc-thread-ns", theirs), 0)
        XCTAssertEqual(detected(), "systemd-resolved")
        // A namespace file of its own that is not resolved's decides, whatever /etc/resolv.conf says.
        try FileSystem.removeFile(root.path + "/etc/netns/blue/resolv.conf")
        try root.write("/etc/netns/blue/resolv.conf", "nameserver 10.0.0.1\n")
        XCTAssertEqual(detected(), "netns resolv.conf (/etc/netns/blue/resolv.conf)")
        try FileSystem.removeFile(root.path + "/etc/netns/blue/resolv.conf")
        try root.write("/etc/netns/blue/resolv.conf", "nameserver 127.0.0.53\n")
        XCTAssertEqual(detected(), "systemd-resolved")
        resolved.close()
        XCTAssertTrue(detected().hasPrefix("\(root.path)/etc/netns/blue/resolv.conf is a file whose only nameserver"), detected())
    }

    func testLexicalResolution() {
        XCTAssertEqual(DNSBackendKind.lexicallyResolved("../run/systemd/resolve/stub-resolv.conf", relativeTo: "/etc"),
                       "/run/systemd/resolve/stub-resolv.conf")
        XCTAssertEqual(DNSBackendKind.lexicallyResolved("/a/./b/../c", relativeTo: "/etc"), "/a/c")
        XCTAssertEqual(DNSBackendKind.lexicallyResolved("../../../x", relativeTo: "/etc"), "/x")
    }
}
