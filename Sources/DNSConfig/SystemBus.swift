import CSystemd
import LinuxSystem

/// A client connection to a D-Bus message bus, through libsystemd's sd-bus:
/// blocking method calls with a timeout, arguments and results as
/// `DBusValue`s. Every sd-bus call of Tunnelgate is in this file.
///
/// One connection per operation: it is opened, used by the thread that
/// opened it and closed (sd-bus objects are not thread-safe), so the type
/// is not Sendable.
final class SystemBus {
    /// The sd_bus object; owned, closed and freed in deinit.
    private let bus: OpaquePointer
    /// The address connected to, for messages.
    let address: String
    /// Seconds a method call waits for its reply.
    let timeout: Double

    /// The system bus the way sd_bus_open_system(3) finds it:
    /// $DBUS_SYSTEM_BUS_ADDRESS, else unix:path=/run/dbus/system_bus_socket.
    static var systemAddress: String {
        ProcessControl.environmentValue("DBUS_SYSTEM_BUS_ADDRESS") ?? "unix:path=" + escaped(defaultSocket)
    }

    static let defaultSocket = "/run/dbus/system_bus_socket"

    /// Connects to `address` (a D-Bus address: "unix:path=/run/dbus/system_bus_socket")
    /// as a bus client. The socket is connected here; authentication and
    /// Hello complete with the first call.
    init(address: String, timeout: Double = 5) throws(SystemBusError) {
        self.address = address
        self.timeout = timeout
        var made: OpaquePointer?
        let operation = "connect to the D-Bus bus \(address)"
        var rc = sd_bus_new(&made)
        guard rc >= 0, let made else { throw SystemBusError(operation, .local(Errno(rawValue: -rc))) }
        rc = sd_bus_set_address(made, address)
        if rc >= 0 { rc = sd_bus_set_bus_client(made, 1) }
        if rc >= 0 { rc = sd_bus_set_method_call_timeout(made, Self.microseconds(timeout)) }
        if rc >= 0 { rc = sd_bus_start(made) }
        guard rc >= 0 else {
            sd_bus_flush_close_unref(made)
            throw SystemBusError(operation, .local(Errno(rawValue: -rc)))
        }
        bus = made
    }

    deinit {
        sd_bus_flush_close_unref(bus)
    }

    /// Calls `interface.member` on `path` of `destination` with `arguments`
    /// and waits (at most `timeout` seconds) for the reply's values.
    func call(_ destination: String, _ path: String, _ interface: String, _ member: String,
              _ arguments: [DBusValue] = []) throws(SystemBusError) -> [DBusValue] {
        try exchange(destination, path, interface, member, arguments) { reply, operation throws(SystemBusError) in
            do throws(SystemBusError.Reason) {
                return try Self.readAll(reply)
            } catch {
                throw SystemBusError(operation, error)
            }
        }
    }

    /// A call whose reply is one file descriptor (type `h`, logind's Inhibit): a close-on-exec copy,
    /// the caller's to close (the reply's own is closed with the reply).
    func callReturningDescriptor(_ destination: String, _ path: String, _ interface: String, _ member: String,
                                 _ arguments: [DBusValue]) throws(SystemBusError) -> FileDescriptor {
        try exchange(destination, path, interface, member, arguments) { reply, operation throws(SystemBusError) in
            var fd: Int32 = -1
            let rc = sd_bus_message_read_basic(reply, Self.typeCode("h"), &fd)
            guard rc > 0, fd >= 0 else { throw SystemBusError(operation, .unexpectedReply("no file descriptor in the reply")) }
            do throws(SystemCallError) {
                return try FileDescriptor(rawValue: fd).duplicate(atLeast: 3)
            } catch {
                throw SystemBusError(operation + ": keeping the descriptor", .local(error.errno))
            }
        }
    }

    /// The method call both of the above make: builds it, waits for the reply (or the error's name and
    /// message), and hands the reply, valid only during `read`, with the operation's description to `read`.
    private func exchange<T>(_ destination: String, _ path: String, _ interface: String, _ member: String,
                             _ arguments: [DBusValue],
                             read: (OpaquePointer, String) throws(SystemBusError) -> T) throws(SystemBusError) -> T {
        let operation = "\(interface).\(member)(\(arguments.map(\.description).joined(separator: ", ")))"
        if let problem = arguments.lazy.compactMap(\.problem).first {
            preconditionFailure("\(operation): \(problem): a bug in Tunnelgate")
        }
        var message: OpaquePointer?
        var rc = sd_bus_message_new_method_call(bus, &message, destination, path, interface, member)
        guard rc >= 0, let message else { throw SystemBusError(operation, .local(Errno(rawValue: -rc))) }
        defer { sd_bus_message_unref(message) }
        for argument in arguments {
            rc = Self.append(argument, to: message)
            guard rc >= 0 else { throw SystemBusError(operation + ": building the message", .local(Errno(rawValue: -rc))) }
        }
        var error = sd_bus_error(name: nil, message: nil, _need_free: 0)
        defer { sd_bus_error_free(&error) }
        var reply: OpaquePointer?
        rc = sd_bus_call(bus, message, Self.microseconds(timeout), &error, &reply)
        defer { if let reply { sd_bus_message_unref(reply) } }
        guard rc >= 0, let reply else {
            if let name = error.name {
                throw SystemBusError(operation, .remote(name: String(cString: name),
                                                        message: error.message.map { String(cString: $0) } ?? ""))
            }
            throw SystemBusError(operation, .local(Errno(rawValue: -rc)))
        }
        return try read(reply, operation)
    }

