import Foundation
@testable import NetworkExtension
import XCTest

/// NEProxySettings: validated by key path, and written as a PAC file (run here by a real JavaScript
/// engine, node, as a browser would run it) and proxy environment values that never hold credentials.
final class ProxySettingsTests: XCTestCase {
    func settings(_ set: (NEProxySettings) -> Void) -> NEProxySettings {
        let s = NEProxySettings()
        set(s)
        return s
    }

    /// FindProxyForURL(url, host) of `pac` for each case, from node.
    func evaluate(_ pac: String, _ cases: [(String, String)]) throws -> [String] {
        let path = NSTemporaryDirectory() + "tunnelgate-pac-\(getpid())-\(UUID().uuidString).js"
        defer { try? FileManager.default.removeItem(atPath: path) }
        let calls = cases.map { "console.log(FindProxyForURL(\(TunnelgateProxyFiles.js($0.0)), \(TunnelgateProxyFiles.js($0.1))));" }
        try (pac + "\n" + calls.joined(separator: "\n") + "\n").write(toFile: path, atomically: true, encoding: .utf8)
        let node = ["/usr/bin/node", "/usr/bin/nodejs"].first { FileManager.default.isExecutableFile(atPath: $0) }
        let executable = try XCTUnwrap(node, "node is not installed: run Scripts/setup.sh (package nodejs)")
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = [path]
        let out = Pipe(), err = Pipe()
        process.standardOutput = out
        process.standardError = err
        try process.run()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        XCTAssertEqual(process.terminationStatus, 0, String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self))
        return String(decoding: data, as: UTF8.self).split(separator: "\n").map(String.init)
    }

    func testProblemsNameTheirKeyPaths() {
        let s = settings {
            $0.httpEnabled = true
            $0.httpsEnabled = true
            $0.httpsServer = NEProxyServer(address: "proxy with space", port: 0)
            $0.exceptionList = ["ok.example", "10.0.0.0/33", "*.", "a b"]
            $0.matchDomains = ["corp.example", "-bad"]
            $0.autoProxyConfigurationEnabled = true
        }
        let problems = s.tunnelgateProblems()
        let paths = problems.map { String($0.prefix { $0 != ":" }) }
        XCTAssertEqual(paths, ["proxySettings.autoProxyConfigurationEnabled", "proxySettings.httpEnabled",
                               "proxySettings.httpsServer.address", "proxySettings.httpsServer.port",
                               "proxySettings.exceptionList[1]", "proxySettings.exceptionList[2]", "proxySettings.exceptionList[3]",
                               "proxySettings.matchDomains[1]"], problems.joined(separator: "\n"))
        XCTAssertThrowsError(try TunnelgateProxyFiles.make(s)) { XCTAssertEqual("\($0)", problems.joined(separator: "\n")) }

        let pac = settings { $0.autoProxyConfigurationEnabled = true; $0.proxyAutoConfigurationJavaScript = "var x = 1;" }
        XCTAssertEqual(pac.tunnelgateProblems(), ["proxySettings.proxyAutoConfigurationJavaScript: the script defines no FindProxyForURL(url, host)"])
        let url = settings { $0.autoProxyConfigurationEnabled = true; $0.proxyAutoConfigurationURL = URL(string: "ftp://198.18.0.1/p.pac") }
        XCTAssertEqual(url.tunnelgateProblems().count, 1)
        XCTAssertEqual(NEProxySettings().tunnelgateProblems(), [])
    }

    func testServersExceptionsAndSimpleHostnames() throws {
        let s = settings {
            $0.httpEnabled = true
            $0.httpServer = NEProxyServer(address: "198.18.0.3", port: 3128)
            $0.httpsEnabled = true
            $0.httpsServer = NEProxyServer(address: "2001:db8::3", port: 3129)
            $0.exceptionList = ["intranet.example", "*.corp.example", "10.0.0.0/8", "198.18.5.5", "[2001:db8::5]"]
            $0.excludeSimpleHostnames = true
        }
        let files = try TunnelgateProxyFiles.make(s)
        XCTAssertEqual(files.environmentFileText, """
            http_proxy=http://198.18.0.3:3128
            https_proxy=http://[2001:db8::3]:3129
            HTTPS_PROXY=http://[2001:db8::3]:3129
            no_proxy=intranet.example,.corp.example,10.0.0.0/8,198.18.5.5,2001:db8::5
            NO_PROXY=intranet.example,.corp.example,10.0.0.0/8,198.18.5.5,2001:db8::5

            """)
        XCTAssertNil(files.pacURL)
        XCTAssertEqual(files.notes.count, 3, files.notes.joined(separator: "\n"))
        XCTAssertTrue(files.notes[0].hasPrefix("excludeSimpleHostnames"))
        let pac = try XCTUnwrap(files.pac)
        let got = try evaluate(pac, [
            ("http://www.example.com/", "www.example.com"),
            ("https://www.example.com/", "www.example.com"),
            ("HTTPS://WWW.EXAMPLE.COM/", "WWW.EXAMPLE.COM."),
            ("ftp://files.example.com/", "files.example.com"),
            ("http://intranet.example/", "intranet.example"),
            ("http://sub.intranet.example/", "sub.intranet.example"),
            ("http://git.corp.example/", "git.corp.example"),
            ("http://corp.example/", "corp.example"),
            ("http://notcorp.example/", "notcorp.example"),
            ("http://printer/", "printer"),
            ("http://10.20.30.40/", "10.20.30.40"),
            ("http://11.0.0.1/", "11.0.0.1"),
            ("http://198.18.5.5/", "198.18.5.5"),
            ("http://[2001:db8::5]/", "[2001:db8::5]"),
            ("http://[2001:db8::6]/", "2001:db8::6"),
        ])
        XCTAssertEqual(got, [
            "PROXY 198.18.0.3:3128", "PROXY [2001:db8::3]:3129", "PROXY [2001:db8::3]:3129", "DIRECT",
            "DIRECT", "PROXY 198.18.0.3:3128", "DIRECT", "PROXY 198.18.0.3:3128", "PROXY 198.18.0.3:3128",
            "DIRECT", "DIRECT", "PROXY 198.18.0.3:3128", "DIRECT", "DIRECT", "PROXY 198.18.0.3:3128",
        ])
    }

    func testMatchDomainsOnlyInThePACFile() throws {
        let s = settings {
            $0.httpEnabled = true
            $0.httpServer = NEProxyServer(address: "proxy.corp.example", port: 8080)
            $0.httpsEnabled = true
            $0.httpsServer = NEProxyServer(address: "proxy.corp.example", port: 8080)
            $0.matchDomains = ["corp.example"]
        }
        let files = try TunnelgateProxyFiles.make(s)
        XCTAssertEqual(files.environment, [], "the environment cannot limit a proxy to domains")
        XCTAssertTrue(files.notes.contains { $0.hasPrefix("matchDomains") })
        let got = try evaluate(try XCTUnwrap(files.pac), [("https://wiki.corp.example/", "wiki.corp.example"),
                                                          ("http://corp.example/", "corp.example"),
                                                          ("https://www.example.com/", "www.example.com")])
        XCTAssertEqual(got, ["PROXY proxy.corp.example:8080", "PROXY proxy.corp.example:8080", "DIRECT"])
    }

    func testCredentialsAreNeverWritten() throws {
        let password = "hunter2-proxy-9281"
        let server = NEProxyServer(address: "198.18.0.3", port: 3128)
        server.authenticationRequired = true
        server.username = "alice"
        server.password = password
        let files = try TunnelgateProxyFiles.make(settings { $0.httpEnabled = true; $0.httpServer = server; $0.httpsEnabled = true; $0.httpsServer = server })
        let everything = (files.pac ?? "") + files.environmentFileText + files.notes.joined()
        XCTAssertFalse(everything.contains(password))
        XCTAssertFalse(everything.contains("alice"))
        XCTAssertTrue(files.notes.contains { $0.contains("requires authentication") })
        XCTAssertEqual(files.environment.first?.value, "http://198.18.0.3:3128")
        // Nor in the problems of invalid settings.
        server.authenticationRequired = true
        let bad = NEProxyServer(address: "", port: 99999)
        bad.password = password
        XCTAssertFalse(settings { $0.httpEnabled = true; $0.httpServer = bad }.tunnelgateProblems().joined().contains(password))
    }

    func testAutoConfiguration() throws {
        let script = "function FindProxyForURL(url, host) { return host == \"a.example\" ? \"PROXY 198.18.0.3:1\" : \"DIRECT\"; }"
        let js = try TunnelgateProxyFiles.make(settings { $0.autoProxyConfigurationEnabled = true; $0.proxyAutoConfigurationJavaScript = script
            $0.httpEnabled = true; $0.httpServer = NEProxyServer(address: "198.18.0.9", port: 9) })
        XCTAssertEqual(js.pac, script)
        XCTAssertEqual(js.environment, [], "a PAC script's decisions are not environment values")
        XCTAssertEqual(try evaluate(script, [("http://a.example/", "a.example")]), ["PROXY 198.18.0.3:1"])
        let url = try TunnelgateProxyFiles.make(settings { $0.autoProxyConfigurationEnabled = true
            $0.proxyAutoConfigurationURL = URL(string: "http://198.18.0.3/proxy.pac") })
        XCTAssertNil(url.pac)
        XCTAssertEqual(url.pacURL, "http://198.18.0.3/proxy.pac")
        XCTAssertEqual(try TunnelgateProxyFiles.make(NEProxySettings()), TunnelgateProxyFiles(), "nothing enabled: nothing written")
        XCTAssertEqual(TunnelgateProxyFiles.pacFileName(tunnel: "tg0"), "tg0.proxy.pac")
        XCTAssertEqual(TunnelgateProxyFiles.environmentFileName(tunnel: "tg0"), "tg0.proxy.env")
    }

    func testSettingsCarryProxySettings() {
        let s = NEPacketTunnelNetworkSettings(tunnelRemoteAddress: "198.18.0.10")
        XCTAssertNil(s.proxySettings)
        s.proxySettings = settings { $0.httpEnabled = true; $0.httpServer = NEProxyServer(address: "198.18.0.3", port: 3128) }
        let copy = s.proxySettings?.copy() as? NEProxySettings
        XCTAssertEqual(copy?.httpServer?.port, 3128)
        XCTAssertFalse(copy?.httpServer === s.proxySettings?.httpServer)
    }
}
