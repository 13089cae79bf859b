import Foundation
import Glibc
import LinuxSystem
import XCTest

/// TrustedFile's walk over a real tree in /tmp, as root: files, directories and links made with the
/// modes and owners (chown to uid 65534) an attacker would leave, each refused or accepted with the
/// line a user sees. Requires root (chown); without it the tests fail, they are not skipped.
final class TrustedFileTests: XCTestCase {
    var root = ""
    let other: uid_t = 65534

    override func setUpWithError() throws {
        XCTAssertEqual(geteuid(), 0, "these tests chown files to uid 65534 and must run as root")
        var template = Array("/tmp/tunnelgate-trust.XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw SystemCallError("mkdtemp", .current) }
        root = String(cString: made)
    }

    override func tearDownWithError() throws {
        _ = try? FileManager.default.removeItem(atPath: root)
    }

    // MARK: Building the tree

    @discardableResult
    func file(_ name: String, _ text: String = "content\n", mode: mode_t = 0o600, owner: uid_t = 0) throws -> String {
        let path = "\(root)/\(name)"
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw SystemCallError("open(\(path))", .current) }
        _ = Array(text.utf8).withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        close(fd)
        try set(path, mode: mode, owner: owner)
        return path
    }

    @discardableResult
    func directory(_ name: String, mode: mode_t = 0o755, owner: uid_t = 0) throws -> String {
        let path = "\(root)/\(name)"
        guard mkdir(path, 0o700) == 0 else { throw SystemCallError("mkdir(\(path))", .current) }
        try set(path, mode: mode, owner: owner)
        return path
    }

    @discardableResult
    func link(_ name: String, to target: String, owner: uid_t = 0) throws -> String {
        let path = "\(root)/\(name)"
        guard symlink(target, path) == 0 else { throw SystemCallError("symlink(\(path))", .current) }
        guard lchown(path, owner, 0) == 0 else { throw SystemCallError("lchown(\(path))", .current) }
        return path
    }

    func set(_ path: String, mode: mode_t, owner: uid_t) throws {
        guard chown(path, owner, 0) == 0 else { throw SystemCallError("chown(\(path))", .current) }
        guard chmod(path, mode) == 0 else { throw SystemCallError("chmod(\(path))", .current) }
    }

    func refusal(_ path: String, expecting: TrustedFile.Expecting = .regularFile, trusting uid: uid_t = 0) -> String? {
        do {
            let f = try TrustedFile.open(path, expecting: expecting, trusting: uid)
            f.close()
            return nil
        } catch {
            return error.description
        }
    }

    func contents(_ f: TrustedFile) throws -> String {
        guard let bytes = try f.readAll(limit: 1 << 20) else { return "<too long>" }
        return String(decoding: bytes, as: UTF8.self)
    }

    // MARK: Accepted

    func testOwnerOnlyFileInTrustedDirectoriesOpensAndReadsFromTheDescriptor() throws {
        let path = try file("tg0.json", "{}\n", mode: 0o600)
        let f = try TrustedFile.open(path, trusting: 0)
        defer { f.close() }
        XCTAssertEqual(f.resolvedPath, path)
        XCTAssertEqual(f.status.kind, .regular)
        // Removed and replaced by another file: the descriptor still reads the one that was checked.
        unlink(path)
        try file("tg0.json", "replaced\n", mode: 0o666)
        XCTAssertEqual(try contents(f), "{}\n")
        XCTAssertEqual(String(decoding: try XCTUnwrap(try f.readAll(limit: 1 << 20)), as: UTF8.self), "{}\n", "read again from offset 0")
    }

    func testReadableByOthersIsNotTheWalksConcern() throws {
        // Secrets add owner-only on top; a config or library may be world-readable.
        XCTAssertNil(refusal(try file("lib.so", mode: 0o755)))
        XCTAssertNil(refusal(try file("tg0.json", mode: 0o644)))
    }

    func testTheStickyTmpAndARootOwnedEntryInItAreTrusted() throws {
        // $root itself is a root-owned 0700 directory in /tmp (1777): the way every scenario's $TG_TMP is.
        let st = try XCTUnwrap(try FileSystem.status("/tmp", followingSymbolicLinks: true))
        XCTAssertEqual(st.permissions, 0o1777, "/tmp is the sticky, world-writable directory this test relies on")
        XCTAssertNil(refusal(try file("a.json", mode: 0o644)))
    }

