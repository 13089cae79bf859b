import Foundation
import Glibc
import LinuxSystem
@testable import NetworkExtension
import TunnelgateSecrets
import XCTest

/// The secret store in a directory of its own under /tmp, attacked as an attacker would: names that
/// climb out, a link planted at a secret's name, files and directories others can read or write, another
/// user's file, an oversized file.
final class SecretStoreTests: XCTestCase {
    var root = ""
    var store: SecretStore!

    override func setUpWithError() throws {
        root = NSTemporaryDirectory() + "tunnelgate-secrets-\(getpid())-\(UUID().uuidString)"
        XCTAssertEqual(mkdir(root, 0o755), 0)
        store = SecretStore(directory: root + "/etc/tunnelgate/secrets")
    }

    override func tearDown() {
        try? FileManager.default.removeItem(atPath: root)
    }

    func add(_ name: String, _ text: String, replacing: Bool = false) throws {
        try Array(text.utf8).withUnsafeBytes { raw in try store.add(name, secret: raw, replacing: replacing) }
    }

    func text(_ s: SecureBytes) -> String { s.withUnsafeBytes { String(decoding: $0, as: UTF8.self) } }

    func testAddReadListRemove() throws {
        XCTAssertEqual(try store.names(), [], "a store not created yet is empty")
        try add("office-vpn", "correct horse battery staple")
        try add("token.2", "t0k3n")
        XCTAssertEqual(text(try store.read("office-vpn")), "correct horse battery staple")
        XCTAssertEqual(try store.names(), ["office-vpn", "token.2"])

        let dir = try XCTUnwrap(try FileSystem.status(store.directory))
        XCTAssertEqual(dir.permissions & 0o777, 0o700)
        XCTAssertEqual(dir.owner, geteuid())
        let file = try XCTUnwrap(try FileSystem.status(store.directory + "/office-vpn"))
        XCTAssertEqual(file.permissions & 0o777, 0o600)
        XCTAssertEqual(file.owner, geteuid())
        XCTAssertEqual(FileSystem.list(store.directory).sorted(), ["office-vpn", "token.2"], "no temporary file left")

        try store.remove("token.2")
        XCTAssertEqual(try store.names(), ["office-vpn"])
        XCTAssertThrowsError(try store.remove("token.2")) { XCTAssertEqual($0 as? SecretStore.Failure, .notFound("token.2")) }
        XCTAssertThrowsError(try store.read("token.2")) { XCTAssertEqual($0 as? SecretStore.Failure, .notFound("token.2")) }
    }

    func testAddDoesNotReplaceUnlessAsked() throws {
        try add("a", "first")
        XCTAssertThrowsError(try add("a", "second")) { XCTAssertEqual($0 as? SecretStore.Failure, .exists("a")) }
        XCTAssertEqual(text(try store.read("a")), "first")
        try add("a", "third", replacing: true)
        XCTAssertEqual(text(try store.read("a")), "third")
        XCTAssertEqual(FileSystem.list(store.directory), ["a"])
    }

    func testNamesThatClimbOutAreRefused() throws {
        try add("inside", "x")
        for bad in ["", "../inside", "a/b", ".hidden", "-flag", "sp ace", "nul\u{0}", String(repeating: "n", count: 65), "ü"] {
            XCTAssertThrowsError(try add(bad, "x"), bad) { guard case .invalidName = $0 as? SecretStore.Failure else { return XCTFail("\($0)") } }
            XCTAssertThrowsError(try store.read(bad), bad)
        }
        XCTAssertEqual(FileSystem.list(store.directory), ["inside"])
    }

    func testReferences() throws {
        try add("office-vpn", "pw")
        let reference = TunnelgateSecretStore.reference(named: "office-vpn")
        XCTAssertEqual(String(decoding: reference, as: UTF8.self), "tunnelgate-secret:office-vpn")
        XCTAssertEqual(TunnelgateSecretStore.name(fromReference: reference), "office-vpn")
        XCTAssertEqual(text(try TunnelgateSecretStore.secret(forReference: reference, store: store)), "pw")
        for bad in [Data(), Data("office-vpn".utf8), Data("tunnelgate-secret:".utf8), Data("tunnelgate-secret:../x".utf8),
                    Data([0x74, 0x75, 0xFF])] {
            XCTAssertNil(TunnelgateSecretStore.name(fromReference: bad))
            XCTAssertThrowsError(try TunnelgateSecretStore.secret(forReference: bad, store: store))
        }
    }

