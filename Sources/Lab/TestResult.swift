import TunnelgateSettings

/// One assertion of a scenario, as `expect` records it and the writers print it.
public struct TestResult: Sendable, Equatable {
    public var phase: String
    public var name: String
    public var passed: Bool
    /// Why it failed (or what it saw), one or more lines.
    public var detail: String
    public var seconds: Double

    public init(phase: String, name: String, passed: Bool, detail: String = "", seconds: Double = 0) {
        self.phase = phase
        self.name = name
        self.passed = passed
        self.detail = detail
        self.seconds = seconds
    }

    /// One JSON object on one line, for the run's results file.
    public var jsonLine: String {
        "{\"phase\":\(JSONValue.quoted(phase)),\"name\":\(JSONValue.quoted(name)),\"passed\":\(passed),"
            + "\"detail\":\(JSONValue.quoted(detail)),\"seconds\":\(seconds)}"
    }

    /// Reads a results file; lines that are not results (a truncated last line) are skipped.
    public static func parse(lines text: String) -> [TestResult] {
        text.split(separator: "\n").compactMap { line in
            guard case .object(let m)? = try? JSONParser.parse(Array(line.utf8)) else { return nil }
            var r = TestResult(phase: "", name: "", passed: false)
            for (k, v) in m {
                switch (k, v) {
                case ("phase", .string(let s)): r.phase = s
                case ("name", .string(let s)): r.name = s
                case ("passed", .bool(let b)): r.passed = b
                case ("detail", .string(let s)): r.detail = s
                case ("seconds", .number(let d, _)): r.seconds = d
                default: break
                }
            }
            return r.name.isEmpty ? nil : r
        }
    }
}

/// TAP version 13 (testanything.org): the plan, one `ok`/`not ok` line per result with its phase,
/// and a YAML block with the failure's detail.
public enum TAPWriter {
    public static func render(scenario: String, results: [TestResult]) -> String {
        var s = "TAP version 13\n# \(oneLine(scenario))\n1..\(results.count)\n"
        for (i, r) in results.enumerated() {
            s += "\(r.passed ? "ok" : "not ok") \(i + 1) - [\(oneLine(r.phase))] \(oneLine(r.name).replacing("#", with: "\\#"))\n"
            if !r.passed || !r.detail.isEmpty {
                s += "  ---\n  phase: \(yamlString(r.phase))\n  seconds: \(r.seconds)\n"
                if !r.detail.isEmpty {
                    s += "  detail: |\n"
                    for line in r.detail.split(separator: "\n", omittingEmptySubsequences: false) { s += "    \(line)\n" }
                }
                s += "  ...\n"
            }
        }
        return s
    }

    static func oneLine(_ s: String) -> String {
        s.replacing("\n", with: " ").replacing("\r", with: " ")
    }

    static func yamlString(_ s: String) -> String { JSONValue.quoted(s) }
}

/// JUnit XML as CI systems read it (Jenkins, GitLab, GitHub actions' reporters): one testsuite
/// for the scenario, one testcase per result with `classname` SCENARIO.PHASE, a `failure` element
/// with the detail for each failed one.
public enum JUnitWriter {
    public static func render(scenario: String, results: [TestResult], timestamp: String, hostname: String = "localhost") -> String {
        let failures = results.filter { !$0.passed }.count
        let time = results.reduce(0) { $0 + $1.seconds }
        let suite = scenarioName(scenario)
        var s = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
        s += "<testsuites name=\"tunnelgate-lab\" tests=\"\(results.count)\" failures=\"\(failures)\" errors=\"0\" time=\"\(seconds(time))\">\n"
        s += "  <testsuite name=\"\(escape(suite))\" tests=\"\(results.count)\" failures=\"\(failures)\" errors=\"0\" skipped=\"0\""
        s += " time=\"\(seconds(time))\" timestamp=\"\(escape(timestamp))\" hostname=\"\(escape(hostname))\">\n"
        for r in results {
            s += "    <testcase classname=\"\(escape(suite + "." + r.phase))\" name=\"\(escape(r.name))\" time=\"\(seconds(r.seconds))\""
            if r.passed {
                if r.detail.isEmpty { s += "/>\n" } else { s += ">\n      <system-out>\(escape(r.detail))</system-out>\n    </testcase>\n" }
            } else {
                let first = r.detail.split(separator: "\n").first.map(String.init) ?? "failed"
                s += ">\n      <failure message=\"\(escape(first))\" type=\"assertion\">\(escape(r.detail))</failure>\n    </testcase>\n"
            }
        }
        s += "  </testsuite>\n</testsuites>\n"
        return s
    }

    static func scenarioName(_ path: String) -> String {
        var name = path.split(separator: "/").last.map(String.init) ?? path
        if name.hasSuffix(".sh") { name.removeLast(3) }
        return name
    }

    static func seconds(_ t: Double) -> String {
        let ms = Int((t * 1000).rounded())
        let frac = String(ms % 1000)
        return "\(ms / 1000).\(String(repeating: "0", count: 3 - frac.count))\(frac)"
    }

    /// XML 1.0 text: the five entities, and characters XML cannot hold at all (controls but tab,
    /// newline and carriage return) as U+FFFD.
    public static func escape(_ s: String) -> String {
        var out = ""
        for scalar in s.unicodeScalars {
            switch scalar {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&apos;"
            case "\t", "\n", "\r": out.unicodeScalars.append(scalar)
            case _ where scalar.value < 0x20 || scalar.value == 0xFFFE || scalar.value == 0xFFFF: out += "\u{FFFD}"
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out
    }
}
