import LinuxSystem

/// An nf_tables request the kernel refused.
public typealias NftablesError = KernelRequestError
