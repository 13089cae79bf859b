import Foundation

/// The key-value observable properties that a provider's connections have in common (NWTCPConnection and
/// NWUDPSession): `state` (as its raw value), `isViable`, `hasBetterPath`. One place for how they are
/// boxed for observers (NSNumber, as iOS boxes them), which key a Swift key path names, and in which
/// order a change is told (isViable, hasBetterPath, then state, so an observer of state sees the rest set).
struct ConnectionKeyValues: Equatable {
    /// The observable keys (what KeyValueObservers is made with).
    static let keys: Set<String> = ["state", "isViable", "hasBetterPath"]

    var state: Int
    var isViable: Bool
    var hasBetterPath: Bool

    /// The value of `key` as an observer hears it (any key but state and isViable is hasBetterPath).
    func boxed(forKey key: String) -> Any {
        switch key {
        case "state": return NSNumber(value: state)
        case "isViable": return NSNumber(value: isViable)
        default: return NSNumber(value: hasBetterPath)
        }
    }

    /// Tells `object`'s observers of each property that differs between `old` and `new`. Called on the
    /// object's callback queue.
    static func notify(_ observers: KeyValueObservers, of object: NSObject, old: ConnectionKeyValues, new: ConnectionKeyValues) {
        if old.isViable != new.isViable {
            observers.change("isViable", of: object, old: NSNumber(value: old.isViable), new: NSNumber(value: new.isViable))
        }
        if old.hasBetterPath != new.hasBetterPath {
            observers.change("hasBetterPath", of: object, old: NSNumber(value: old.hasBetterPath), new: NSNumber(value: new.hasBetterPath))
        }
        if old.state != new.state {
            observers.change("state", of: object, old: NSNumber(value: old.state), new: NSNumber(value: new.state))
        }
    }

    /// The key a Swift key path of the three names; another key path is named by its description (it is
    /// registered and never notified: KeyValueObservers.add).
    static func key(_ keyPath: AnyKeyPath, state: AnyKeyPath, isViable: AnyKeyPath, hasBetterPath: AnyKeyPath) -> String {
        if keyPath == state { return "state" }
        if keyPath == isViable { return "isViable" }
        if keyPath == hasBetterPath { return "hasBetterPath" }
        return "\(keyPath)"
    }

    /// Reads a boxed value of `key` back as the key path's `Value`: state through `makeState` (the raw
    /// value's enum), the others as Bool.
    static func reader<Value>(key: String, makeState: @escaping (Int) -> Any?) -> (Any) -> Value? {
        { boxed in
            guard let n = boxed as? NSNumber else { return nil }
            return (key == "state" ? makeState(n.intValue) as Any : n.boolValue as Any) as? Value
        }
    }
}
