import Foundation
import Glibc
import LinuxSystem
import XCTest

/// SecureBytes as the kernel sees it (/proc/self/maps and smaps): its own mapping, locked and excluded
/// from core dumps, gone once released; and the process-wide protection a secret holder calls.
final class SecureBytesTests: XCTestCase {
    /// The smaps block of the mapping that contains `address`: its first line and VmFlags.
    func mapping(containing address: UInt) throws -> (line: String, flags: [String])? {
        let text = String(decoding: try XCTUnwrap(try FileSystem.read("/proc/self/smaps")), as: UTF8.self)
        var current: (line: String, range: ClosedRange<UInt>)?
        for line in text.split(separator: "\n") {
            let first = line.split(separator: " ", maxSplits: 1).first.map(String.init) ?? ""
            if first.contains("-"), !first.hasSuffix(":") {
                let bounds = first.split(separator: "-").compactMap { UInt($0, radix: 16) }
                current = bounds.count == 2 ? (String(line), bounds[0]...(bounds[1] - 1)) : nil
            } else if first == "VmFlags:", let c = current, c.range.contains(address) {
                return (c.line, line.split(separator: " ").dropFirst().map(String.init))
            }
        }
        return nil
    }

    func testItsMemoryIsItsOwnLockedMappingExcludedFromCoreDumps() throws {
        let secret = try SecureBytes(count: 32)
        XCTAssertEqual(secret.count, 32)
        XCTAssertTrue(secret.isLocked, "root (CAP_IPC_LOCK) can always lock")
        let address = secret.withUnsafeBytes { UInt(bitPattern: $0.baseAddress) }
        XCTAssertEqual(address % UInt(sysconf(Int32(_SC_PAGESIZE))), 0, "page-aligned: no neighbour shares its pages")
        XCTAssertTrue(secret.withUnsafeBytes { $0.allSatisfy { $0 == 0 } }, "starts zeroed")
        let found = try XCTUnwrap(try mapping(containing: address))
        XCTAssertTrue(found.flags.contains("dd"), "MADV_DONTDUMP: \(found)")
        XCTAssertTrue(found.flags.contains("lo"), "mlock: \(found)")
        XCTAssertFalse(found.line.contains("[heap]"), "not the heap: \(found.line)")
    }

    func testWipeZeroesAndReleaseUnmaps() throws {
        var secret: SecureBytes? = try SecureBytes(count: 5000)
        let address = secret!.withUnsafeMutableBytes { raw -> UInt in
            for i in raw.indices { raw[i] = 0xA5 }
            return UInt(bitPattern: raw.baseAddress)
        }
        XCTAssertTrue(secret!.withUnsafeBytes { $0.allSatisfy { $0 == 0xA5 } })
        XCTAssertNotNil(try mapping(containing: address + 4999), "5000 bytes: two pages, both its own")
        secret!.wipe()
        XCTAssertTrue(secret!.withUnsafeBytes { $0.allSatisfy { $0 == 0 } }, "wipe zeroes every byte")
        secret = nil
        let after = try mapping(containing: address)
        XCTAssertTrue(after == nil || !(after!.flags.contains("dd") && after!.flags.contains("lo")),
                      "released: the locked, dump-excluded mapping is gone (\(String(describing: after)))")
    }

    func testCopyingKeepsTheBytes() throws {
        let bytes: [UInt8] = [1, 2, 3, 4]
        let secret = try bytes.withUnsafeBytes { raw in try SecureBytes(copying: raw) }
        XCTAssertEqual(secret.withUnsafeBytes { Array($0) }, bytes)
    }

    func testRootIsNeverRefusedTheLock() {
        XCTAssertNil(SecureBytes.takeLockFailureNotice(), "no failed mlock in this process, so nothing to tell")
    }

    func testProtectSecretsMakesTheProcessNonDumpableWithNoCoreLimit() throws {
        try ProcessControl.protectSecrets()
        XCTAssertFalse(ProcessControl.isDumpable)
        let limits = String(decoding: try XCTUnwrap(try FileSystem.read("/proc/self/limits")), as: UTF8.self)
        let core = limits.split(separator: "\n").first { $0.hasPrefix("Max core file size") }.map(String.init) ?? ""
        XCTAssertEqual(core.split(separator: " ", omittingEmptySubsequences: true).dropFirst(4).prefix(2), ["0", "0"], core)
        try ProcessControl.protectSecrets()  // idempotent
    }
}
