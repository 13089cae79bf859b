// Kernel constants reach Swift either as plain integers (anonymous enums,
// macros) or as enum structs with a raw value (named C enums). These turn
// both into the field width a message needs.
@inline(__always) public func u8(_ v: Int) -> UInt8 { UInt8(v) }
@inline(__always) public func u8<T: RawRepresentable>(_ v: T) -> UInt8 where T.RawValue: BinaryInteger { UInt8(v.rawValue) }
@inline(__always) public func u16(_ v: Int) -> UInt16 { UInt16(v) }
@inline(__always) public func u16(_ v: Int32) -> UInt16 { UInt16(v) }
@inline(__always) public func u16<T: RawRepresentable>(_ v: T) -> UInt16 where T.RawValue: BinaryInteger { UInt16(v.rawValue) }
@inline(__always) public func u32(_ v: Int) -> UInt32 { UInt32(v) }
@inline(__always) public func u32(_ v: Int32) -> UInt32 { UInt32(v) }
@inline(__always) public func u32<T: RawRepresentable>(_ v: T) -> UInt32 where T.RawValue: BinaryInteger { UInt32(v.rawValue) }
