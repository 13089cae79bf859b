@testable import Lab
import XCTest

final class SnapshotTests: XCTestCase {
    /// A tree like /proc/sys/net in a fresh temporary directory: a configured value is listed, the
    /// values the kernel changes on its own (the TCP Fast Open key, the conntrack count) are not.
    func testSysctlsLeaveOutWhatChangesOnItsOwn() throws {
        var template = Array("/tmp/lab-sysctls.XXXXXX".utf8CString)
        let made = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
        let root = try XCTUnwrap(made.map { String(cString: $0) })
        defer { FileSystemLite.removeTree(root) }
        XCTAssertEqual(mkdir("\(root)/ipv4", 0o755), 0)
        XCTAssertEqual(mkdir("\(root)/netfilter", 0o755), 0)
        FileSystemLite.write("\(root)/ipv4/ip_forward", "1\n")
        FileSystemLite.write("\(root)/ipv4/tcp_fastopen_key", "0e6b91d9-4b0ceee2-019f46b8-70c34092\n")
        FileSystemLite.write("\(root)/netfilter/nf_conntrack_count", "7\n")
        XCTAssertEqual(Snapshot.sysctls(under: root, key: "net"), ["net.ipv4.ip_forward = 1"])
    }
}

/// Files without Foundation (the test target imports only XCTest).
enum FileSystemLite {
    static func write(_ path: String, _ text: String) {
        guard let f = fopen(path, "w") else { return XCTFail("fopen \(path)") }
        fputs(text, f)
        fclose(f)
    }

    static func removeTree(_ root: String) {
        for file in ["ipv4/ip_forward", "ipv4/tcp_fastopen_key", "netfilter/nf_conntrack_count"] { unlink("\(root)/\(file)") }
        for dir in ["ipv4", "netfilter", ""] { rmdir("\(root)/\(dir)") }
    }
}
