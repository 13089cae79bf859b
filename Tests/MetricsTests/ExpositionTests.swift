import Foundation
@testable import Metrics
import XCTest

final class ExpositionTests: XCTestCase {
    let a = MetricFamily("test_a_total", .counter, "Counts a.")
    let b = MetricFamily("test_b", .gauge, "Measures b.")

    func testHelpAndTypeComeBeforeTheSamplesOfEachFamily() {
        var e = Exposition()
        e.add(a, [("tunnel", "tg0")], .unsigned(3))
        e.add(b, [], .double(0.5))
        XCTAssertEqual(e.render(), """
        # HELP test_a_total Counts a.
        # TYPE test_a_total counter
        test_a_total{tunnel="tg0"} 3
        # HELP test_b Measures b.
        # TYPE test_b gauge
        test_b 0.5

        """)
    }

    func testLabelValuesEscapeBackslashQuoteAndLineFeedOnly() {
        var e = Exposition()
        e.add(b, [("message", "a \\ b \"c\"\nd\te ü")], .unsigned(1))
        let sample = e.render().split(separator: "\n").last.map(String.init)
        XCTAssertEqual(sample, #"test_b{message="a \\ b \"c\"\nd"# + "\te ü\"} 1")
        XCTAssertEqual(Exposition.escapeLabelValue("C:\\dir\\"), #"C:\\dir\\"#)
        XCTAssertEqual(Exposition.escapeLabelValue("\r"), "\r", "only \\, \" and line feed are escaped")
    }

    func testHelpEscapesBackslashAndLineFeedButNotQuotes() {
        var e = Exposition()
        e.add(MetricFamily("test_c", .gauge, "one \\ two\nthree \"four\""), [], .unsigned(0))
        XCTAssertEqual(e.render().split(separator: "\n").first.map(String.init),
                       #"# HELP test_c one \\ two\nthree "four""#)
    }

    func testEachFamilyIsOneGroupHoweverItsSamplesWereInterleaved() {
        var e = Exposition()
        e.add(a, [("tunnel", "x")], .unsigned(1))
        e.add(b, [("tunnel", "x")], .unsigned(2))
        e.add(a, [("tunnel", "y")], .unsigned(3))
        e.add(b, [("tunnel", "y")], .unsigned(4))
        let lines = e.render().split(separator: "\n").map(String.init)
        XCTAssertEqual(lines, [
            "# HELP test_a_total Counts a.", "# TYPE test_a_total counter",
            #"test_a_total{tunnel="x"} 1"#, #"test_a_total{tunnel="y"} 3"#,
            "# HELP test_b Measures b.", "# TYPE test_b gauge",
            #"test_b{tunnel="x"} 2"#, #"test_b{tunnel="y"} 4"#,
        ])
        // Every HELP and TYPE line appears exactly once per family.
        XCTAssertEqual(lines.filter { $0.hasPrefix("# TYPE test_a_total") }.count, 1)
    }

    func testAGivenOrderIsKeptAndFamiliesWithoutSamplesAreLeftOut() {
        let c = MetricFamily("test_c", .gauge, "Never sampled.")
        var e = Exposition(order: [b, c, a])
        e.add(a, [], .unsigned(1))
        e.add(b, [], .unsigned(2))
        XCTAssertEqual(e.families.map(\.name), ["test_b", "test_a_total"])
        let text = e.render()
        XCTAssertFalse(text.contains("test_c"))
        XCTAssertLessThan(text.range(of: "# HELP test_b")!.lowerBound, text.range(of: "# HELP test_a_total")!.lowerBound)
        XCTAssertEqual(Exposition().render(), "")
    }

    func testADuplicateSeriesIsDroppedAndTheFirstKept() {
        var e = Exposition()
        e.add(b, [("tunnel", "x"), ("peer", "p")], .unsigned(1))
        e.add(b, [("tunnel", "x"), ("peer", "p")], .unsigned(2))
        e.add(b, [("tunnel", "x"), ("peer", "q")], .unsigned(3))
        XCTAssertEqual(e.render().split(separator: "\n").dropFirst(2).map(String.init),
                       [#"test_b{tunnel="x",peer="p"} 1"#, #"test_b{tunnel="x",peer="q"} 3"#])
    }

    func testValuesAreWrittenAsTheFormatReadsThem() {
        XCTAssertEqual(MetricValue.unsigned(.max).text, "18446744073709551615", "counters are exact past 2^53")
        XCTAssertEqual(MetricValue.signed(-5).text, "-5")
        XCTAssertEqual(MetricValue.double(3).text, "3")
        XCTAssertEqual(MetricValue.double(-0.25).text, "-0.25")
        XCTAssertEqual(MetricValue.double(1_700_000_000.5).text, "1700000000.5")
        XCTAssertEqual(MetricValue.double(.nan).text, "NaN")
        XCTAssertEqual(MetricValue.double(.infinity).text, "+Inf")
        XCTAssertEqual(MetricValue.double(-.infinity).text, "-Inf")
        XCTAssertEqual(Double(MetricValue.double(1e300).text), 1e300)
        XCTAssertEqual(MetricValue.bool(true).text, "1")
        XCTAssertEqual(MetricValue.bool(false).text, "0")
    }

    func testNamesFollowTheDataModel() {
        for valid in ["a", "_x", "tunnelgate_tunnel_status", "ns:rule_total", "A9"] {
            XCTAssertTrue(Exposition.isValidMetricName(valid), valid)
        }
        for invalid in ["", "9a", "a-b", "a b", "ä", "a.b"] { XCTAssertFalse(Exposition.isValidMetricName(invalid), invalid) }
        XCTAssertTrue(Exposition.isValidLabelName("tunnel"))
        XCTAssertTrue(Exposition.isValidLabelName("_a1"))
        for invalid in ["", "__name__", "a:b", "1a", "a-b"] { XCTAssertFalse(Exposition.isValidLabelName(invalid), invalid) }
    }

    func testTheCatalogueFollowsPrometheusConventions() {
        let names = MetricCatalogue.all.map(\.name)
        XCTAssertEqual(Set(names).count, names.count, "every family once")
        for f in MetricCatalogue.all {
            XCTAssertTrue(f.name.hasPrefix("tunnelgate_"), f.name)
            XCTAssertEqual(f.type == .counter, f.name.hasSuffix("_total"), "\(f.name): counters and only counters end in _total")
            XCTAssertFalse(f.help.isEmpty, f.name)
            XCTAssertFalse(f.name.contains("__"), f.name)
        }
    }

    /// docs/operations.md, Metrics, names every metric: a new one without a line there fails here.
    func testEveryMetricIsDocumented() throws {
        let root = "/" + #filePath.split(separator: "/").dropLast(3).joined(separator: "/")
        let text = try String(contentsOfFile: root + "/docs/operations.md", encoding: .utf8)
        guard let start = text.range(of: "\n## Metrics\n") else { return XCTFail("docs/operations.md has no Metrics section") }
        let section = text[start.upperBound...].prefix { _ in true }
        let end = section.range(of: "\n## ")?.lowerBound ?? section.endIndex
        for f in MetricCatalogue.all {
            XCTAssertTrue(section[..<end].contains("`\(f.name)`"), "\(f.name) is not in docs/operations.md, Metrics")
        }
    }
}
