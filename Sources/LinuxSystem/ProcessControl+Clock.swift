import Glibc

extension ProcessControl {
    /// clock_gettime(CLOCK_REALTIME): the wall clock as seconds and nanoseconds since the epoch (what
    /// a TAI64N timestamp and `wg show`'s latest handshake are made of).
    public static func wallClock() -> (seconds: Int, nanoseconds: Int) {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return (ts.tv_sec, ts.tv_nsec)
    }
}
