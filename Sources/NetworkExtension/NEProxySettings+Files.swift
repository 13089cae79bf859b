import Foundation
import TunnelgateSettings

extension NEProxySettings {
    /// What is wrong with these settings, one line each naming its key path
    /// (`proxySettings.httpServer.port: 0 is not a port (1-65535)`); empty when they can be applied.
    /// Never names a password.
    public func tunnelgateProblems(keyPath: String = "proxySettings") -> [String] {
        var problems: [String] = []
        if autoProxyConfigurationEnabled {
            if let url = proxyAutoConfigurationURL {
                let scheme = url.scheme?.lowercased() ?? ""
                if !["http", "https", "file"].contains(scheme) || (scheme != "file" && (url.host ?? "").isEmpty) {
                    problems.append("\(keyPath).proxyAutoConfigurationURL: '\(url.absoluteString)' is not an http, https or file URL")
                }
            } else if let script = proxyAutoConfigurationJavaScript {
                if !script.contains("FindProxyForURL") {
                    problems.append("\(keyPath).proxyAutoConfigurationJavaScript: the script defines no FindProxyForURL(url, host)")
                }
                if script.utf8.count > TunnelgateProxyFiles.scriptLimit {
                    problems.append("\(keyPath).proxyAutoConfigurationJavaScript: \(script.utf8.count) bytes; at most \(TunnelgateProxyFiles.scriptLimit)")
                }
            } else {
                problems.append("\(keyPath).autoProxyConfigurationEnabled: true without proxyAutoConfigurationURL or proxyAutoConfigurationJavaScript")
            }
        }
        for (name, enabled, server) in [("http", httpEnabled, httpServer), ("https", httpsEnabled, httpsServer)] {
            if enabled && server == nil { problems.append("\(keyPath).\(name)Enabled: true without \(name)Server") }
            guard let server else { continue }
            if TunnelgateProxyFiles.hostText(server.address) == nil {
                let why = HostName.problem(server.address).map { " (\($0))" } ?? ""
                problems.append("\(keyPath).\(name)Server.address: '\(server.address)' is not an IP address or a host name\(why)")
            }
            if !(1...65535).contains(server.port) {
                problems.append("\(keyPath).\(name)Server.port: \(server.port) is not a port (1-65535)")
            }
        }
        for (i, entry) in (exceptionList ?? []).enumerated() where TunnelgateProxyFiles.Exception(entry) == nil {
            problems.append("\(keyPath).exceptionList[\(i)]: '\(entry)' is not a host, *.DOMAIN, an IP address or an IPv4 prefix")
        }
        for (i, domain) in (matchDomains ?? []).enumerated() {
            if let why = HostName.problem(domain) { problems.append("\(keyPath).matchDomains[\(i)]: '\(domain)' is not a domain (\(why))") }
        }
        return problems
    }
}

/// What Linux can do with a tunnel's NEProxySettings: files that the programs in the tunnel's namespace
/// read by convention, written by the engine (never enforced: a program that reads neither goes direct).
///
/// - `pac`: a proxy auto-configuration script (`NAME.proxy.pac` in the namespace's proxy directory,
///   `/run/tunnelgate-proxy/net-INODE/`, readable by all: Engine+Proxy), for browsers and libproxy-based programs: the provider's own script,
///   or one written from the settings. A written one is plain JavaScript that needs none of the PAC
///   helper functions and never resolves a name (it decides on the URL and host as given).
/// - `pacURL`: the provider's `proxyAutoConfigurationURL`, to be shown as where the script is (it is
///   not fetched).
/// - `environment`: `http_proxy`, `https_proxy`, `no_proxy` (and `HTTPS_PROXY`, `NO_PROXY`; not
///   `HTTP_PROXY`, which CGI programs cannot tell from a request header) as `NAME=value` lines
///   (`NAME.proxy.env`: a systemd EnvironmentFile, and `. NAME.proxy.env` in a shell).
/// - `notes`: what the settings say that neither can, one line each (`tunnelgate status` shows them).
///
/// Credentials are never written: a proxy that requires authentication is named without them.
public struct TunnelgateProxyFiles: Equatable, Sendable {
    public struct Variable: Equatable, Sendable {
        public let name: String
        public let value: String
    }

    public var pac: String?
    public var pacURL: String?
    public var environment: [Variable] = []
    public var notes: [String] = []

    static let scriptLimit = 1 << 20

    /// The file names in the namespace's proxy directory for the tunnel `name` (StateDirectory.proxyPath).
    public static func pacFileName(tunnel name: String) -> String { "\(name).proxy.pac" }
    public static func environmentFileName(tunnel name: String) -> String { "\(name).proxy.env" }

    public enum Failure: Error, Equatable, CustomStringConvertible {
        case invalid([String])
        public var description: String {
            switch self { case .invalid(let problems): problems.joined(separator: "\n") }
        }
    }

