import CTunnelgateShims

extension PollSet {
    /// ppoll(2) for up to `nanoseconds` (nil: no limit; CTunnelgateShims_poll_nanoseconds): poll(2)'s
    /// milliseconds are too coarse for a timer wheel that fires within a millisecond. The number of
    /// descriptors with events; EINTR is retried with the whole timeout.
    public mutating func wait(timeoutNanoseconds nanoseconds: Int64?) throws(SystemCallError) -> Int {
        let count = UInt(entries.count)
        let n = try syscall("ppoll") {
            entries.withUnsafeMutableBufferPointer { CTunnelgateShims_poll_nanoseconds($0.baseAddress, count, nanoseconds ?? -1) }
        }
        return Int(n)
    }
}