    func testAPlantedLinkIsNotFollowed() throws {
        try add("real", "x")
        let elsewhere = root + "/elsewhere"
        try Data("not a secret of the store".utf8).write(to: URL(fileURLWithPath: elsewhere))
        chmod(elsewhere, 0o600)
        XCTAssertEqual(symlink(elsewhere, store.directory + "/linked"), 0)
        XCTAssertThrowsError(try store.read("linked")) { error in
            guard case .refused(let line) = error as? SecretStore.Failure else { return XCTFail("\(error)") }
            XCTAssertTrue(line.contains("symbolic link"), line)
        }
        // Adding over the link's name does not write through it.
        XCTAssertThrowsError(try add("linked", "y"))
        try add("linked", "y", replacing: true)
        XCTAssertEqual(try String(contentsOfFile: elsewhere, encoding: .utf8), "not a secret of the store")
        XCTAssertEqual(text(try store.read("linked")), "y")
    }

    func testFilesOthersCanReadOrWriteAreRefused() throws {
        try add("s", "x")
        let path = store.directory + "/s"
        chmod(path, 0o640)
        XCTAssertThrowsError(try store.read("s")) { XCTAssertTrue("\($0)".contains("chmod 600"), "\($0)") }
        chmod(path, 0o602)
        XCTAssertThrowsError(try store.read("s")) { XCTAssertTrue("\($0)".contains("writable by others"), "\($0)") }
        chmod(path, 0o600)
        XCTAssertEqual(text(try store.read("s")), "x")
        if geteuid() == 0 {
            XCTAssertEqual(chown(path, 65534, 65534), 0)
            XCTAssertThrowsError(try store.read("s")) { XCTAssertTrue("\($0)".contains("owned by another user"), "\($0)") }
        }
    }

    func testAStoreDirectoryOpenToOthersIsRefused() throws {
        try add("s", "x")
        chmod(store.directory, 0o755)
        XCTAssertThrowsError(try store.read("s")) { XCTAssertTrue("\($0)".contains("chmod 700"), "\($0)") }
        XCTAssertThrowsError(try store.names())
        XCTAssertThrowsError(try add("t", "y"))
        chmod(store.directory, 0o777)
        XCTAssertThrowsError(try store.read("s")) { XCTAssertTrue("\($0)".contains("writable by others"), "\($0)") }
        // A directory on the way that others can write is refused too (anyone could swap the store).
        chmod(store.directory, 0o700)
        chmod(root + "/etc", 0o777)
        XCTAssertThrowsError(try store.read("s")) { XCTAssertTrue("\($0)".contains("writable by others"), "\($0)") }
        chmod(root + "/etc", 0o755)
        XCTAssertEqual(text(try store.read("s")), "x")
    }

    func testOversizedSecrets() throws {
        let big = [UInt8](repeating: 0x41, count: SecretStore.maximumSize + 1)
        XCTAssertThrowsError(try big.withUnsafeBytes { try store.add("big", secret: $0) }) {
            guard case .tooLarge = $0 as? SecretStore.Failure else { return XCTFail("\($0)") }
        }
        try add("grown", "x")
        try Data(big).write(to: URL(fileURLWithPath: store.directory + "/grown"))
        chmod(store.directory + "/grown", 0o600)
        XCTAssertThrowsError(try store.read("grown")) { guard case .tooLarge = $0 as? SecretStore.Failure else { return XCTFail("\($0)") } }
    }

    func testErrorsNeverHoldTheSecret() throws {
        let secret = "s3cr3t-value-9271"
        try add("s", secret)
        chmod(store.directory + "/s", 0o644)
        var messages: [String] = []
        do { _ = try store.read("s") } catch { messages.append("\(error)") }
        do { try add("s", secret) } catch { messages.append("\(error)") }
        XCTAssertEqual(messages.count, 2)
        XCTAssertFalse(messages.contains { $0.contains(secret) })
    }
}
