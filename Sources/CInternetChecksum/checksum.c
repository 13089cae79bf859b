#include "CInternetChecksum.h"

#include <string.h>

// a + b with the carry out of bit 63 added back in.
static inline uint64_t add_carrying(uint64_t a, uint64_t b) {
    uint64_t s = a + b;
    return s + (s < b);
}

// The loop both functions share; `copy` is a constant in each caller, so each gets its own loop.
static inline __attribute__((always_inline))
uint64_t sum_bytes(unsigned char *restrict out, const unsigned char *restrict in, size_t n, uint64_t sum, int copy) {
#if defined(__has_builtin)
#if __has_builtin(__builtin_addcll)
    unsigned long long carry = 0;
    while (n >= 32) {
        uint64_t w[4];
        memcpy(w, in, sizeof w);
        if (copy) { memcpy(out, w, sizeof w); out += 32; }
        sum = __builtin_addcll(sum, w[0], carry, &carry);
        sum = __builtin_addcll(sum, w[1], carry, &carry);
        sum = __builtin_addcll(sum, w[2], carry, &carry);
        sum = __builtin_addcll(sum, w[3], carry, &carry);
        in += 32;
        n -= 32;
    }
    sum = add_carrying(sum, carry);
#endif
#endif
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, in, 8);
        if (copy) { memcpy(out, &w, 8); out += 8; }
        sum = add_carrying(sum, w);
        in += 8;
        n -= 8;
    }
    if (n >= 4) {
        uint32_t w;
        memcpy(&w, in, 4);
        if (copy) { memcpy(out, &w, 4); out += 4; }
        sum = add_carrying(sum, w);
        in += 4;
        n -= 4;
    }
    if (n >= 2) {
        uint16_t w;
        memcpy(&w, in, 2);
        if (copy) { memcpy(out, &w, 2); out += 2; }
        sum = add_carrying(sum, w);
        in += 2;
        n -= 2;
    }
    if (n == 1) {
        uint64_t last = in[0];
        if (copy) out[0] = in[0];
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
        last <<= 8;
#endif
        sum = add_carrying(sum, last);
    }
    return sum;
}

uint64_t tg_checksum_add(const void *bytes, size_t count, uint64_t sum) {
    return sum_bytes(NULL, bytes, count, sum, 0);
}

uint64_t tg_checksum_copy(void *out, const void *bytes, size_t count, uint64_t sum) {
    return sum_bytes(out, bytes, count, sum, 1);
}
