import CMnl
import LinuxSystem
import TunnelgateSettings

/// TC_H_ROOT, the parent of a root qdisc.
private let tcRoot: UInt32 = 0xFFFF_FFFF

/// A traffic-control handle MAJOR:MINOR, as tc(8) writes it ("1:", "1:10").
public struct TrafficControlHandle: Sendable, Hashable, CustomStringConvertible {
    public var major: UInt16
    public var minor: UInt16
    public init(_ major: UInt16, _ minor: UInt16) { self.major = major; self.minor = minor }
    public var rawValue: UInt32 { UInt32(major) << 16 | UInt32(minor) }
    public var description: String { "\(String(major, radix: 16)):\(minor == 0 ? "" : String(minor, radix: 16))" }
}

extension NetlinkSocket {
    /// Replaces the root qdisc of `device` with an htb qdisc `1:` whose default class `1:1` sends
    /// at most `rateBitsPerSecond` (ceil the same) with a burst of `burstBytes`. Equivalent to:
    /// `tc qdisc replace dev DEV root handle 1: htb default 1` and
    /// `tc class replace dev DEV parent 1: classid 1:1 htb rate R ceil R burst B cburst B`.
    public func setRateLimit(device: String, rateBitsPerSecond: UInt64, burstBytes: UInt32) throws(NetlinkError) {
        guard let link = try link(named: device) else {
            throw NetlinkError(operation: "tc qdisc replace dev \(device) root htb", errno: .noSuchDevice)
        }
        try request(type: Int32(RTM_NEWQDISC), flags: NLM_F_CREATE | NLM_F_REPLACE,
                    operation: "tc qdisc replace dev \(device) root handle 1: htb default 1") { nlh in
            var tcm = tcmsg()
            tcm.tcm_family = 0
            tcm.tcm_ifindex = link.index
            tcm.tcm_handle = TrafficControlHandle(1, 0).rawValue
            tcm.tcm_parent = tcRoot
            putHeader(nlh, tcm)
            mnl_attr_put_strz(nlh, u16(TCA_KIND), "htb")
            let options = mnl_attr_nest_start(nlh, u16(TCA_OPTIONS))
            var glob = tc_htb_glob()
            glob.version = 3          // HTB_VER >> 16, what tc(8) sends
            glob.rate2quantum = 10
            glob.defcls = 1
            putStruct(nlh, u16(TCA_HTB_INIT), glob)
            mnl_attr_nest_end(nlh, options)
        }
        let bytesPerSecond = rateBitsPerSecond / 8
        // The burst as the time it takes to send at the rate, in the scheduler's ticks of 64 ns
        // (PSCHED_SHIFT 6): htb's buffer and cbuffer.
        let burstNanoseconds = UInt64(burstBytes) * 1_000_000_000 / max(bytesPerSecond, 1)
        let ticks = UInt32(clamping: burstNanoseconds >> 6)
        try request(type: Int32(RTM_NEWTCLASS), flags: NLM_F_CREATE | NLM_F_REPLACE,
                    operation: "tc class replace dev \(device) parent 1: classid 1:1 htb rate \(rateBitsPerSecond)bit") { nlh in
            var tcm = tcmsg()
            tcm.tcm_family = 0
            tcm.tcm_ifindex = link.index
            tcm.tcm_handle = TrafficControlHandle(1, 1).rawValue
            tcm.tcm_parent = TrafficControlHandle(1, 0).rawValue
            putHeader(nlh, tcm)
            mnl_attr_put_strz(nlh, u16(TCA_KIND), "htb")
            let options = mnl_attr_nest_start(nlh, u16(TCA_OPTIONS))
            var opt = tc_htb_opt()
            // Rates above 32 bits of bytes per second go in TCA_HTB_RATE64 / CEIL64 too.
            let rate32 = UInt32(clamping: bytesPerSecond)
            opt.rate.rate = rate32
            opt.rate.linklayer = UInt8(TC_LINKLAYER_ETHERNET.rawValue)
            opt.ceil = opt.rate
            opt.buffer = ticks
            opt.cbuffer = ticks
            opt.quantum = 0
            opt.prio = 0
            putStruct(nlh, u16(TCA_HTB_PARMS), opt)
            if bytesPerSecond > UInt64(UInt32.max) {
                mnl_attr_put_u64(nlh, u16(TCA_HTB_RATE64), bytesPerSecond)
                mnl_attr_put_u64(nlh, u16(TCA_HTB_CEIL64), bytesPerSecond)
            }
            mnl_attr_nest_end(nlh, options)
        }
    }