    /// A call to the bus daemon itself (org.freedesktop.DBus).
    func callBus(_ member: String, _ arguments: [DBusValue] = []) throws(SystemBusError) -> [DBusValue] {
        try call("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus", member, arguments)
    }

    /// This connection's unique name on the bus (":1.42").
    var uniqueName: String? {
        var name: UnsafePointer<CChar>?
        guard sd_bus_get_unique_name(bus, &name) >= 0, let name else { return nil }
        return String(cString: name)
    }

    /// The sd_bus object, for tests that drive the other side of a call.
    var handle: OpaquePointer { bus }

    // MARK: Signals

    /// A subscription to one signal whose first argument is a boolean (logind's PrepareForSleep):
    /// the match rule stays on the bus while this object lives; `received` collects the values that
    /// arrived, in order, as `process()` dispatches them.
    final class BooleanSignal {
        fileprivate var slot: OpaquePointer?
        var received: [Bool] = []
        /// Signals of that name that did not start with a boolean.
        var malformed = 0
        deinit { if let slot { sd_bus_slot_unref(slot) } }
    }

    /// Subscribes to `interface.member` on `path` sent by `sender` (a well-known name: the bus delivers
    /// only what its owner sends, so nobody else can fake it). Equivalent to:
    /// AddMatch("type='signal',sender=…,path=…,interface=…,member=…").
    func subscribe(sender: String, path: String, interface: String, member: String) throws(SystemBusError) -> BooleanSignal {
        let signal = BooleanSignal()
        let callback: sd_bus_message_handler_t = { message, userdata, _ in
            guard let message, let userdata else { return 0 }
            let signal = Unmanaged<BooleanSignal>.fromOpaque(userdata).takeUnretainedValue()
            var value: Int32 = 0
            if sd_bus_message_read_basic(message, CChar(UInt8(ascii: "b")), &value) > 0 {
                signal.received.append(value != 0)
            } else {
                signal.malformed += 1
            }
            return 0
        }
        // The slot holds an unretained pointer to `signal`, which owns the slot: unref'd in its deinit,
        // before the object goes.
        let rc = sd_bus_match_signal(bus, &signal.slot, sender, path, interface, member, callback,
                                     Unmanaged.passUnretained(signal).toOpaque())
        guard rc >= 0 else { throw SystemBusError("AddMatch(\(interface).\(member) from \(sender))", .local(Errno(rawValue: -rc))) }
        return signal
    }

    /// The connection's socket, to poll (for `events`) before `process()`.
    var descriptor: Int32 { sd_bus_get_fd(bus) }

    /// Dispatches everything that arrived (signal callbacks run here) and sends what is queued.
    /// Throws when the connection is gone (the bus went away: ECONNRESET, ENOTCONN).
    func process() throws(SystemBusError) {
        while true {
            let rc = sd_bus_process(bus, nil)
            if rc < 0 { throw SystemBusError("reading the D-Bus bus \(address)", .local(Errno(rawValue: -rc))) }
            if rc == 0 { return }
        }
    }

    // MARK: Encoding

    /// Appends `value` to `message` (sd_bus_message_append_basic /
    /// open_container / append_array). Returns sd-bus's result: negative errno on failure.
    static func append(_ value: DBusValue, to message: OpaquePointer) -> Int32 {
        func basic<T: BitwiseCopyable>(_ code: String, _ v: T) -> Int32 {
            var v = v
            return sd_bus_message_append_basic(message, typeCode(code), &v)
        }
        func text(_ code: String, _ v: String) -> Int32 {
            v.withCString { sd_bus_message_append_basic(message, typeCode(code), $0) }
        }
        func container(_ code: String, _ contents: String, _ items: [DBusValue]) -> Int32 {
            var rc = sd_bus_message_open_container(message, typeCode(code), contents)
            for item in items where rc >= 0 { rc = append(item, to: message) }
            return rc >= 0 ? sd_bus_message_close_container(message) : rc
        }
        switch value {
        case .byte(let v): return basic("y", v)
        case .boolean(let v): return basic("b", Int32(v ? 1 : 0))
        case .int16(let v): return basic("n", v)
        case .uint16(let v): return basic("q", v)
        case .int32(let v): return basic("i", v)
        case .uint32(let v): return basic("u", v)
        case .int64(let v): return basic("x", v)
        case .uint64(let v): return basic("t", v)
        case .double(let v): return basic("d", v)
        case .string(let v): return text("s", v)
        case .objectPath(let v): return text("o", v)
        case .signature(let v): return text("g", v)
        case .bytes(let v):
            return v.withUnsafeBytes { sd_bus_message_append_array(message, typeCode("y"), $0.baseAddress, $0.count) }
        case .array(let element, let items): return container("a", element, items)
        case .structure(let fields): return container("r", DBusValue.signature(of: fields), fields)
        case .dictionaryEntry(let key, let item): return container("e", key.signature + item.signature, [key, item])
        case .variant(let inner): return container("v", inner.signature, [inner])
        }
    }

