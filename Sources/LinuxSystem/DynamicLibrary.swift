import Glibc

/// A shared library loaded with dlopen(3) (RTLD_NOW | RTLD_LOCAL: every symbol resolved at load, none
/// made visible to libraries loaded later). It stays loaded until `close()`, which its holder calls
/// only when no thread can be running its code.
public struct DynamicLibrary: @unchecked Sendable {
    // @unchecked Sendable: the handle is an opaque token; dlsym and dlclose are thread-safe.
    private let handle: UnsafeMutableRawPointer

    /// Why dlopen refused a library: dlerror(3)'s text (which names the path it was given).
    public struct LoadError: Error, Sendable, CustomStringConvertible {
        public let reason: String
        public var description: String { reason }
    }

    /// dlopen(path, RTLD_NOW | RTLD_LOCAL).
    public static func open(_ path: String) throws(LoadError) -> DynamicLibrary {
        guard let handle = dlopen(path, RTLD_NOW | RTLD_LOCAL) else {
            throw LoadError(reason: dlerror().map { String(cString: $0) } ?? "unknown error")
        }
        return DynamicLibrary(handle: handle)
    }

    /// dlsym(3): the address of the symbol `name`, nil when the library has none.
    public func symbol(named name: String) -> UnsafeMutableRawPointer? {
        _ = dlerror()
        return dlsym(handle, name)
    }

    /// dlclose(3).
    public func close() {
        _ = dlclose(handle)
    }
}
