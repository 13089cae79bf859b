/// As NSObject subclasses do on iOS (NEVPNConnection is one there): a connection equals itself only,
/// and hashes by identity, so `manager.connection == other.connection`, `Set<NEVPNConnection>` and
/// dictionary keys work as iOS code expects. (NEVPNManager and NEVPNProtocol are NSObject subclasses
/// here and get this from NSObject; when NEVPNConnection becomes one, this file goes.)
extension NEVPNConnection: Hashable {
    public static func == (a: NEVPNConnection, b: NEVPNConnection) -> Bool { a === b }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(ObjectIdentifier(self))
    }
}
