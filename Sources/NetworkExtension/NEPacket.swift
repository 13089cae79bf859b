import Foundation
import Glibc

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
    public let protocolFamily: sa_family_t
    /// `.outbound` for packets read from the TUN (the host sent them into the tunnel).
    public let direction: NETrafficDirection

    public init(data: Data, protocolFamily: sa_family_t) {
        self.data = data
        self.protocolFamily = protocolFamily
        direction = .any
        super.init()
    }

    init(data: Data, protocolFamily: sa_family_t, direction: NETrafficDirection) {
        self.data = data
        self.protocolFamily = protocolFamily
        self.direction = direction
        super.init()
    }
}
