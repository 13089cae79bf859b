import CTunnelgateRuntime
import RuntimeABI
import TUN
import LinuxSystem
import TunnelgateSettings

/// Hosts a runtime behind the callback ABI for one tunnel: starts it with
/// its arguments and secret, moves packets between the TUN and the runtime
/// (or hands it the TUN in the fd path), applies backpressure without loss,
/// follows its status, and stops it exactly once.
public final class CallbackRuntimeHost: HostedRuntime {
    public let settings: CallbackRuntimeSettings
    let library: RuntimeLibrary
    let secret: RuntimeSecret
    let codes: CallbackRuntimeSettings.ResultCodes
    private var handle: UnsafeMutableRawPointer?
    private var writer: TunWriter?
    private var stopped = false
    /// The first code outside `codes` that packet_in or packet_in_batch returned. The packet is refused
    /// (counted), and the next status poll fails the tunnel with this: the host cannot know what such a
    /// code meant (a full queue under the runtime's own numbering would otherwise become a silent drop).
    private var unknownPacketCode: (call: String, code: Int32)?

    /// Set to `off` in the engine's environment, the callback path's TUN is made without a
    /// virtio_net_hdr (one TUN read per packet, as before offloads): for comparisons.
    public static let offloadsVariable = "TUNNELGATE_CALLBACK_OFFLOADS"

    /// Whether the engine makes the TUN of a runtime with these settings with checksum and TCP
    /// segmentation offload: on the callback path, where the plane's loop reads the TUN and cuts
    /// super-packets into segments before the runtime sees them (unless `offloadsVariable` is `off`).
    /// Never on the fd path: the runtime reads the TUN itself and knows no virtio_net_hdr.
    public static func wantsTunOffloads(_ settings: CallbackRuntimeSettings) -> Bool {
        settings.packetPath == .callback && ProcessControl.environmentValue(offloadsVariable) != "off"
    }

    public var wantsTunOffloads: Bool { Self.wantsTunOffloads(settings) }

    /// Loads the library, binds its symbols and reads the secret: every
    /// check that can fail before the kernel is touched.
    public convenience init(_ settings: CallbackRuntimeSettings) throws(RuntimeError) {
        self.init(settings, library: try RuntimeLibrary(settings), secret: try RuntimeSecret.load(settings.secret))
    }

    /// A runtime whose library and secret were handed over (the packet plane).
    public init(_ settings: CallbackRuntimeSettings, library: RuntimeLibrary, secret: RuntimeSecret) {
        self.settings = settings
        self.library = library
        self.secret = secret
        codes = settings.resultCodes
    }

    /// The arguments as passed to start: the configuration's, then Tunnelgate's own.
    func argumentsJSON(mtu: Int, tunFD: Int32?) -> String {
        var args = settings.arguments + ["--tun-mtu", String(mtu)]
        if let tunFD { args += ["--tun-fd", String(tunFD)] }
        return "[" + args.map(jsonString).joined(separator: ",") + "]"
    }

