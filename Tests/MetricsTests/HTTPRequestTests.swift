@testable import Metrics
import XCTest

final class HTTPRequestTests: XCTestCase {
    func parse(_ text: String) -> HTTPRequest.Parsed { HTTPRequest.parse(Array(text.utf8)[...]) }

    func testARequestIsAnsweredOnlyOnceItsHeadIsComplete() {
        XCTAssertEqual(parse(""), .incomplete)
        XCTAssertEqual(parse("GET /metrics HTTP/1.1\r\nHost: x\r\n"), .incomplete)
        let full = "GET /metrics?x=1 HTTP/1.1\r\nHost: x\r\n\r\n"
        XCTAssertEqual(parse(full + "GET / HTTP/1.1\r\n"),
                       .request(HTTPRequest(method: "GET", path: "/metrics", minorVersion: 1, keepAlive: true),
                                consumed: full.utf8.count))
    }

    func testKeepAliveFollowsTheVersionAndTheConnectionHeader() {
        func keepAlive(_ text: String) -> Bool? {
            if case .request(let r, _) = parse(text) { return r.keepAlive }
            return nil
        }
        XCTAssertEqual(keepAlive("GET / HTTP/1.1\r\n\r\n"), true)
        XCTAssertEqual(keepAlive("GET / HTTP/1.1\r\nConnection: Close\r\n\r\n"), false)
        XCTAssertEqual(keepAlive("GET / HTTP/1.0\r\n\r\n"), false)
        XCTAssertEqual(keepAlive("GET / HTTP/1.0\r\nconnection: keep-alive\r\n\r\n"), true)
        XCTAssertEqual(keepAlive("GET / HTTP/1.1\nHost: a\n\n"), true, "bare LF line ends are accepted")
        XCTAssertEqual(keepAlive("\r\nGET / HTTP/1.1\r\n\r\n"), true, "an empty line before the request line is ignored")
    }

    func testWhatIsNotASimpleRequestIsRefused() {
        XCTAssertEqual(parse("GET /metrics HTTP/2.0\r\n\r\n"), .invalid(status: 505))
        XCTAssertEqual(parse("GET /metrics\r\n\r\n"), .invalid(status: 400))
        XCTAssertEqual(parse("get /metrics HTTP/1.1\r\n\r\n"), .invalid(status: 400))
        XCTAssertEqual(parse("GET metrics HTTP/1.1\r\n\r\n"), .invalid(status: 400))
        XCTAssertEqual(parse("GET / HTTP/1.1\r\nno colon\r\n\r\n"), .invalid(status: 400))
        XCTAssertEqual(parse("GET / HTTP/1.1\r\nHost : x\r\n\r\n"), .invalid(status: 400), "no space before the colon")
        XCTAssertEqual(parse("POST / HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello"), .invalid(status: 400))
        XCTAssertEqual(parse("GET / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"), .invalid(status: 400))
        if case .request = parse("GET / HTTP/1.1\r\nContent-Length: 0\r\n\r\n") {} else { XCTFail("Content-Length: 0 is no body") }
    }
}
