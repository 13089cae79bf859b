import LinuxSystem

/// logind's announcement that the host is about to sleep (`PrepareForSleep(true)` on the system bus,
/// from org.freedesktop.login1 only) and that it woke (`PrepareForSleep(false)`), for a provider whose
/// protocol has `disconnectOnSleep`. The bus is the one sd_bus_open_system(3) uses:
/// `$DBUS_SYSTEM_BUS_ADDRESS`, else /run/dbus/system_bus_socket (tests point the variable at a private
/// bus on which a stand-in owns org.freedesktop.login1 and sends the signal).
///
/// A provider with `disconnectOnSleep` also takes a delay inhibitor (`delayInhibitor`): logind then
/// waits (up to its InhibitDelayMaxSec=, 5 s by default) until the descriptor is closed, which the host
/// does once the tunnel has stopped.
public final class SleepWatch {
    public static let service = "org.freedesktop.login1"
    public static let path = "/org/freedesktop/login1"
    public static let interface = "org.freedesktop.login1.Manager"
    public static let member = "PrepareForSleep"

    private let bus: SystemBus
    private let signal: SystemBus.BooleanSignal
    /// The bus followed, for messages.
    public var address: String { bus.address }

    /// Why sleep cannot be followed here: no system bus, or no logind on it (neither running nor
    /// activatable). One sentence.
    public struct Unavailable: Error, Sendable, CustomStringConvertible {
        public let description: String
    }

    public init() throws(Unavailable) {
        let address = SystemBus.systemAddress
        let bus: SystemBus
        do throws(SystemBusError) { bus = try SystemBus(address: address, timeout: 2) } catch {
            throw Unavailable(description: "no system bus (\(error))")
        }
        var present = false
        do throws(SystemBusError) {
            present = try bus.callBus("NameHasOwner", [.string(Self.service)]) == [.boolean(true)]
            if !present, case .array(_, let names)? = try bus.callBus("ListActivatableNames").first {
                present = names.contains(.string(Self.service))
            }
        } catch {
            throw Unavailable(description: "cannot ask the system bus \(address) for logind: \(error)")
        }
        guard present else {
            throw Unavailable(description: "no logind on the system bus \(address) (\(Self.service) has no owner and is not activatable)")
        }
        do throws(SystemBusError) {
            signal = try bus.subscribe(sender: Self.service, path: Self.path, interface: Self.interface, member: Self.member)
        } catch {
            throw Unavailable(description: "cannot follow logind on \(address): \(error)")
        }
        self.bus = bus
    }

    /// logind's `Inhibit("sleep", who, why, "delay")`: while the returned descriptor is open, logind
    /// delays sleep after PrepareForSleep(true) (until it is closed, or InhibitDelayMaxSec= passed).
    /// Close it once ready for sleep. Equivalent to: `systemd-inhibit --what=sleep --mode=delay`.
    public func delayInhibitor(who: String, why: String) throws(SystemBusError) -> FileDescriptor {
        try bus.callReturningDescriptor(Self.service, Self.path, Self.interface, "Inhibit",
                                        [.string("sleep"), .string(who), .string(why), .string("delay")])
    }

    /// The bus connection's socket: poll it for input, then call `next()`.
    public var descriptor: FileDescriptor { FileDescriptor(rawValue: bus.descriptor) }

    /// What arrived since the last call: true for each "about to sleep", false for each "woke", in
    /// order. Throws when the bus connection is gone.
    public func next() throws(SystemBusError) -> [Bool] {
        try bus.process()
        defer { signal.received.removeAll() }
        return signal.received
    }
}
