import CMnl
import CNftnl
import LinuxSystem

/// One request on a netfilter netlink socket and its answers: builds the message header in `buffer`,
/// lets `prepare` fill the rest, sends it, and hands every answer with its sequence number to `body`
/// until NLMSG_DONE or the acknowledgement (for a request that is not a dump, pass `NLM_F_ACK`). A
/// kernel error ends it as an `NftablesError` naming `operation`. Shared by `NftablesSocket` and
/// `NftablesProgramSocket`, which own the socket and the buffers.
func netfilterExchange(socket: OpaquePointer, buffer: UnsafeMutableRawPointer, receiveBuffer: UnsafeMutableRawPointer,
                       bufferSize: Int, sequence seq: UInt32, type: UInt16, family: UInt16, flags: UInt16,
                       operation: String, prepare: (UnsafeMutablePointer<nlmsghdr>) -> Void,
                       _ body: (UnsafeMutablePointer<nlmsghdr>) -> Void) throws(NftablesError) {
    let nlh = nftnl_nlmsg_build_hdr(buffer.assumingMemoryBound(to: CChar.self), type, family, flags, seq)!
    prepare(nlh)
    if mnl_socket_sendto(socket, buffer, Int(nlh.pointee.nlmsg_len)) < 0 {
        throw NftablesError(operation: operation, errno: .current)
    }
    while true {
        let received = mnl_socket_recvfrom(socket, receiveBuffer, bufferSize)
        if received < 0 {
            if Errno.current == .interrupted { continue }
            throw NftablesError(operation: operation, errno: .current)
        }
        var remaining = Int32(received)
        var msg = receiveBuffer.assumingMemoryBound(to: nlmsghdr.self)
        while mnl_nlmsg_ok(msg, remaining) {
            if msg.pointee.nlmsg_seq == seq {
                switch Int32(msg.pointee.nlmsg_type) {
                case NLMSG_DONE: return
                case NLMSG_ERROR:
                    let err = mnl_nlmsg_get_payload(msg)!.assumingMemoryBound(to: nlmsgerr.self).pointee.error
                    if err == 0 { return }
                    throw NftablesError(operation: operation, errno: Errno(rawValue: -err))
                default: body(msg)
                }
            }
            msg = mnl_nlmsg_next(msg, &remaining)
        }
    }
}
