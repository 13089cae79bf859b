import Foundation

/// NETrafficDirection (NEPacket.direction).
public enum NETrafficDirection: Int, Sendable {
    case any = 0
    case inbound = 1
    case outbound = 2
}

/// NEPacket: one IP packet and its protocol family (AF_INET, AF_INET6).
open class NEPacket: NSObject, @unchecked Sendable {
    // @unchecked Sendable: immutable after init.
    public let data: Data
    /// sa_family_t, UInt16 on Linux: AF_INET or AF_INET6 (`SocketFamily.ipv4`, `.ipv6`).
    public let protocolFamily: UInt16
    /// `.outbound` for packets read from the TUN (the host sent them into the tunnel).
    public let direction: NETrafficDirection

    public init(data: Data, protocolFamily: UInt16) {
        self.data = data
        self.protocolFamily = protocolFamily
        direction = .any
        super.init()
    }

    init(data: Data, protocolFamily: UInt16, direction: NETrafficDirection) {
        self.data = data
        self.protocolFamily = protocolFamily
        self.direction = direction
        super.init()
    }
}
