import Foundation
import Synchronization

// Key-value observing as iOS code uses it on NetworkExtension's objects. swift-corelibs-foundation has
// none of it (no NSKeyValueObservingOptions, no NSKeyValueChangeKey, no NSObject.addObserver or
// observeValue), so these are declared here with Apple's names and raw values, and the classes whose
// properties iOS code observes (NWTCPConnection, NWUDPSession) keep their own observers.

/// NSKeyValueObservingOptions, Apple's raw values.
public struct NSKeyValueObservingOptions: OptionSet, Sendable {
    public let rawValue: UInt
    public init(rawValue: UInt) { self.rawValue = rawValue }
    /// The change's dictionary holds the new value (`.newKey`).
    public static let new = NSKeyValueObservingOptions(rawValue: 0x01)
    /// The change's dictionary holds the old value (`.oldKey`).
    public static let old = NSKeyValueObservingOptions(rawValue: 0x02)
    /// One notification at once, from addObserver, with the current value as new.
    public static let initial = NSKeyValueObservingOptions(rawValue: 0x04)
    /// A notification before each change too (`.notificationIsPriorKey`: true; `.oldKey` with `.old`).
    public static let prior = NSKeyValueObservingOptions(rawValue: 0x08)
}

/// NSKeyValueChange, Apple's raw values. These objects' observed properties only ever change by setting.
public enum NSKeyValueChange: UInt, Sendable {
    case setting = 1
    case insertion = 2
    case removal = 3
    case replacement = 4
}

/// NSKeyValueChangeKey: the keys of a change's dictionary, with Apple's string values.
public struct NSKeyValueChangeKey: RawRepresentable, Hashable, Sendable {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public init(_ rawValue: String) { self.rawValue = rawValue }
    /// An NSNumber holding NSKeyValueChange's raw value (always `.setting` here).
    public static let kindKey = NSKeyValueChangeKey("kind")
    public static let newKey = NSKeyValueChangeKey("new")
    public static let oldKey = NSKeyValueChangeKey("old")
    public static let indexesKey = NSKeyValueChangeKey("indexes")
    public static let notificationIsPriorKey = NSKeyValueChangeKey("notificationIsPrior")
}

/// What receives the notifications (Linux only). On iOS that is any NSObject overriding
/// `observeValue(forKeyPath:of:change:context:)`; Foundation on Linux declares no such method, so it
/// cannot be overridden there. NEProvider (every provider) declares it, so a provider's
/// `override func observeValue(…)` compiles unchanged; another class observing adopts this protocol
/// (and writes the method without `override`).
public protocol TunnelgateKeyValueObserving: AnyObject {
    func observeValue(forKeyPath keyPath: String?, of object: Any?, change: [NSKeyValueChangeKey: Any]?,
                      context: UnsafeMutableRawPointer?)
}

extension NEProvider: TunnelgateKeyValueObserving {}

/// The observers of one object's properties, and the delivery of its changes. Each change is delivered
/// synchronously by whoever calls `change`, outside the lock, in registration order; an observer that
/// went away (weakly held: iOS does not retain observers) is skipped.
final class KeyValueObservers: Sendable {
    private struct Entry: @unchecked Sendable {
        // @unchecked Sendable: the context is the observer's own opaque pointer, compared and handed back only.
        weak var observer: AnyObject?
        let keyPath: String
        let options: NSKeyValueObservingOptions
        let context: UnsafeMutableRawPointer?
    }

    /// The key paths whose changes are delivered.
    let keyPaths: Set<String>
    private let entries = Mutex<[Entry]>([])

    init(keyPaths: Set<String>) { self.keyPaths = keyPaths }

    /// Adds an observer; with `.initial` it hears the current value (`current()`) before this returns.
    func add(_ observer: NSObject, keyPath: String, options: NSKeyValueObservingOptions,
             context: UnsafeMutableRawPointer?, of object: AnyObject, current: () -> Any) {
        // Another key is registered and never changes (no notification, no .initial): these objects'
        // other properties are constant or not observable on Linux.
        guard keyPaths.contains(keyPath) else {
            entries.withLock { $0.append(Entry(observer: observer, keyPath: keyPath, options: options, context: context)) }
            return
        }
        entries.withLock { $0.append(Entry(observer: observer, keyPath: keyPath, options: options, context: context)) }
        if options.contains(.initial) {
            var change: [NSKeyValueChangeKey: Any] = [.kindKey: NSNumber(value: NSKeyValueChange.setting.rawValue)]
            if options.contains(.new) { change[.newKey] = current() }
            Self.deliver(to: observer, keyPath: keyPath, of: object, change: change, context: context)
        }
    }

    /// Removes the observer's most recent registration for `keyPath` (with `context` when given, as
    /// `removeObserver(_:forKeyPath:context:)`). Removing what is not registered does nothing (iOS raises).
    func remove(_ observer: NSObject, keyPath: String, context: UnsafeMutableRawPointer?, matchingContext: Bool) {
        entries.withLock { list in
            if let i = list.lastIndex(where: { $0.observer === observer && $0.keyPath == keyPath && (!matchingContext || $0.context == context) }) {
                list.remove(at: i)
            }
            list.removeAll { $0.observer == nil }
        }
    }

    /// Whether anyone observes `keyPath`.
    func isObserved(_ keyPath: String) -> Bool { entries.withLock { $0.contains { $0.keyPath == keyPath && $0.observer != nil } } }

