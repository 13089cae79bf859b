/// What a runtime says of itself (its status JSON).
public struct RuntimeState: Sendable, Equatable {
    public enum Phase: String, Sendable, Codable { case starting, ready, reconnecting, failed, stopped }
    public var phase: Phase
    public var interface: String?
    public var error: String?
    /// The whole JSON, secrets scrubbed.
    public var json: String

    public init(phase: Phase, interface: String? = nil, error: String? = nil, json: String) {
        self.phase = phase
        self.interface = interface
        self.error = error
        self.json = json
    }

}