    /// The files for `settings`; fails with every problem (`tunnelgateProblems`) when they are invalid.
    public static func make(_ settings: NEProxySettings, keyPath: String = "proxySettings") throws(Failure) -> TunnelgateProxyFiles {
        let problems = settings.tunnelgateProblems(keyPath: keyPath)
        guard problems.isEmpty else { throw .invalid(problems) }
        var files = TunnelgateProxyFiles()

        if settings.autoProxyConfigurationEnabled {
            if let url = settings.proxyAutoConfigurationURL {
                files.pacURL = url.absoluteString
                files.notes.append("the proxy auto-configuration script is at \(url.absoluteString); it is not fetched, "
                                   + "programs that take a PAC URL are pointed at it")
            } else {
                files.pac = settings.proxyAutoConfigurationJavaScript
            }
            files.notes.append("http_proxy/https_proxy cannot say what a PAC script decides: they are not written")
            return files
        }

        let http = settings.httpEnabled ? settings.httpServer : nil
        let https = settings.httpsEnabled ? settings.httpsServer : nil
        guard http != nil || https != nil else { return files }
        let exceptions = (settings.exceptionList ?? []).compactMap(Exception.init)
        let domains = (settings.matchDomains ?? []).map(OnDemandMatch.normalized)

        files.pac = script(http: http, https: https, exceptions: exceptions, simpleHostnames: settings.excludeSimpleHostnames,
                           matchDomains: domains)

        for server in [http, https].compactMap({ $0 }) where server.authenticationRequired {
            files.notes.append("the proxy \(endpoint(server)) requires authentication: its credentials are not written "
                               + "(they would be in every process's environment); programs must supply their own")
        }
        if !domains.isEmpty {
            files.notes.append("matchDomains: http_proxy/https_proxy cannot limit the proxy to some domains; only the PAC file does, "
                               + "the environment values are not written")
            return files
        }
        if settings.excludeSimpleHostnames {
            files.notes.append("excludeSimpleHostnames: no_proxy cannot name hosts without a dot; only the PAC file sends them direct")
        }
        if exceptions.contains(where: \.isExactHost) {
            files.notes.append("no_proxy: an exception for one host also exempts the names under it (no_proxy matches domains)")
        }
        if exceptions.contains(where: \.isPrefix) {
            files.notes.append("no_proxy: IPv4 prefixes are understood by curl 7.86 and later, Go and wget2, not by every program")
        }
        if let http { files.environment.append(Variable(name: "http_proxy", value: "http://" + endpoint(http))) }
        if let https {
            let value = "http://" + endpoint(https)
            files.environment.append(Variable(name: "https_proxy", value: value))
            files.environment.append(Variable(name: "HTTPS_PROXY", value: value))
        }
        let noProxy = exceptions.map(\.noProxy).joined(separator: ",")
        if !noProxy.isEmpty {
            files.environment.append(Variable(name: "no_proxy", value: noProxy))
            files.environment.append(Variable(name: "NO_PROXY", value: noProxy))
        }
        return files
    }

    /// As the engine's model: the texts to write and the notes.
    public var model: ProxyFiles {
        ProxyFiles(pac: pac, pacURL: pacURL, environment: environment.isEmpty ? nil : environmentFileText, notes: notes)
    }

    /// The environment file: `NAME=value` lines (values hold no spaces, quotes or `$`: they are checked
    /// addresses, names and numbers).
    public var environmentFileText: String {
        environment.map { "\($0.name)=\($0.value)\n" }.joined()
    }

    // MARK: Pieces

    /// An exceptionList entry.
    enum Exception: Equatable {
        case host(String)
        case domain(String)        // *.DOMAIN
        case address(IPAddress)
        case prefix(UInt32, UInt32) // IPv4 network and mask
        case all                   // *

        init?(_ text: String) {
            if text == "*" { self = .all; return }
            if let a = IPAddress(text) { self = .address(a); return }
            if text.hasPrefix("[") && text.hasSuffix("]"), let a = IPAddress(text.dropFirst().dropLast()) { self = .address(a); return }
            if let slash = text.firstIndex(of: "/"), let a = IPv4Address(text[..<slash]),
               let length = Int(text[text.index(after: slash)...]), (0...32).contains(length) {
                let mask: UInt32 = length == 0 ? 0 : ~UInt32(0) << UInt32(32 - length)
                self = .prefix(Exception.value(a) & mask, mask)
                return
            }
            if text.hasPrefix("*."), HostName.problem(String(text.dropFirst(2))) == nil {
                self = .domain(OnDemandMatch.normalized(String(text.dropFirst(2))))
                return
            }
            if HostName.problem(text) == nil { self = .host(OnDemandMatch.normalized(text)); return }
            return nil
        }

        static func value(_ a: IPv4Address) -> UInt32 {
            let parts = a.description.split(separator: ".").compactMap { UInt32($0) }
            return parts.reduce(0) { $0 << 8 | $1 }
        }

