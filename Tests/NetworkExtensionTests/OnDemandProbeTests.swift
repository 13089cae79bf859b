import Foundation
import LinuxSystem
@testable import NetworkExtension
import XCTest

/// A probeURL's GET: the request as sent, the status line as read, and the outcomes a real socket gives.
final class OnDemandProbeTests: XCTestCase {
    func testRequest() {
        let url = URL(string: "http://probe.example:8080/check?x=1")!
        XCTAssertEqual(String(decoding: TunnelgateOnDemandProbe.request(url, host: "probe.example"), as: UTF8.self),
                       "GET /check?x=1 HTTP/1.1\r\nHost: probe.example:8080\r\nUser-Agent: tunnelgate-on-demand\r\nAccept: */*\r\nConnection: close\r\n\r\n")
        let bare = URL(string: "http://[2001:db8::1]")!
        XCTAssertTrue(String(decoding: TunnelgateOnDemandProbe.request(bare, host: "2001:db8::1"), as: UTF8.self)
            .hasPrefix("GET / HTTP/1.1\r\nHost: [2001:db8::1]\r\n"))
    }

    func testStatusLine() {
        func code(_ text: String) -> Int?? { TunnelgateOnDemandProbe.statusCode(in: Array(text.utf8)) }
        XCTAssertEqual(code("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n"), .some(200))
        XCTAssertEqual(code("HTTP/1.0 503 Service Unavailable\r\n"), .some(503))
        XCTAssertEqual(code("HTTP/1.1 204\r\n"), .some(204))
        XCTAssertEqual(code("HTTP/1.1 20"), .none, "incomplete: read on")
        XCTAssertEqual(code("SSH-2.0-OpenSSH\r\n"), .some(nil), "not HTTP")
        XCTAssertEqual(code("HTTP/1.1 2000 OK\r\n"), .some(nil))
        XCTAssertEqual(TunnelgateOnDemandProbe.statusCode(in: [UInt8](repeating: 0x41, count: TunnelgateOnDemandProbe.maximumHeader)), .some(nil),
                       "a first line longer than the limit is not read on")
        XCTAssertTrue(TunnelgateOnDemandProbe.Outcome.status(200).matches)
        XCTAssertFalse(TunnelgateOnDemandProbe.Outcome.status(204).matches, "only 200 OK matches")
    }

    /// Real sockets on the loopback link: a refused connection, a server's answer, a name nobody knows.
    func testFetchOnLoopback() throws {
        guard ProcessControl.effectiveUserID == 0 else { throw XCTSkip("SO_BINDTODEVICE needs root") }
        let probe = TunnelgateOnDemandProbe(interface: "lo", nameservers: [])
        let listener = try FileDescriptor.socket(family: AF_INET, type: .stream, nonBlocking: false)
        defer { listener.close() }
        try listener.bind(to: .ipv4([127, 0, 0, 1], port: 0))
        try listener.listen(backlog: 4)
        let port = try XCTUnwrap(try listener.localAddress()?.port)
        let answered = expectation(description: "answered")
        Thread.detachNewThread {
            var buffer = [UInt8](repeating: 0, count: 1024)
            let c = Glibc.accept(listener.rawValue, nil, nil)
            _ = Glibc.read(c, &buffer, buffer.count)
            let answer = Array("HTTP/1.1 302 Found\r\nLocation: /login\r\n\r\n".utf8)
            _ = Glibc.write(c, answer, answer.count)
            Glibc.close(c)
            answered.fulfill()
        }
        XCTAssertEqual(probe.fetch(URL(string: "http://127.0.0.1:\(port)/x")!), .status(302))
        wait(for: [answered], timeout: 5)
        listener.close()
        guard case .failed(let refused) = probe.fetch(URL(string: "http://127.0.0.1:\(port)/x")!) else { return XCTFail("fetched from a closed port") }
        XCTAssertTrue(refused.contains("127.0.0.1: connect: ") && refused.contains("refused"), refused)
        guard case .failed(let unknown) = probe.fetch(URL(string: "http://nothing.invalid/")!) else { return XCTFail("resolved nothing.invalid") }
        XCTAssertTrue(unknown.hasPrefix("cannot resolve 'nothing.invalid': the network has no nameserver"), unknown)
        XCTAssertEqual(probe.fetch(URL(string: "ftp://127.0.0.1/")!), .failed("'ftp://127.0.0.1/' is not an http or https URL with a host"))
    }
}