    /// Replaces the root qdisc of `device` with netem delaying every packet by `delay` ± `jitter`
    /// nanoseconds. Equivalent to: `tc qdisc replace dev DEV root netem delay D jitter J`. A kernel
    /// without sch_netem refuses it with ENOENT ("Specified qdisc kind is unknown").
    public func setDelay(device: String, delayNanoseconds: Int64, jitterNanoseconds: Int64) throws(NetlinkError) {
        guard let link = try link(named: device) else {
            throw NetlinkError(operation: "tc qdisc replace dev \(device) root netem", errno: .noSuchDevice)
        }
        try request(type: Int32(RTM_NEWQDISC), flags: NLM_F_CREATE | NLM_F_REPLACE,
                    operation: "tc qdisc replace dev \(device) root netem delay \(delayNanoseconds / 1_000_000)ms") { nlh in
            var tcm = tcmsg()
            tcm.tcm_ifindex = link.index
            tcm.tcm_handle = TrafficControlHandle(2, 0).rawValue
            tcm.tcm_parent = tcRoot
            putHeader(nlh, tcm)
            mnl_attr_put_strz(nlh, u16(TCA_KIND), "netem")
            // netem's options are a struct tc_netem_qopt followed by attributes (not a nest).
            let options = mnl_attr_nest_start(nlh, u16(TCA_OPTIONS))
            var qopt = tc_netem_qopt()
            qopt.limit = 1000
            withUnsafeBytes(of: qopt) { raw in
                let dst = mnl_nlmsg_get_payload_tail(nlh)!
                dst.copyMemory(from: raw.baseAddress!, byteCount: raw.count)
                nlh.pointee.nlmsg_len += UInt32((raw.count + 3) & ~3)
            }
            mnl_attr_put_u64(nlh, u16(TCA_NETEM_LATENCY64), UInt64(bitPattern: delayNanoseconds))
            mnl_attr_put_u64(nlh, u16(TCA_NETEM_JITTER64), UInt64(bitPattern: jitterNanoseconds))
            mnl_attr_nest_end(nlh, options)
        }
    }

    /// Removes the root qdisc of `device` (the kernel's default comes back); none is not an error.
    /// Equivalent to: `tc qdisc del dev DEV root`.
    public func removeRootQdisc(device: String) throws(NetlinkError) {
        guard let link = try link(named: device) else {
            throw NetlinkError(operation: "tc qdisc del dev \(device) root", errno: .noSuchDevice)
        }
        do {
            try request(type: Int32(RTM_DELQDISC), flags: 0, operation: "tc qdisc del dev \(device) root") { nlh in
                var tcm = tcmsg()
                tcm.tcm_ifindex = link.index
                tcm.tcm_parent = tcRoot
                putHeader(nlh, tcm)
            }
        } catch where error.errno == .noSuchEntry || error.errno == .invalidArgument {
            // ENOENT / EINVAL: "Cannot delete qdisc with handle of zero": only the default qdisc is there.
            return
        }
    }

    /// The kind of the root qdisc of every link ("noqueue", "htb", …), by link index.
    /// Equivalent to: `tc qdisc show`.
    public func qdiscs() throws(NetlinkError) -> [(interfaceIndex: Int32, handle: UInt32, parent: UInt32, kind: String)] {
        var out: [(Int32, UInt32, UInt32, String)] = []
        try dump(type: Int32(RTM_GETQDISC), operation: "tc qdisc show", header: { nlh in
            putHeader(nlh, tcmsg())
        }) { nlh in
            guard nlh.pointee.nlmsg_type == UInt16(RTM_NEWQDISC) else { return }
            let (tcm, attrs, length) = messagePayload(nlh, tcmsg.self)
            var kind = ""
            forEachAttribute(in: attrs, length: length) { t, data, _ in
                if t == u16(TCA_KIND) { kind = String(cString: data.assumingMemoryBound(to: CChar.self)) }
            }
            out.append((tcm.tcm_ifindex, tcm.tcm_handle, tcm.tcm_parent, kind))
        }
        return out
    }
}
