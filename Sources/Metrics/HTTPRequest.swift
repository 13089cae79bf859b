/// The head of an HTTP/1.x request (RFC 9112), as much of it as a metrics endpoint needs: the method,
/// the path, the version and whether the connection stays open after the answer.
public struct HTTPRequest: Sendable, Equatable {
    public var method: String
    /// The target without its query string.
    public var path: String
    /// 0 for HTTP/1.0, 1 for HTTP/1.1.
    public var minorVersion: Int
    public var keepAlive: Bool

    /// What a buffer holds at its start.
    public enum Parsed: Sendable, Equatable {
        /// The head is not complete yet.
        case incomplete
        /// A request, and how many bytes of the buffer its head took.
        case request(HTTPRequest, consumed: Int)
        /// Not a request this server answers: the status to answer with (and then close).
        case invalid(status: Int)
    }

    /// Parses the request head at the start of `bytes`. A request with a body (Content-Length other
    /// than 0, or Transfer-Encoding) is refused with 400: nothing here takes one, and guessing where it
    /// ends is how requests get smuggled. Lines may end in CRLF or LF (RFC 9112, 2.2).
    public static func parse(_ bytes: ArraySlice<UInt8>) -> Parsed {
        guard let end = headEnd(bytes) else { return .incomplete }
        let head = bytes[bytes.startIndex..<end.head]
        var lines = head.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false).map { line in
            line.last == UInt8(ascii: "\r") ? line.dropLast() : line
        }
        // A recipient ignores empty lines before the request line (RFC 9112, 2.2).
        while lines.first?.isEmpty == true { lines.removeFirst() }
        guard let requestLine = lines.first else { return .invalid(status: 400) }
        let parts = requestLine.split(separator: UInt8(ascii: " "), omittingEmptySubsequences: false)
        guard parts.count == 3, !parts[0].isEmpty, !parts[1].isEmpty,
              parts[0].allSatisfy({ (0x41...0x5a).contains($0) }) else { return .invalid(status: 400) }
        let version = String(decoding: parts[2], as: UTF8.self)
        let minor: Int
        switch version {
        case "HTTP/1.1": minor = 1
        case "HTTP/1.0": minor = 0
        default: return .invalid(status: version.hasPrefix("HTTP/") ? 505 : 400)
        }
        let target = String(decoding: parts[1], as: UTF8.self)
        guard target.hasPrefix("/") else { return .invalid(status: 400) }
        var keepAlive = minor == 1
        for line in lines.dropFirst() where !line.isEmpty {
            guard let colon = line.firstIndex(of: UInt8(ascii: ":")), colon > line.startIndex,
                  !line[line.startIndex..<colon].contains(where: { $0 == 0x20 || $0 == 0x09 }) else { return .invalid(status: 400) }
            let name = String(decoding: line[line.startIndex..<colon], as: UTF8.self).lowercased()
            let value = String(decoding: line[(colon + 1)...], as: UTF8.self)
                .trimmingCharacters(in: [" ", "\t"]).lowercased()
            switch name {
            case "content-length" where value != "0", "transfer-encoding":
                return .invalid(status: 400)
            case "connection":
                let options = value.split(separator: ",").map { $0.trimmingCharacters(in: [" ", "\t"]) }
                if options.contains("close") { keepAlive = false }
                else if options.contains("keep-alive") { keepAlive = true }
            default:
                break
            }
        }
        let path = String(target.prefix { $0 != "?" && $0 != "#" })
        let method = String(decoding: parts[0], as: UTF8.self)
        return .request(HTTPRequest(method: method, path: path, minorVersion: minor, keepAlive: keepAlive),
                        consumed: end.consumed - bytes.startIndex)
    }

    /// Where the head ends (before its empty line) and where the bytes after it start.
    static func headEnd(_ bytes: ArraySlice<UInt8>) -> (head: Int, consumed: Int)? {
        var i = bytes.startIndex
        // Skip leading empty lines so that they do not read as the end of the head.
        while i < bytes.endIndex, bytes[i] == 0x0d || bytes[i] == 0x0a { i += 1 }
        while i < bytes.endIndex {
            if bytes[i] == 0x0a {
                let next = i + 1
                if next < bytes.endIndex, bytes[next] == 0x0a { return (i, next + 1) }
                if next + 1 < bytes.endIndex, bytes[next] == 0x0d, bytes[next + 1] == 0x0a { return (i, next + 2) }
            }
            i += 1
        }
        return nil
    }
}

extension String {
    fileprivate func trimmingCharacters(in set: Set<Character>) -> String {
        var s = Substring(self)
        while let f = s.first, set.contains(f) { s.removeFirst() }
        while let l = s.last, set.contains(l) { s.removeLast() }
        return String(s)
    }
}

extension Substring {
    fileprivate func trimmingCharacters(in set: Set<Character>) -> String { String(self).trimmingCharacters(in: set) }
}