        var isExactHost: Bool { if case .host = self { return true }; return false }
        var isPrefix: Bool { if case .prefix = self { return true }; return false }

        var noProxy: String {
            switch self {
            case .all: "*"
            case .host(let h): h
            case .domain(let d): "." + d
            case .address(let a): a.description
            case .prefix(let network, let mask):
                "\(network >> 24).\(network >> 16 & 0xFF).\(network >> 8 & 0xFF).\(network & 0xFF)/\(mask.nonzeroBitCount)"
            }
        }
    }

    /// A server's address as it goes in a URL or a PAC result (IPv6 in brackets), or nil when invalid.
    static func hostText(_ address: String) -> String? {
        if let a = IPAddress(address) {
            if case .v6 = a { return "[\(a)]" }
            return a.description
        }
        return HostName.problem(address) == nil ? OnDemandMatch.normalized(address) : nil
    }

    static func endpoint(_ server: NEProxyServer) -> String {
        "\(hostText(server.address) ?? server.address):\(server.port)"
    }

    static func js(_ s: String) -> String {
        var out = "\""
        for u in s.unicodeScalars {
            switch u {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case _ where u.value < 0x20 || u.value > 0x7E: out += String(format: "\\u%04x", u.value)
            default: out.unicodeScalars.append(u)
            }
        }
        return out + "\""
    }

    static func script(http: NEProxyServer?, https: NEProxyServer?, exceptions: [Exception], simpleHostnames: Bool,
                       matchDomains: [String]) -> String {
        var hosts: [String] = [], domains: [String] = [], addresses: [String] = [], prefixes: [String] = []
        var all = false
        for e in exceptions {
            switch e {
            case .all: all = true
            case .host(let h): hosts.append(js(h))
            case .domain(let d): domains.append(js(d))
            case .address(let a): addresses.append(js(a.description))
            case .prefix(let n, let m): prefixes.append("[\(n), \(m)]")
            }
        }
        func list(_ items: [String]) -> String { "[" + items.joined(separator: ", ") + "]" }
        var s = """
        // Written by Tunnelgate from the tunnel's NEProxySettings. Plain JavaScript: no PAC helper
        // functions, no name resolution.
        function FindProxyForURL(url, host) {
          var h = String(host).toLowerCase();
          if (h.charAt(0) == "[" && h.charAt(h.length - 1) == "]") h = h.substring(1, h.length - 1);
          while (h.length > 0 && h.charAt(h.length - 1) == ".") h = h.substring(0, h.length - 1);
          function under(name, domain) {
            return name == domain || (name.length > domain.length && name.substring(name.length - domain.length - 1) == "." + domain);
          }
          function ipv4(name) {
            var p = name.split(".");
            if (p.length != 4) return -1;
            var v = 0;
            for (var i = 0; i < 4; i++) {
              if (!/^[0-9]{1,3}$/.test(p[i]) || Number(p[i]) > 255) return -1;
              v = v * 256 + Number(p[i]);
            }
            return v;
          }

        """
        if all { s += "  return \"DIRECT\";\n" }
        if simpleHostnames { s += "  if (h.indexOf(\".\") < 0 && h.indexOf(\":\") < 0) return \"DIRECT\";\n" }
        if !hosts.isEmpty || !addresses.isEmpty {
            s += "  var exact = \(list(hosts + addresses));\n"
            s += "  for (var i = 0; i < exact.length; i++) if (h == exact[i]) return \"DIRECT\";\n"
        }
        if !domains.isEmpty {
            s += "  var under_ = \(list(domains));\n"
            s += "  for (var i = 0; i < under_.length; i++) if (h.length > under_[i].length && under(h, under_[i])) return \"DIRECT\";\n"
        }
        if !prefixes.isEmpty {
            s += "  var nets = \(list(prefixes));\n"
            s += "  var v4 = ipv4(h);\n"
            s += "  if (v4 >= 0) for (var i = 0; i < nets.length; i++) if ((v4 & nets[i][1]) >>> 0 == nets[i][0]) return \"DIRECT\";\n"
        }
        if !matchDomains.isEmpty {
            s += "  var only = \(list(matchDomains.map(js)));\n"
            s += "  var inside = false;\n"
            s += "  for (var i = 0; i < only.length; i++) if (under(h, only[i])) inside = true;\n"
            s += "  if (!inside) return \"DIRECT\";\n"
        }
        let scheme = "  var scheme = String(url).substring(0, String(url).indexOf(\":\")).toLowerCase();\n"
        s += scheme
        if let https { s += "  if (scheme == \"https\") return \(js("PROXY " + endpoint(https)));\n" }
        if let http { s += "  if (scheme == \"http\") return \(js("PROXY " + endpoint(http)));\n" }
        s += "  return \"DIRECT\";\n}\n"
        return s
    }
}
