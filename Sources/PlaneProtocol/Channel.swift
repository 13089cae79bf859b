import LinuxSystem
import TunnelgateSettings

/// Frames on the engine–plane channel (a SOCK_SEQPACKET pair): one message per datagram, the JSON of
/// the message after a 4-byte big-endian length, then an optional tail of raw bytes (secrets, never in
/// the JSON), and descriptors as SCM_RIGHTS. A datagram that does not parse, or is larger than
/// `maximumSize`, is garbage: the receiver counts it and the engine ends a plane that sends it.
public enum ChannelFrame {
    /// The largest datagram either side sends or takes.
    public static let maximumSize = 256 * 1024

    /// Why a datagram is not a message.
    public enum Garbage: Error, Sendable, CustomStringConvertible {
        case truncated
        case tooShort(Int)
        case badLength(Int)
        case undecodable(String)
        public var description: String {
            switch self {
            case .truncated: "a datagram larger than \(ChannelFrame.maximumSize) bytes, or with too many descriptors"
            case .tooShort(let n): "a datagram of \(n) bytes, shorter than its header"
            case .badLength(let n): "a JSON length of \(n) beyond the datagram"
            case .undecodable(let why): "a message that does not decode: \(why)"
            }
        }
    }

    /// The datagram of `message` with `tail` after it.
    public static func encode<M: Encodable>(_ message: M, tail: UnsafeRawBufferPointer? = nil) throws -> [UInt8] {
        let json = try JSONCoding.encode(message)
        var out: [UInt8] = []
        out.reserveCapacity(4 + json.count + (tail?.count ?? 0))
        let n = UInt32(json.count)
        out += [UInt8(n >> 24), UInt8(n >> 16 & 0xff), UInt8(n >> 8 & 0xff), UInt8(n & 0xff)]
        out += json
        if let tail { out += tail }
        return out
    }

    /// The message of a datagram, and where its tail starts.
    public static func decode<M: Decodable>(_ type: M.Type, _ bytes: UnsafeRawBufferPointer) throws(Garbage) -> (M, tail: Int) {
        guard bytes.count >= 4 else { throw .tooShort(bytes.count) }
        let n = Int(bytes[0]) << 24 | Int(bytes[1]) << 16 | Int(bytes[2]) << 8 | Int(bytes[3])
        guard n <= bytes.count - 4 else { throw .badLength(n) }
        do {
            let message = try JSONCoding.decode(M.self, from: Array(bytes[4..<(4 + n)]))
            return (message, 4 + n)
        } catch {
            throw .undecodable(String(describing: error).prefix(200).description)
        }
    }
}

/// One side of the channel: sends typed messages, receives them without waiting.
public final class ChannelEndpoint<Outgoing: Encodable, Incoming: Decodable> {
    public let channel: SeqPacketChannel
    private let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: ChannelFrame.maximumSize, alignment: 16)
    /// Datagrams that were not messages.
    public private(set) var garbage = 0

    public init(_ channel: SeqPacketChannel) { self.channel = channel }

    deinit {
        // What came in may have held a secret's tail.
        buffer.initializeMemory(as: UInt8.self, repeating: 0)
        buffer.deallocate()
    }

    public var descriptor: FileDescriptor { channel.descriptor }

    public func send(_ message: Outgoing, tail: UnsafeRawBufferPointer? = nil, descriptors: [FileDescriptor] = []) throws(SystemCallError) {
        var bytes: [UInt8]
        do { bytes = try ChannelFrame.encode(message, tail: tail) } catch {
            preconditionFailure("a channel message does not encode: \(error)")
        }
        defer {
            // The tail (a secret) was copied into `bytes`: wipe that copy.
            if tail != nil { bytes.withUnsafeMutableBytes { _ = $0.initializeMemory(as: UInt8.self, repeating: 0) } }
        }
        var failure: SystemCallError?
        bytes.withUnsafeBytes { raw in
            do throws(SystemCallError) { try channel.send(raw, descriptors: descriptors) } catch { failure = error }
        }
        if let failure { throw failure }
    }

    public enum Event {
        case message(Incoming, tail: UnsafeRawBufferPointer, descriptors: [FileDescriptor])
        case garbage(ChannelFrame.Garbage)
        case closed
    }

    /// The next datagram, without waiting; nil when none is there. A message's tail is valid until the
    /// next call (it is this endpoint's buffer, wiped on the next receive).
    public func receive() throws(SystemCallError) -> Event? {
        buffer.initializeMemory(as: UInt8.self, repeating: 0)
        guard let got = try channel.receive(into: buffer) else { return nil }
        if got.closed { return .closed }
        if got.truncated {
            for fd in got.descriptors { fd.close() }
            garbage += 1
            return .garbage(.truncated)
        }
        let bytes = UnsafeRawBufferPointer(rebasing: buffer[0..<got.count])
        do throws(ChannelFrame.Garbage) {
            let (message, tail) = try ChannelFrame.decode(Incoming.self, bytes)
            return .message(message, tail: UnsafeRawBufferPointer(rebasing: bytes[tail...]), descriptors: got.descriptors)
        } catch {
            for fd in got.descriptors { fd.close() }
            garbage += 1
            return .garbage(error)
        }
    }
}
