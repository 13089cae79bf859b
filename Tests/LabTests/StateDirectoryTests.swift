@testable import Lab
import XCTest

/// Which of Tunnelgate's state directories a sweep may remove: only those whose namespace cookie is
/// one of the run's (an inode is reused, a cookie is not).
final class StateDirectoryTests: XCTestCase {
    func testCookieFile() {
        XCTAssertEqual(TunnelgateStateDirectories.cookie(fromNamespaceFile: Array("96541\n".utf8)), 96541)
        XCTAssertEqual(TunnelgateStateDirectories.cookie(fromNamespaceFile: Array("7".utf8)), 7)
        for text in ["", "\n", "96541\n\n", " 96541\n", "-1\n", "0x10\n", "96541 other\n", "١٢\n", "99999999999999999999999\n"] {
            XCTAssertNil(TunnelgateStateDirectories.cookie(fromNamespaceFile: Array(text.utf8)), text.debugDescription)
        }
    }

    func testBelonging() {
        let entries: [String: [UInt8]?] = [
            "net-4026532185": Array("105474\n".utf8),   // the run's client
            "net-4026532186": Array("105475\n".utf8),   // the run's router
            "net-4026532187": Array("200000\n".utf8),   // another namespace, maybe of a reused inode
            "net-4026532188": nil,                       // no namespace file: cannot be told, left
            "net-4026532189": Array("garbage".utf8),
            "planes": Array("105474\n".utf8),           // not a namespace's directory
            "net-": Array("105474\n".utf8),
            "net-12x": Array("105474\n".utf8),
        ]
        XCTAssertEqual(TunnelgateStateDirectories.belonging(to: [105474, 105475], entries: entries),
                       ["net-4026532185", "net-4026532186"])
        XCTAssertEqual(TunnelgateStateDirectories.belonging(to: [], entries: entries), [])
        XCTAssertEqual(TunnelgateStateDirectories.belonging(to: [200000], entries: entries), ["net-4026532187"])
    }
}
