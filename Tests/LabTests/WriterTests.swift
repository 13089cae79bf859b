import Lab
import XCTest

final class WriterTests: XCTestCase {
    let results = [
        TestResult(phase: "steady", name: "client reaches 198.18.30.30", passed: true, detail: "", seconds: 0.25),
        TestResult(phase: "restart", name: "no leaks <&> \"quoted\"", passed: false,
                   detail: "leak: icmp 10.231.0.2 -> 198.18.30.30\nsecond line\u{1}", seconds: 1.5),
    ]

    func testTAP() {
        XCTAssertEqual(TAPWriter.render(scenario: "leaks.sh", results: results), """
        TAP version 13
        # leaks.sh
        1..2
        ok 1 - [steady] client reaches 198.18.30.30
        not ok 2 - [restart] no leaks <&> "quoted"
          ---
          phase: "restart"
          seconds: 1.5
          detail: |
            leak: icmp 10.231.0.2 -> 198.18.30.30
            second line\u{1}
          ...

        """)
    }

    func testJUnitEscapesAndCounts() {
        let xml = JUnitWriter.render(scenario: "Examples/lab/scenarios/leaks.sh", results: results, timestamp: "2025-01-01T00:00:00Z", hostname: "h")
        XCTAssertTrue(xml.hasPrefix("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"tunnelgate-lab\" tests=\"2\" failures=\"1\" errors=\"0\" time=\"1.750\">\n"))
        XCTAssertTrue(xml.contains("<testcase classname=\"leaks.steady\" name=\"client reaches 198.18.30.30\" time=\"0.250\"/>"))
        XCTAssertTrue(xml.contains("<testcase classname=\"leaks.restart\" name=\"no leaks &lt;&amp;&gt; &quot;quoted&quot;\" time=\"1.500\">"))
        XCTAssertTrue(xml.contains("<failure message=\"leak: icmp 10.231.0.2 -&gt; 198.18.30.30\" type=\"assertion\">leak: icmp 10.231.0.2 -&gt; 198.18.30.30\nsecond line\u{FFFD}</failure>"))
        XCTAssertTrue(xml.hasSuffix("  </testsuite>\n</testsuites>\n"))
    }

    func testResultsRoundTrip() {
        let text = results.map(\.jsonLine).joined(separator: "\n") + "\n{\"phase\": trunc"
        XCTAssertEqual(TestResult.parse(lines: text), results)
    }

    func testSnapshotDifference() {
        let a = Snapshot.parse("# tunnelgate-lab snapshot: a\n### routes ipv4\nr1\nr2\n### sysctl\nx = 0\n")
        let b = Snapshot.parse("# tunnelgate-lab snapshot: b\n### routes ipv4\nr2\nr3\n### sysctl\nx = 0\n")
        XCTAssertEqual(a.difference(to: b), ["### routes ipv4", "-r1", "+r3"])
        XCTAssertEqual(a.difference(to: a), [])
        XCTAssertEqual(Snapshot.parse(a.text), a)
    }
}