    func testASymbolicLinkInATrustedDirectoryIsFollowed() throws {
        try directory("etc", mode: 0o755)
        let target = try file("etc/real.conf", "real\n", mode: 0o600)
        let relative = try link("relative.conf", to: "etc/real.conf")
        let absolute = try link("absolute.conf", to: target)
        let chain = try link("chain.conf", to: "relative.conf")
        for path in [relative, absolute, chain] {
            let f = try TrustedFile.open(path, trusting: 0)
            defer { f.close() }
            XCTAssertEqual(f.resolvedPath, target, path)
            XCTAssertEqual(try contents(f), "real\n")
        }
        // A link to a directory on the way, and .. after it.
        try link("etc-link", to: "etc")
        let f = try TrustedFile.open("\(root)/etc-link/../etc/./real.conf", trusting: 0)
        defer { f.close() }
        XCTAssertEqual(f.resolvedPath, target)
    }

    func testARelativePathIsWalkedFromTheWorkingDirectoryAndItsAncestors() throws {
        try file("here.conf", mode: 0o600)
        let saved = FileManager.default.currentDirectoryPath
        XCTAssertEqual(chdir(root), 0)
        defer { _ = chdir(saved) }
        let f = try TrustedFile.open("here.conf", trusting: 0)
        defer { f.close() }
        XCTAssertEqual(f.resolvedPath, "\(root)/here.conf")
    }

    func testAnotherTrustedUserIsTrustedBesidesRoot() throws {
        let path = try file("theirs.conf", mode: 0o600, owner: other)
        XCTAssertNil(refusal(path, trusting: other))
        XCTAssertEqual(refusal(path, trusting: 0), "\(path): owned by another user (mode 0600, owner uid 65534); refusing it")
    }

    func testADirectoryCanBeExpected() throws {
        let path = try directory("state", mode: 0o700)
        let d = try TrustedFile.open(path, expecting: .directory, trusting: 0)
        defer { d.close() }
        XCTAssertEqual(d.status.kind, .directory)
        XCTAssertEqual(d.status.permissions, 0o700)
    }

    // MARK: Refused

    func testAGroupWritableFileIsRefused() throws {
        let path = try file("lib.so", mode: 0o775)
        XCTAssertEqual(refusal(path), "\(path): writable by its group (mode 0775, owner root); refusing it")
    }

    func testAWorldWritableFileIsRefused() throws {
        let path = try file("tg0.json", mode: 0o666)
        XCTAssertEqual(refusal(path), "\(path): writable by others (mode 0666, owner root); refusing it")
    }

    func testAFileInAnOtherWritableDirectoryIsRefusedNamingTheDirectory() throws {
        let open = try directory("open", mode: 0o777)
        let path = try file("open/tg0.json", mode: 0o600)
        XCTAssertEqual(refusal(path), "\(open): a directory writable by others, on the way to \(path) (mode 0777, owner root); refusing it")
        // Deeper: the directory is refused whatever lies below it.
        try directory("open/sub", mode: 0o755)
        let deeper = try file("open/sub/x.conf", mode: 0o600)
        XCTAssertEqual(refusal(deeper), "\(open): a directory writable by others, on the way to \(deeper) (mode 0777, owner root); refusing it")
        // Group-writable is as bad.
        let group = try directory("group", mode: 0o775)
        let inGroup = try file("group/tg0.json", mode: 0o600)
        XCTAssertEqual(refusal(inGroup), "\(group): a directory writable by its group, on the way to \(inGroup) (mode 0775, owner root); refusing it")
    }

    func testASymbolicLinkInAWorldWritableNonStickyDirectoryIsNotFollowed() throws {
        try directory("safe", mode: 0o755)
        let target = try file("safe/tg0.json", mode: 0o600)
        let open = try directory("open", mode: 0o777)
        let path = try link("open/tg0.json", to: target)
        XCTAssertEqual(refusal(path), "\(path): a symbolic link in \(open), a directory writable by others (mode 0777, owner root); refusing it")
        // A link elsewhere pointing into that directory: its target is walked the same way.
        try file("open/inner.json", mode: 0o600)
        let outer = try link("outer.json", to: "open/inner.json")
        XCTAssertEqual(refusal(outer), "\(open): a directory writable by others, on the way to \(outer) (mode 0777, owner root); refusing it")
    }

