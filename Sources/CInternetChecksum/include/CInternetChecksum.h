#ifndef C_INTERNET_CHECKSUM_H
#define C_INTERNET_CHECKSUM_H

#include <stddef.h>
#include <stdint.h>

// The Internet checksum's inner loop (RFC 1071), in C because the carry chain is what it costs: clang
// keeps it in the carry flag (add-with-carry, one instruction per 8 bytes), which Swift's
// addingReportingOverflow does not (a branch per word; perf showed the Swift loop as 17 % of a sending
// WireGuard plane). Same contract as InternetChecksum.add: `sum` plus the bytes as 16-bit words in the
// machine's byte order, kept unfolded in 64 bits with the end-around carry; an odd last byte is the
// high half of a word padded with zero (in wire order).

/// `sum` plus the `count` bytes at `bytes`.
uint64_t tg_checksum_add(const void *bytes, size_t count, uint64_t sum);

/// Copies `count` bytes from `bytes` to `out` (which must not overlap) and returns `sum` plus them:
/// one pass over the bytes instead of a copy and a sum.
uint64_t tg_checksum_copy(void *out, const void *bytes, size_t count, uint64_t sum);

#endif
