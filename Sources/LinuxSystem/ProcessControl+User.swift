import Glibc

extension ProcessControl {
    /// A user as the password database has it.
    public struct UserAccount: Hashable, Sendable {
        public var name: String?
        public var uid: uid_t
        public var gid: gid_t
        public init(name: String?, uid: uid_t, gid: gid_t) {
            self.name = name
            self.uid = uid
            self.gid = gid
        }
    }

    /// getpwnam_r(3): the user named `name`; nil when there is none.
    public static func user(named name: String) -> UserAccount? {
        lookUp { pw, buffer, count, result in getpwnam_r(name, &pw, buffer, count, &result) }
    }

    /// getpwuid_r(3): the user with this uid; nil when the database has none.
    public static func user(id: uid_t) -> UserAccount? {
        lookUp { pw, buffer, count, result in getpwuid_r(id, &pw, buffer, count, &result) }
    }

    private static func lookUp(_ call: (inout passwd, UnsafeMutablePointer<CChar>, Int, inout UnsafeMutablePointer<passwd>?) -> Int32) -> UserAccount? {
        var buffer = [CChar](repeating: 0, count: 16384)
        var pw = passwd()
        var result: UnsafeMutablePointer<passwd>?
        let rc = buffer.withUnsafeMutableBufferPointer { call(&pw, $0.baseAddress!, $0.count, &result) }
        guard rc == 0, result != nil else { return nil }
        return UserAccount(name: pw.pw_name.map { String(cString: $0) }, uid: pw.pw_uid, gid: pw.pw_gid)
    }

    /// Becomes `account` for good: its supplementary groups (initgroups(3) when it has a name, none
    /// otherwise), then setgid(2), then setuid(2); each result checked. From root to another uid this
    /// drops every capability (the kernel clears them at setuid without SECBIT_KEEP_CAPS).
    public static func become(_ account: UserAccount) throws(SystemCallError) {
        if let name = account.name {
            _ = try syscall("initgroups(\(name), \(account.gid))") { initgroups(name, account.gid) }
        } else {
            _ = try syscall("setgroups(0)") { setgroups(0, nil) }
        }
        _ = try syscall("setgid(\(account.gid))") { setgid(account.gid) }
        _ = try syscall("setuid(\(account.uid))") { setuid(account.uid) }
    }
}
