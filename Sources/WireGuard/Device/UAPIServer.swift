import LinuxSystem
import Synchronization

/// wg(8)'s connections, served on a thread of their own so that no client can stall the packets.
///
/// This thread accepts, checks the peer's credentials, reads the request (at most 1 MB, and at most
/// `requestSeconds` for the whole of it, however slowly the client trickles), and parses it. Only
/// the parsed request crosses to the device thread (`Exchange`, through the device's mailbox and
/// wake-up pipe), which answers it between two packet batches: building a `get` answer or applying a
/// `set` takes microseconds and touches no socket. The answer is written back to the client here,
/// with a send timeout. A slow, silent or never-reading client costs the data path nothing; it only
/// holds the next wg(8) client up to `requestSeconds`.
final class UAPIServer: @unchecked Sendable {
    /// A parsed request on its way to the device thread, and its answer on the way back.
    final class Exchange: @unchecked Sendable {
        let request: UAPI.Request
        /// Written by the device thread before it signals `answered`.
        var reply = ""
        /// A `get` answer (the keys in hex): secure memory, wiped when it is released.
        var answer: SecretText?

        init(_ request: UAPI.Request) { self.request = request }
    }

    static let requestSeconds = 5.0
    static let requestLimit = 1 << 20

    private let listener: FileDescriptor
    private let log: @Sendable (String) -> Void
    /// Posts an exchange to the device thread (mailbox, then wake-up).
    private let post: @Sendable (Exchange) -> Void
    private let stopReader: FileDescriptor, stopWriter: FileDescriptor
    /// The device thread writes a byte here when an exchange is answered.
    let answeredReader: FileDescriptor, answeredWriter: FileDescriptor
    private var thread: SystemThread?

    init(listener: FileDescriptor, log: @escaping @Sendable (String) -> Void,
         post: @escaping @Sendable (Exchange) -> Void) throws(SystemCallError) {
        self.listener = listener
        self.log = log
        self.post = post
        (stopReader, stopWriter) = try FileDescriptor.pipe()
        do throws(SystemCallError) {
            (answeredReader, answeredWriter) = try FileDescriptor.pipe()
        } catch {
            stopReader.close()
            stopWriter.close()
            throw error
        }
    }

    deinit {
        for fd in [stopReader, stopWriter, answeredReader, answeredWriter] { fd.close() }
    }

    func start() throws(SystemCallError) {
        thread = try SystemThread.spawn { [self] in run() }
    }

    /// Ends the thread (a request in flight is abandoned: its client is closed unanswered). Once.
    func stop() {
        guard let thread else { return }
        var one: UInt8 = 1
        _ = withUnsafeBytes(of: &one) { try? stopWriter.write($0) }
        thread.join()
        self.thread = nil
    }

    private var stopping: Bool { (try? Poll.readable(stopReader, timeoutMilliseconds: 0)) == true }

    private func run() {
        var poll = PollSet()
        poll.add(listener, .readable)
        poll.add(stopReader, .readable)
        while true {
            do throws(SystemCallError) { _ = try poll.wait(timeoutNanoseconds: nil) } catch {
                log("wg API: poll: \(error)")
                return
            }
            if !poll.events(at: 1).isEmpty { return }
            while let connection = try? UnixSocket.accept(listener) {
                serve(connection)
                connection.close()
                if stopping { return }
            }
        }
    }

    private func serve(_ connection: FileDescriptor) {
        // A write may take a second, no more; reads are bounded by the request's deadline below.
        do throws(SystemCallError) { try connection.setTimeouts(seconds: 1) } catch {
            log("wg API: \(error)")
            return
        }
        guard let peer = try? UnixSocket.peerCredentials(connection),
              peer.uid == 0 || peer.uid == ProcessControl.effectiveUserID else { return }
        guard let lines = readRequest(connection) else { return }
        // wg(8) connects and closes without a word to see whether an interface is there.
        if lines.isEmpty { return }
        // wg(8) reads a set reply's errno as negative (as wireguard-go writes it), a get reply's as digits.
        let isSet = lines.first == "set=1"
        let request: UAPI.Request
        do throws(UAPI.Failure) { request = try UAPI.parse(lines) } catch {
            log("wg API: \(error.description)")
            reply(connection, "errno=\(isSet ? -error.errno : error.errno)\n\n", answer: nil)
            return
        }
        let exchange = Exchange(request)
        post(exchange)
        // The device thread answers between two batches; it is gone only when the device stops.
        var drain = [UInt8](repeating: 0, count: 8)
        var poll = PollSet()
        poll.add(answeredReader, .readable)
        poll.add(stopReader, .readable)
        while true {
            guard (try? poll.wait(timeoutNanoseconds: nil)) != nil else { return }
            if !poll.events(at: 1).isEmpty { return }
            if !poll.events(at: 0).isEmpty {
                _ = drain.withUnsafeMutableBytes { try? answeredReader.read(into: $0) }
                break
            }
        }
        reply(connection, exchange.reply, answer: exchange.answer)
        exchange.answer = nil
    }

    /// The request's lines up to the empty line that ends it (or the client's end of writing); nil
    /// when it is over 1 MB or not complete within `requestSeconds`, or the service is stopping.
    private func readRequest(_ connection: FileDescriptor) -> [Substring]? {
        let deadline = ProcessControl.monotonicSeconds() + Self.requestSeconds
        var buffer: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        // A set may carry keys: the raw bytes are wiped, whatever the outcome.
        defer {
            for i in buffer.indices { buffer[i] = 0 }
            for i in chunk.indices { chunk[i] = 0 }
        }
        var lines: [Substring] = []
        var poll = PollSet()
        poll.add(connection, .readable)
        poll.add(stopReader, .readable)
        while true {
            let left = deadline - ProcessControl.monotonicSeconds()
            guard left > 0 else {
                log("wg API: a client sent no complete request within \(Int(Self.requestSeconds)) s; closed")
                return nil
            }
            guard (try? poll.wait(timeoutNanoseconds: Int64(left * 1e9))) != nil else { return nil }
            if !poll.events(at: 1).isEmpty { return nil }
            if poll.events(at: 0).isEmpty { continue }
            let result = chunk.withUnsafeMutableBytes { bytes in Result { () throws(SystemCallError) in try connection.read(into: bytes) } }
            guard case .success(let read) = result else { return nil }
            guard let n = read else { continue }
            if n == 0 { return lines }  // the client stopped writing: what came is the request
            buffer += chunk[0..<n]
            guard buffer.count <= Self.requestLimit else { return nil }
            while let newline = buffer.firstIndex(of: 10) {
                let line = buffer[..<newline]
                if line.isEmpty { return lines }
                lines.append(Substring(String(decoding: line, as: UTF8.self)))
                buffer.removeSubrange(...newline)
            }
        }
    }

    private func reply(_ connection: FileDescriptor, _ text: String, answer: SecretText?) {
        if let answer, (try? answer.append(text)) != nil {
            answer.withUnsafeBytes { send(connection, $0) }
        } else {
            Array(text.utf8).withUnsafeBytes { send(connection, $0) }
        }
    }

    /// Writes all of `bytes` to a client. MSG_NOSIGNAL: a client that hung up must not SIGPIPE the
    /// tunnel's process.
    private func send(_ connection: FileDescriptor, _ bytes: UnsafeRawBufferPointer) {
        var offset = 0
        while offset < bytes.count {
            guard let n = try? connection.send(UnsafeRawBufferPointer(rebasing: bytes[offset...])), n > 0 else { break }
            offset += n
        }
    }
}
