import CTunnelgateRuntime
import LinuxSystem
import RuntimeABI
import TunnelgateSettings

/// A runtime's shared library, loaded with dlopen and its entry points
/// bound by the configured names. Loading happens before anything touches
/// the kernel, so a missing library or symbol changes nothing.
public final class RuntimeLibrary {
    public typealias Start = @convention(c) (UnsafePointer<CChar>?, UnsafePointer<CChar>?, tunnelgate_runtime_writer?,
                                             UnsafeMutableRawPointer?, UnsafeMutablePointer<UnsafeMutableRawPointer?>?,
                                             UnsafeMutablePointer<CChar>?, Int, UnsafeMutablePointer<Int>?) -> Int32
    public typealias PacketIn = @convention(c) (UnsafeMutableRawPointer?, UnsafePointer<UInt8>?, Int) -> Int32
    public typealias PacketInBatch = @convention(c) (UnsafeMutableRawPointer?, UnsafePointer<UnsafePointer<UInt8>?>?,
                                                     UnsafePointer<Int>?, Int, UnsafeMutablePointer<Int>?) -> Int32
    public typealias Status = @convention(c) (UnsafeMutableRawPointer?, UnsafeMutablePointer<CChar>?, Int, UnsafeMutablePointer<Int>?) -> Int32
    public typealias Stop = @convention(c) (UnsafeMutableRawPointer?) -> Void
    public typealias AppMessage = @convention(c) (UnsafeMutableRawPointer?, UnsafePointer<UInt8>?, Int,
                                                  UnsafeMutablePointer<UInt8>?, Int, UnsafeMutablePointer<Int>?) -> Int32

    public let path: String
    let library: DynamicLibrary
    let start: Start
    let packetIn: PacketIn?
    /// The optional batch entry point; nil: packets go in one at a time through packetIn.
    let packetInBatch: PacketInBatch?
    let status: Status
    let stop: Stop
    let appMessage: AppMessage?

    public convenience init(_ settings: CallbackRuntimeSettings) throws(RuntimeError) {
        let h = try Self.load(settings.library) { "cannot load runtime library \(settings.library): \($0)" }
        try self.init(settings, handle: h)
    }

    /// The library from a descriptor the engine handed over (a sealed copy of the file it checked), in
    /// the packet plane: loaded through /proc/self/fd/N, named `settings.library` in messages.
    public convenience init(_ settings: CallbackRuntimeSettings, descriptor: FileDescriptor) throws(RuntimeError) {
        let h = try Self.load(descriptor: descriptor, named: settings.library) { "cannot load runtime library \(settings.library): \($0)" }
        try self.init(settings, handle: h)
    }

    private init(_ settings: CallbackRuntimeSettings, handle h: DynamicLibrary) throws(RuntimeError) {
        path = settings.library
        library = h
        func bind(_ name: String, _ key: String) throws(RuntimeError) -> UnsafeMutableRawPointer {
            guard let symbol = h.symbol(named: name) else {
                throw RuntimeError("runtime library \(settings.library) has no symbol '\(name)' (runtime.symbols.\(key))")
            }
            return symbol
        }
        do throws(RuntimeError) {
            start = unsafeBitCast(try bind(settings.symbols.start, "start"), to: Start.self)
            status = unsafeBitCast(try bind(settings.symbols.status, "status"), to: Status.self)
            stop = unsafeBitCast(try bind(settings.symbols.stop, "stop"), to: Stop.self)
            // The fd path never calls packet_in; the callback path cannot work without it.
            if settings.packetPath == .callback {
                packetIn = unsafeBitCast(try bind(settings.symbols.packetIn, "packetIn"), to: PacketIn.self)
            } else {
                packetIn = h.symbol(named: settings.symbols.packetIn).map { unsafeBitCast($0, to: PacketIn.self) }
            }
            // packet_in_batch is optional: a library without the default name (MEHS's has none) gets its
            // packets one by one. A name the configuration chose must exist: a typo must not silently
            // turn batching off.
            if let name = settings.symbols.packetInBatch, settings.packetPath == .callback {
                if let symbol = h.symbol(named: name) {
                    packetInBatch = unsafeBitCast(symbol, to: PacketInBatch.self)
                } else if name != CallbackRuntimeSettings.Symbols().packetInBatch {
                    throw RuntimeError("runtime library \(settings.library) has no symbol '\(name)' (runtime.symbols.packetInBatch)")
                } else {
                    packetInBatch = nil
                }
            } else {
                packetInBatch = nil
            }
        } catch {
            h.close()
            throw error
        }
        // app_message is optional: without it `tunnelgate message` says so.
        appMessage = settings.symbols.appMessage.flatMap { h.symbol(named: $0) }.map { unsafeBitCast($0, to: AppMessage.self) }
    }

    // The library stays loaded for the life of the process: a runtime's
    // threads may outlive a failed stop, and unloading code they run would crash.

    /// dlopen of the file at `path` as a TrustedFile (StrictModes: no group- or other-writable file or
    /// directory on the way) through /proc/self/fd/N, so that the file checked is the file loaded.
    /// The descriptor stays open for the life of the process, as the library stays loaded: no other
    /// file can take its number, and so its /proc/self/fd name, while the library is mapped.
    static func load(_ path: String, error message: (String) -> String) throws(RuntimeError) -> DynamicLibrary {
        let file: TrustedFile
        do { file = try TrustedFile.open(path) } catch { throw RuntimeError(message(error.description)) }
        do {
            return try DynamicLibrary.open(file.procPath)
        } catch {
            file.close()
            throw RuntimeError(message(error.reason.replacingOccurrences(of: file.procPath, with: path)))
        }
    }
}

extension RuntimeLibrary {
    /// dlopen of a handed-over descriptor through /proc/self/fd/N; the descriptor stays open for the
    /// life of the process, as the library stays loaded. Errors say `name`, not the /proc path.
    static func load(descriptor: FileDescriptor, named name: String, error message: (String) -> String) throws(RuntimeError) -> DynamicLibrary {
        do {
            return try DynamicLibrary.open(descriptor.procPath)
        } catch {
            throw RuntimeError(message(error.reason.replacingOccurrences(of: descriptor.procPath, with: name)))
        }
    }
}

extension String {
    /// `self` with every `target` replaced (FoundationEssentials-free, for dlerror's text).
    func replacingOccurrences(of target: String, with replacement: String) -> String {
        guard !target.isEmpty else { return self }
        var out = ""
        var rest = Substring(self)
        while let range = rest.firstRange(of: target) {
            out += rest[..<range.lowerBound]
            out += replacement
            rest = rest[range.upperBound...]
        }
        return out + rest
    }
}