    /// Delivers one change of `keyPath` from `old` to `new`: prior notifications first (to those that
    /// asked for `.prior`), then the change, each observer in the order it registered.
    func change(_ keyPath: String, of object: AnyObject, old: Any, new: Any) {
        let targets = entries.withLock { $0.filter { $0.keyPath == keyPath } }
        for e in targets where e.options.contains(.prior) {
            guard let o = e.observer else { continue }
            var change: [NSKeyValueChangeKey: Any] = [.kindKey: NSNumber(value: NSKeyValueChange.setting.rawValue),
                                                      .notificationIsPriorKey: NSNumber(value: true)]
            if e.options.contains(.old) { change[.oldKey] = old }
            Self.deliver(to: o, keyPath: keyPath, of: object, change: change, context: e.context)
        }
        for e in targets {
            guard let o = e.observer else { continue }
            var change: [NSKeyValueChangeKey: Any] = [.kindKey: NSNumber(value: NSKeyValueChange.setting.rawValue)]
            if e.options.contains(.new) { change[.newKey] = new }
            if e.options.contains(.old) { change[.oldKey] = old }
            Self.deliver(to: o, keyPath: keyPath, of: object, change: change, context: e.context)
        }
    }

    private static func deliver(to observer: AnyObject, keyPath: String, of object: AnyObject,
                                change: [NSKeyValueChangeKey: Any], context: UnsafeMutableRawPointer?) {
        if let o = observer as? TunnelgateKeyValueObserving {
            o.observeValue(forKeyPath: keyPath, of: object, change: change, context: context)
        } else if let o = observer as? ClosureObserver {
            o.handler(object, change)
        }
    }
}

/// The observer behind `observe(_:options:changeHandler:)`.
final class ClosureObserver: NSObject, @unchecked Sendable {
    // @unchecked Sendable: `handler` is immutable.
    let handler: (AnyObject, [NSKeyValueChangeKey: Any]) -> Void
    init(_ handler: @escaping (AnyObject, [NSKeyValueChangeKey: Any]) -> Void) { self.handler = handler }
}

/// NSKeyValueObservation: what `observe(\.state, options:) { object, change in … }` returns. The
/// observation lasts until `invalidate()` or until this object is released, as on iOS.
public final class NSKeyValueObservation: NSObject, @unchecked Sendable {
    // @unchecked Sendable: `end` runs once, under the lock of the observers it removes from.
    private let end: Mutex<(@Sendable () -> Void)?>
    init(end: @escaping @Sendable () -> Void) { self.end = Mutex(end) }
    public func invalidate() {
        let e = end.withLock { e -> (@Sendable () -> Void)? in defer { e = nil }; return e }
        e?()
    }
    deinit { invalidate() }
}

/// NSKeyValueObservedChange: the change a `observe(_:options:changeHandler:)` handler gets.
public struct NSKeyValueObservedChange<Value> {
    public typealias Kind = NSKeyValueChange
    public let kind: Kind
    public let newValue: Value?
    public let oldValue: Value?
    public let indexes: IndexSet?
    public let isPrior: Bool
}

/// The KVO calls iOS code makes on NWTCPConnection and NWUDPSession, over their `KeyValueObservers`.
protocol TunnelgateObservable: NSObject {
    var keyValueObservers: KeyValueObservers { get }
    /// The serial queue on which the object changes its observable properties and notifies.
    var callbacks: DispatchQueue { get }
    /// The current value of an observable key, boxed as iOS boxes it (NSNumber).
    func observableValue(forKey key: String) -> Any
}

/// Marks the callback queues, so that work for them is run in place when already on one.
let callbackQueueKey = DispatchSpecificKey<ObjectIdentifier>()

/// A connection's serial callback queue, marked with its own identity.
func makeCallbackQueue(_ label: String) -> DispatchQueue {
    let queue = DispatchQueue(label: label)
    queue.setSpecific(key: callbackQueueKey, value: ObjectIdentifier(queue))
    return queue
}

extension TunnelgateObservable {
    /// Runs `body` on the callback queue (in place when already there), so that a registration is
    /// ordered with the changes: an observer hears every change after its `.initial` value, none before.
    func serially(_ body: () -> Void) {
        if DispatchQueue.getSpecific(key: callbackQueueKey) == ObjectIdentifier(callbacks) { body() } else { callbacks.sync(execute: body) }
    }

    func register(_ observer: NSObject, keyPath: String, options: NSKeyValueObservingOptions, context: UnsafeMutableRawPointer?) {
        serially { keyValueObservers.add(observer, keyPath: keyPath, options: options, context: context, of: self) { observableValue(forKey: keyPath) } }
    }

    func unregister(_ observer: NSObject, keyPath: String, context: UnsafeMutableRawPointer?, matchingContext: Bool) {
        serially { keyValueObservers.remove(observer, keyPath: keyPath, context: context, matchingContext: matchingContext) }
    }
    func observe<Value>(key: String, options: NSKeyValueObservingOptions, read: @escaping (Any) -> Value?,
                        changeHandler: @escaping (Self, NSKeyValueObservedChange<Value>) -> Void) -> NSKeyValueObservation {
        let observer = ClosureObserver { object, change in
            guard let object = object as? Self else { return }
            let kind = NSKeyValueChange(rawValue: (change[.kindKey] as? NSNumber)?.uintValue ?? 1) ?? .setting
            changeHandler(object, NSKeyValueObservedChange(kind: kind, newValue: change[.newKey].flatMap(read),
                                                           oldValue: change[.oldKey].flatMap(read), indexes: nil,
                                                           isPrior: (change[.notificationIsPriorKey] as? NSNumber)?.boolValue ?? false))
        }
        // The observation holds the observer (the registry holds it weakly) and removes it when it ends.
        let observers = keyValueObservers
        register(observer, keyPath: key, options: options, context: nil)
        return NSKeyValueObservation { observers.remove(observer, keyPath: key, context: nil, matchingContext: false) }
    }
}
