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

    func testSystemdResolvedNeedsTheLinkAndARunningResolved() throws {
        let root = try TemporaryRoot()
        try FileSystem.makeDirectory(root.path + "/run/systemd", mode: 0o755)
        try FileSystem.makeDirectory(root.path + "/run/systemd/resolve", mode: 0o755)
        let socketPath = root.paths.resolvedSocket

        // A regular resolv.conf: never resolved.
        try root.write("/etc/resolv.conf", "nameserver 127.0.0.53\n")
        XCTAssertEqual(try DNSBackendKind.detect(paths: root.paths), .resolvConf)

        // The link, but nothing listening.
        try FileSystem.removeFile(root.path + "/etc/resolv.conf")
        try FileSystem.createSymbolicLink(at: root.path + "/etc/resolv.conf",
                                          target: Array("../run/systemd/resolve/stub-resolv.conf".utf8))
        XCTAssertEqual(try DNSBackendKind.detect(paths: root.paths), .resolvConf)

        // resolved "running": its socket accepts connections.
        let listener = try FileDescriptor.socket(family: AF_UNIX, type: .stream, nonBlocking: false)
        defer { listener.close() }
        try listener.bind(to: .unix(socketPath))
        try listener.listen(backlog: 4)
        XCTAssertEqual(try DNSBackendKind.detect(paths: root.paths), .systemdResolved)

        // An absolute link into resolved's directory counts too.
        try FileSystem.removeFile(root.path + "/etc/resolv.conf")
        try FileSystem.createSymbolicLink(at: root.path + "/etc/resolv.conf",
                                          target: Array("/run/systemd/resolve/resolv.conf".utf8))
        XCTAssertEqual(try DNSBackendKind.detect(paths: root.paths), .systemdResolved)

        // A link elsewhere (resolvconf's) does not, resolved running or not.
        try FileSystem.removeFile(root.path + "/etc/resolv.conf")
        try FileSystem.createSymbolicLink(at: root.path + "/etc/resolv.conf",
                                          target: Array("/run/resolvconf/resolv.conf".utf8))
        XCTAssertEqual(try DNSBackendKind.detect(paths: root.paths), .resolvConf)
        // Nor one that only looks like it: /run/systemd/resolve-other/.
        try FileSystem.removeFile(root.path + "/etc/resolv.conf")
        try FileSystem.createSymbolicLink(at: root.path + "/etc/resolv.conf",
                                          target: Array("../run/systemd/resolve/../resolve-other/x".utf8))
        XCTAssertEqual(try DNSBackendKind.detect(paths: root.paths), .resolvConf)
    }

    func testLexicalResolution() {
        XCTAssertEqual(DNSBackendKind.lexicallyResolved("../run/systemd/resolve/stub-resolv.conf", relativeTo: "/etc"),
                       "/run/systemd/resolve/stub-resolv.conf")
        XCTAssertEqual(DNSBackendKind.lexicallyResolved("/a/./b/../c", relativeTo: "/etc"), "/a/c")
        XCTAssertEqual(DNSBackendKind.lexicallyResolved("../../../x", relativeTo: "/etc"), "/x")
    }
}