    func testInAStickyDirectoryOnlyRootsAndTheTrustedUsersEntriesAreTrusted() throws {
        let sticky = try directory("sticky", mode: 0o1777)
        let mine = try file("sticky/mine.conf", mode: 0o600)
        XCTAssertNil(refusal(mine), "root's file in a root-owned sticky directory")
        let theirs = try file("sticky/theirs.conf", mode: 0o600, owner: other)
        XCTAssertEqual(refusal(theirs), "\(theirs): owned by another user in the sticky directory \(sticky) (mode 0600, owner uid 65534); refusing it")
        XCTAssertNil(refusal(theirs, trusting: other), "the trusted user's own file there is fine")
        // A link someone else planted there is not followed, wherever it points.
        let planted = try link("sticky/planted.conf", to: mine, owner: other)
        XCTAssertEqual(refusal(planted), "\(planted): a symbolic link in the sticky directory \(sticky) (mode 0777, owner uid 65534); refusing it")
        let rootsLink = try link("sticky/roots.conf", to: mine, owner: 0)
        XCTAssertNil(refusal(rootsLink))
        // A directory someone else made in it.
        try directory("sticky/theirdir", mode: 0o755, owner: other)
        let below = "\(root)/sticky/theirdir/x.conf"
        XCTAssertEqual(refusal(below), "\(sticky)/theirdir: owned by another user in the sticky directory \(sticky) (mode 0755, owner uid 65534); refusing it")
        // A sticky directory that root does not own is just a writable directory.
        let foreignSticky = try directory("foreign-sticky", mode: 0o1777, owner: other)
        let inForeign = try file("foreign-sticky/x.conf", mode: 0o600)
        XCTAssertEqual(refusal(inForeign), "\(foreignSticky): a directory owned by another user, on the way to \(inForeign) (mode 1777, owner uid 65534); refusing it")
    }

    func testAFileOrDirectoryOfAnotherUserIsRefused() throws {
        let path = try file("theirs.json", mode: 0o644, owner: other)
        XCTAssertEqual(refusal(path), "\(path): owned by another user (mode 0644, owner uid 65534); refusing it")
        let home = try directory("home", mode: 0o755, owner: other)
        let inHome = try file("home/wg0.conf", mode: 0o600)
        XCTAssertEqual(refusal(inHome), "\(home): a directory owned by another user, on the way to \(inHome) (mode 0755, owner uid 65534); refusing it")
    }

    func testWhatIsNotARegularFileIsRefused() throws {
        let dir = try directory("dir", mode: 0o755)
        XCTAssertEqual(refusal(dir), "\(dir): not a regular file (a directory); refusing it")
        let fifo = "\(root)/fifo"
        XCTAssertEqual(mkfifo(fifo, 0o600), 0)
        XCTAssertEqual(refusal(fifo), "\(fifo): not a regular file (a device, socket or FIFO); refusing it", "and the open did not block")
        let f = try file("plain", mode: 0o600)
        XCTAssertEqual(refusal(f, expecting: .directory), "\(f): not a directory (a regular file); refusing it")
        XCTAssertEqual(refusal("\(f)/below"), "openat(\(f)/…) failed: Not a directory (20)")
    }

    func testMissingFilesAndLinkLoops() throws {
        XCTAssertEqual(refusal("\(root)/nothing.json"), "\(root)/nothing.json: no such file")
        XCTAssertThrowsError(try TrustedFile.open("\(root)/nothing/x.json")) { error in
            XCTAssertEqual(error as? TrustedFile.Failure, .notFound("\(root)/nothing"))
        }
        try link("dangling", to: "nowhere")
        XCTAssertEqual(refusal("\(root)/dangling"), "\(root)/nowhere: no such file")
        try link("a", to: "b")
        try link("b", to: "a")
        XCTAssertEqual(refusal("\(root)/a"), "\(root)/a: more than 40 symbolic links on the way to \(root)/a; refusing it")
    }

    func testReadSecretReadsExactlyTheFileIntoSecureMemory() throws {
        let path = try file("key", "0123456789\n", mode: 0o600)
        let f = try TrustedFile.open(path, trusting: 0)
        defer { f.close() }
        let secret = try XCTUnwrap(try f.readSecret(limit: 4096))
        XCTAssertEqual(secret.count, 11)
        XCTAssertEqual(secret.withUnsafeBytes { String(decoding: $0, as: UTF8.self) }, "0123456789\n")
        XCTAssertNil(try f.readSecret(limit: 10), "longer than the limit")
    }
}
