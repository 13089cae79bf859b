import CTunnelgateShims

extension FileDescriptor {
    /// Opens /dev/net/tun (close-on-exec, non-blocking) and attaches the IFF_TUN | IFF_NO_PI interface
    /// `name`, created if absent (CTunnelgateShims_tun_open: TUNSETIFF; with `offloads` also
    /// IFF_VNET_HDR, TUNSETVNETHDRSZ and TUNSETOFFLOAD, or a plain TUN when the kernel refuses them,
    /// which `carriesVirtioHeader` tells). The descriptor and the name the kernel gave the interface.
    public static func openTun(named name: String, offloads: Bool) throws(SystemCallError) -> (descriptor: FileDescriptor, name: String) {
        var actual = [CChar](repeating: 0, count: Int(CTunnelgateShims_ifnamsiz()))
        let fd = try syscall("ioctl(TUNSETIFF, \(name))") { CTunnelgateShims_tun_open(name, &actual, 1, offloads ? 1 : 0) }
        return (FileDescriptor(rawValue: fd), String(decoding: actual.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
    }

    /// TUNGETIFF: whether the TUN open on this descriptor was made with IFF_VNET_HDR, so that every read
    /// and write carries a struct virtio_net_hdr first. False for anything that is not a TUN.
    public var carriesVirtioHeader: Bool {
        let flags = CTunnelgateShims_tun_flags(rawValue)
        return flags >= 0 && flags & CTunnelgateShims_iff_vnet_hdr() != 0
    }
}