    // MARK: Decoding

    /// Every value from the read position to the end of the current container.
    static func readAll(_ message: OpaquePointer) throws(SystemBusError.Reason) -> [DBusValue] {
        var values: [DBusValue] = []
        while true {
            var type: CChar = 0
            var contents: UnsafePointer<CChar>?
            let rc = sd_bus_message_peek_type(message, &type, &contents)
            guard rc >= 0 else { throw .local(Errno(rawValue: -rc)) }
            if rc == 0 { return values }
            values.append(try readOne(message, type: type, contents: contents.map { String(cString: $0) }))
        }
    }

    private static func readOne(_ message: OpaquePointer, type: CChar,
                                contents: String?) throws(SystemBusError.Reason) -> DBusValue {
        func check(_ rc: Int32) throws(SystemBusError.Reason) {
            guard rc >= 0 else { throw .local(Errno(rawValue: -rc)) }
        }
        func basic<T: BitwiseCopyable>(_ initial: T) throws(SystemBusError.Reason) -> T {
            var v = initial
            try check(sd_bus_message_read_basic(message, type, &v))
            return v
        }
        func text() throws(SystemBusError.Reason) -> String {
            var pointer: UnsafePointer<CChar>?
            try check(sd_bus_message_read_basic(message, type, &pointer))
            return pointer.map { String(cString: $0) } ?? ""
        }
        func inside(_ code: String) throws(SystemBusError.Reason) -> [DBusValue] {
            try check(sd_bus_message_enter_container(message, typeCode(code), contents))
            let values = try readAll(message)
            try check(sd_bus_message_exit_container(message))
            return values
        }
        switch Character(Unicode.Scalar(UInt8(bitPattern: type))) {
        case "y": return .byte(try basic(UInt8(0)))
        case "b": return .boolean(try basic(Int32(0)) != 0)
        case "n": return .int16(try basic(Int16(0)))
        case "q": return .uint16(try basic(UInt16(0)))
        case "i": return .int32(try basic(Int32(0)))
        case "u": return .uint32(try basic(UInt32(0)))
        case "x": return .int64(try basic(Int64(0)))
        case "t": return .uint64(try basic(UInt64(0)))
        case "d": return .double(try basic(Double(0)))
        case "s": return .string(try text())
        case "o": return .objectPath(try text())
        case "g": return .signature(try text())
        case "a" where contents == "y":
            var pointer: UnsafeRawPointer?
            var size = 0
            try check(sd_bus_message_read_array(message, typeCode("y"), &pointer, &size))
            guard let pointer, size > 0 else { return .bytes([]) }
            return .bytes(Array(UnsafeRawBufferPointer(start: pointer, count: size)))
        case "a":
            return .array(element: contents ?? "", try inside("a"))
        case "r":
            return .structure(try inside("r"))
        case "e":
            let pair = try inside("e")
            guard pair.count == 2 else { throw .unexpectedReply("a dictionary entry of \(pair.count) values") }
            return .dictionaryEntry(pair[0], pair[1])
        case "v":
            let inner = try inside("v")
            guard inner.count == 1 else { throw .unexpectedReply("a variant of \(inner.count) values") }
            return .variant(inner[0])
        default:
            throw .unexpectedReply("type '\(Character(Unicode.Scalar(UInt8(bitPattern: type))))' is not supported")
        }
    }

    // MARK: Helpers

    static func typeCode(_ code: String) -> CChar {
        CChar(bitPattern: code.utf8.first!)
    }

    static func microseconds(_ seconds: Double) -> UInt64 {
        UInt64(max(seconds, 0) * 1_000_000)
    }

    /// A D-Bus address value with every byte outside [-0-9A-Za-z_/.\*] as %XX (D-Bus specification, "Server Addresses").
    static func escaped(_ value: String) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        for byte in value.utf8 {
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                 UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "-"), UInt8(ascii: "_"),
                 UInt8(ascii: "/"), UInt8(ascii: "."), UInt8(ascii: "\\"), UInt8(ascii: "*"):
                out.append(byte)
            default:
                out += [UInt8(ascii: "%"), digits[Int(byte >> 4)], digits[Int(byte & 0x0f)]]
            }
        }
        return String(decoding: out, as: UTF8.self)
    }
}