    /// Starts the runtime. The secret stays in memory, to scrub it from what
    /// the runtime says, until stop wipes it.
    public func start(tun: FileDescriptor, mtu: Int) throws(RuntimeError) {
        precondition(handle == nil && !stopped, "start is called once")
        let writer = TunWriter(descriptor: tun.rawValue, mtu: mtu)
        self.writer = writer
        let args = argumentsJSON(mtu: mtu, tunFD: settings.packetPath == .fd ? tun.rawValue : nil)
        var errorBuffer = [CChar](repeating: 0, count: 1024)
        var errorLength = 0
        var h: UnsafeMutableRawPointer?
        let context = Unmanaged.passUnretained(writer).toOpaque()
        let rc = args.withCString { argsPointer in
            secret.withCString { secretPointer in
                library.start(argsPointer, secretPointer, tunWriterCallback, context, &h, &errorBuffer, errorBuffer.count, &errorLength)
            }
        }
        guard rc == codes.ok, let h else {
            let length = min(max(errorLength, 0), errorBuffer.count)
            let message = String(decoding: errorBuffer.prefix(length).prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            throw RuntimeError("the runtime did not start (\(describe(rc))): \(message.isEmpty ? "no message" : secret.scrub(message))")
        }
        handle = h
    }

    /// The runtime's status.
    public func status() throws(RuntimeError) -> RuntimeState {
        guard let handle else { throw RuntimeError("the runtime is not running") }
        if let unknown = unknownPacketCode {
            throw RuntimeError("\(unknown.call) returned \(unknown.code), which is none of the result codes configured for this runtime "
                               + "(\(knownCodes)); declare the runtime's own values in runtime.resultCodes")
        }
        var capacity = 4096
        while true {
            var buffer = [CChar](repeating: 0, count: capacity)
            var length = 0
            let rc = library.status(handle, &buffer, capacity, &length)
            if rc == codes.bufferTooSmall, length > capacity, length < 1 << 20 { capacity = length + 1; continue }
            guard rc == codes.ok else { throw RuntimeError("status failed (\(describe(rc)))") }
            let text = String(decoding: buffer.prefix(min(length, capacity)).prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            let scrubbed = secret.scrub(text)
            return try Self.parseStatus(scrubbed)
        }
    }

    static func parseStatus(_ text: String) throws(RuntimeError) -> RuntimeState {
        guard let value = try? JSONParser.parse(Array(text.utf8)), case .object(let members) = value else {
            throw RuntimeError("the runtime's status is not a JSON object: \(text.prefix(200))")
        }
        func string(_ key: String) -> String? {
            if case .string(let s)? = members.first(where: { $0.key == key })?.value { return s }
            return nil
        }
        guard let phaseText = string("state"), let phase = RuntimeState.Phase(rawValue: phaseText) else {
            throw RuntimeError("the runtime's status has no known state: \(text.prefix(200))")
        }
        return RuntimeState(phase: phase, interface: string("interface"), error: string("error"), json: text)
    }

    /// Sends bytes to the runtime's app_message and returns its reply.
    public func appMessage(_ bytes: [UInt8]) throws(RuntimeError) -> [UInt8] {
        guard let handle else { throw RuntimeError("the runtime is not running") }
        guard let appMessage = library.appMessage else { throw RuntimeError("this runtime takes no app messages (it has no app_message symbol)") }
        var capacity = 4096
        while true {
            var reply = [UInt8](repeating: 0, count: capacity)
            var length = 0
            let rc = bytes.withUnsafeBufferPointer { appMessage(handle, $0.baseAddress, $0.count, &reply, capacity, &length) }
            if rc == codes.bufferTooSmall, length > capacity, length < 1 << 20 { capacity = length; continue }
            guard rc == codes.ok else { throw RuntimeError("app_message failed (\(describe(rc)))") }
            // Scrubbed like status and errors: a reply reaches the user's terminal (`tunnelgate message`).
            return secret.scrub(bytes: Array(reply.prefix(min(length, capacity))))
        }
    }

    /// Sends one packet in; the result says whether to keep it for a retry.
    public func packetIn(_ packet: UnsafePointer<UInt8>, _ len: Int) -> PacketDelivery {
        guard let handle, let packetIn = library.packetIn else { return .refused }
        let rc = packetIn(handle, packet, len)
        if rc == codes.ok { return .accepted }
        if rc == codes.queueFull || rc == codes.invalidState { return .retryLater }
        noteIfUnknown(rc, from: "packet_in")
        return .refused
    }

    /// Sends a batch in through packet_in_batch when the library has it (one call for the batch),
    /// else one packet at a time through packet_in.
    public func packetIn(batch packets: UnsafePointer<UnsafePointer<UInt8>?>, lengths: UnsafePointer<Int>, count: Int) -> BatchDelivery {
        guard let handle, let packetInBatch = library.packetInBatch else {
            return packetInOneByOne(batch: packets, lengths: lengths, count: count)
        }
        var accepted = 0
        let rc = packetInBatch(handle, packets, lengths, count, &accepted)
        if rc == codes.ok { return BatchDelivery(accepted: count, next: .accepted) }
        // A prefix, whatever the runtime wrote: never resend what it took, never skip what it did not.
        let taken = min(max(accepted, 0), count)
        if taken == count { return BatchDelivery(accepted: count, next: .accepted) }
        if rc == codes.queueFull || rc == codes.invalidState { return BatchDelivery(accepted: taken, next: .retryLater) }
        noteIfUnknown(rc, from: "packet_in_batch")
        return BatchDelivery(accepted: taken, next: .refused)
    }

    /// Whether packets go in through packet_in_batch (the library has it and the configuration allows it).
    public var sendsBatches: Bool { library.packetInBatch != nil }

    /// Stops the runtime, once; later calls do nothing. The writer stays
    /// valid until the runtime's stop has returned.
    public func stop() {
        guard !stopped else { return }
        stopped = true
        if let handle { library.stop(handle) }
        writer?.closed.store(true, ordering: .releasing)
        handle = nil
        secret.wipe()
    }

    public var tunWriter: TunWriter? { writer }
    public var packetPath: PacketPath { settings.packetPath }
    public var summary: String {
        "runtime \(settings.library) on the \(settings.packetPath.rawValue) path"
            + (settings.packetPath == .callback ? (sendsBatches ? ", packet_in_batch" : ", packet_in") : "")
    }
    public var startTimeout: Double { settings.startTimeoutSeconds }

    func describe(_ rc: Int32) -> String {
        switch rc {
        case codes.ok: "OK"
        case codes.queueFull: "QUEUE_FULL"
        case codes.invalidState: "INVALID_STATE"
        case codes.invalidArgument: "INVALID_ARGUMENT"
        case codes.bufferTooSmall: "BUFFER_TOO_SMALL"
        case codes.failed: "FAILED"
        default: "code \(rc), not one of runtime.resultCodes (\(knownCodes))"
        }
    }

    /// The configured codes, as the configuration names them: "ok 0, queueFull 1, …".
    var knownCodes: String {
        "ok \(codes.ok), queueFull \(codes.queueFull), invalidState \(codes.invalidState), "
            + "invalidArgument \(codes.invalidArgument), bufferTooSmall \(codes.bufferTooSmall), failed \(codes.failed)"
    }

    /// Remembers the first packet call that answered with a code outside `codes`.
    private func noteIfUnknown(_ rc: Int32, from call: String) {
        switch rc {
        case codes.ok, codes.queueFull, codes.invalidState, codes.invalidArgument, codes.bufferTooSmall, codes.failed: return
        default: if unknownPacketCode == nil { unknownPacketCode = (call, rc) }
        }
    }

    deinit { stop() }
}

/// A JSON string literal.
func jsonString(_ s: String) -> String { JSONValue.quoted(s) }
