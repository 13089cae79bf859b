import Glibc
import LinuxSystem
import RuntimeABI
import TunnelgateSettings

/// A runtime secret in memory: read once, handed to start, then zeroed.
/// Its bytes never reach a log, a status, an error or a command line.
public final class RuntimeSecret {
    private var bytes: [CChar]

    public static func load(_ source: CallbackRuntimeSettings.Secret) throws(RuntimeError) -> RuntimeSecret {
        switch source {
        case .none:
            return RuntimeSecret([0])
        case .environment(let name):
            guard let value = getenv(name) else {
                throw RuntimeError("runtime.secretEnvironment: the environment has no variable \(name)")
            }
            let length = strlen(value)
            let secret = RuntimeSecret(Array(UnsafeBufferPointer(start: value, count: length + 1)))
            // Gone from this process's environment: not inherited by anything the runtime spawns, and,
            // overwritten where it was, no longer in /proc/PID/environ.
            explicit_bzero(value, length)
            unsetenv(name)
            return secret
        case .file(let path):
            var st = stat()
            let rc: Int32 = stat(path, &st)
            guard rc == 0 else {
                throw RuntimeError("runtime.secretFile: cannot read \(path): \(Errno.current)")
            }
            guard st.st_mode & 0o077 == 0 else {
                throw RuntimeError("runtime.secretFile: \(path) can be read by others (mode \(String(st.st_mode & 0o777, radix: 8))); make it owner-only: chmod 600 \(path)")
            }
            guard st.st_uid == geteuid() else {
                throw RuntimeError("runtime.secretFile: \(path) belongs to uid \(st.st_uid), not to uid \(geteuid()) that runs tunnelgate")
            }
            var content: [UInt8]
            do {
                guard let c = try FileSystem.read(path) else { throw RuntimeError("runtime.secretFile: \(path) does not exist") }
                content = c
            } catch let e as RuntimeError { throw e } catch {
                throw RuntimeError("runtime.secretFile: cannot read \(path): \(error)")
            }
            var text = content
            // The buffers the file was read through are wiped too, whatever happens next.
            defer {
                Self.wipe(&content)
                Self.wipe(&text)
            }
            while let last = text.last, last == 0x0a || last == 0x0d { text.removeLast() }
            guard !text.isEmpty, !text.contains(0) else {
                throw RuntimeError("runtime.secretFile: \(path) is empty or not text")
            }
            // Sized once: a growing array would free an unwiped buffer holding the secret.
            var copy: [CChar] = []
            copy.reserveCapacity(text.count + 1)
            for b in text { copy.append(CChar(bitPattern: b)) }
            copy.append(0)
            return RuntimeSecret(copy)
        }
    }

    private init(_ bytes: [CChar]) { self.bytes = bytes }

    private static func wipe(_ buffer: inout [UInt8]) {
        buffer.withUnsafeMutableBytes { if let base = $0.baseAddress { explicit_bzero(base, $0.count) } }
    }

    /// `text` with every occurrence of the secret replaced by "[secret]"
    /// (what a runtime says may quote it). Works on bytes, so the secret is
    /// never made into a String that could not be wiped.
    func scrub(_ text: String) -> String {
        String(decoding: scrub(bytes: Array(text.utf8)), as: UTF8.self)
    }

    /// `input` with every occurrence of the secret's bytes replaced by "[secret]": for what a runtime
    /// says that need not be text (an app_message reply).
    func scrub(bytes input: [UInt8]) -> [UInt8] {
        let secret = bytes.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }
        guard secret.count >= 4 else { return input }
        var output: [UInt8] = []
        output.reserveCapacity(input.count)
        var i = 0
        while i < input.count {
            if input.count - i >= secret.count, input[i..<(i + secret.count)].elementsEqual(secret) {
                output += Array("[secret]".utf8)
                i += secret.count
            } else {
                output.append(input[i])
                i += 1
            }
        }
        return output
    }

    func withCString<T>(_ body: (UnsafePointer<CChar>) -> T) -> T {
        bytes.withUnsafeBufferPointer { body($0.baseAddress!) }
    }

    /// Overwrites the secret in memory (explicit_bzero: not optimised away).
    public func wipe() {
        bytes.withUnsafeMutableBytes { if let base = $0.baseAddress { explicit_bzero(base, $0.count) } }
    }

    deinit { wipe() }
}

