/// Interface names as the kernel accepts them (net/core/dev.c, dev_valid_name):
/// 1–15 bytes, not "." or "..", no '/', ':' or white space.
public enum InterfaceName {
    public static let maximumLength = 15

    /// Why the kernel would refuse `name`, or nil when it would accept it.
    public static func problem(_ name: String) -> String? {
        let bytes = Array(name.utf8)
        if bytes.isEmpty { return "an interface name cannot be empty" }
        if bytes.count > maximumLength {
            return "'\(name)' is \(bytes.count) bytes; the kernel takes interface names of at most \(maximumLength)"
        }
        if name == "." || name == ".." { return "'\(name)' is not a valid interface name" }
        if let bad = bytes.first(where: { $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: ":") || $0 <= 0x20 || $0 == 0x7f }) {
            let shown = bad <= 0x20 || bad == 0x7f ? "white space or a control character" : "'\(Character(Unicode.Scalar(bad)))'"
            return "'\(name)' contains \(shown), which the kernel refuses in interface names"
        }
        if bytes.contains(where: { $0 >= 0x80 }) { return "'\(name)' is not ASCII" }
        return nil
    }
}

/// Host names and DNS domains (RFC 1123 labels; underscores allowed as in
/// service names; a trailing dot accepted).
public enum HostName {
    public static func problem(_ text: String) -> String? {
        var name = Substring(text)
        if name.hasSuffix(".") { name = name.dropLast() }
        if name.isEmpty { return "empty" }
        if name.utf8.count > 253 { return "longer than 253 characters" }
        for label in name.split(separator: ".", omittingEmptySubsequences: false) {
            if label.isEmpty { return "empty label" }
            if label.utf8.count > 63 { return "label longer than 63 characters" }
            if !label.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == "_") }) {
                return "'\(label)' has characters other than letters, digits, '-' and '_'"
            }
            if label.hasPrefix("-") || label.hasSuffix("-") { return "'\(label)' begins or ends with '-'" }
        }
        return nil
    }
}

extension CarrierEndpoint {
    public enum ParseError: Error, Equatable {
        case invalid(String)
        var message: String { if case .invalid(let m) = self { return m }; return "" }
    }

    /// Parses `ADDRESS`, `ADDRESS:PORT`, `[IPV6]:PORT`, `HOST` or `HOST:PORT`, each optionally followed
    /// by `/udp` or `/tcp` (with a port only).
    public static func parse(_ text: String) -> Result<CarrierEndpoint, ParseError> {
        guard let slash = text.lastIndex(of: "/") else { return parseHostAndPort(text) }
        let suffix = String(text[text.index(after: slash)...])
        guard let transport = CarrierTransport(rawValue: suffix.lowercased()) else {
            return .failure(.invalid("'\(text)': the transport after '/' must be udp or tcp"))
        }
        switch parseHostAndPort(String(text[..<slash])) {
        case .failure(let e): return .failure(e)
        case .success(var endpoint):
            guard endpoint.port != nil else {
                return .failure(.invalid("'\(text)': /\(suffix) needs a port (HOST:PORT/\(suffix))"))
            }
            endpoint.transport = transport
            return .success(endpoint)
        }
    }

    private static func parseHostAndPort(_ text: String) -> Result<CarrierEndpoint, ParseError> {
        func port(_ p: Substring) -> UInt16?? {
            guard let n = UInt16(p), n > 0, p.allSatisfy({ $0.isNumber }) else { return .some(nil) }
            return .some(n)
        }
        if let a = IPAddress(text) { return .success(CarrierEndpoint(host: .address(a))) }
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]"), let a = IPv6Address(text[text.index(after: text.startIndex)..<close]) else {
                return .failure(.invalid("'\(text)' is not [IPV6]:PORT"))
            }
            let rest = text[text.index(after: close)...]
            if rest.isEmpty { return .success(CarrierEndpoint(host: .address(.v6(a)))) }
            guard rest.hasPrefix(":"), case .some(.some(let p)) = port(rest.dropFirst()) else {
                return .failure(.invalid("'\(text)': port must be 1–65535"))
            }
            return .success(CarrierEndpoint(host: .address(.v6(a)), port: p))
        }
        var hostPart = Substring(text)
        var p: UInt16?
        if let colon = text.lastIndex(of: ":") {
            if text[..<colon].contains(":") {
                return .failure(.invalid("'\(text)' is not an address; write an IPv6 address with a port as [ADDRESS]:PORT"))
            }
            hostPart = text[..<colon]
            guard case .some(.some(let parsed)) = port(text[text.index(after: colon)...]) else {
                return .failure(.invalid("'\(text)': port must be 1–65535"))
            }
            p = parsed
        }
        if let a = IPv4Address(hostPart) { return .success(CarrierEndpoint(host: .address(.v4(a)), port: p)) }
        if hostPart.allSatisfy({ $0.isNumber || $0 == "." }) {
            return .failure(.invalid("'\(hostPart)' is not a valid IPv4 address"))
        }
        if let reason = HostName.problem(String(hostPart)) {
            return .failure(.invalid("'\(hostPart)' is not a valid host name (\(reason))"))
        }
        return .success(CarrierEndpoint(host: .name(hostPart.lowercased()), port: p))
    }

    /// The host as written (address in canonical form, or the name).
    var hostText: String {
        switch host { case .address(let a): a.description; case .name(let n): n }
    }
}
