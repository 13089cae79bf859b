#define _GNU_SOURCE
#include "er_wire.h"

#include <string.h>

int er_wire_derive_key(uint8_t key[ER_WIRE_KEY_BYTES], const char *secret, size_t secret_len) {
    crypto_generichash_state state;
    int rc = crypto_generichash_init(&state, (const unsigned char *)ER_WIRE_KEY_CONTEXT,
                                     sizeof(ER_WIRE_KEY_CONTEXT) - 1, ER_WIRE_KEY_BYTES);
    if (rc == 0) rc = crypto_generichash_update(&state, (const unsigned char *)secret, secret_len);
    if (rc == 0) rc = crypto_generichash_final(&state, key, ER_WIRE_KEY_BYTES);
    sodium_memzero(&state, sizeof(state));
    return rc;
}

size_t er_wire_seal(uint8_t *out, uint8_t type, const uint8_t nonce[ER_WIRE_NONCE_BYTES], const uint8_t *payload,
                    size_t len, const uint8_t key[ER_WIRE_KEY_BYTES]) {
    out[0] = ER_WIRE_VERSION;
    out[1] = type;
    out[2] = 0;
    out[3] = 0;
    memcpy(out + ER_WIRE_HEADER_BYTES, nonce, ER_WIRE_NONCE_BYTES);
    unsigned long long clen = 0;
    crypto_aead_xchacha20poly1305_ietf_encrypt(out + ER_WIRE_HEADER_BYTES + ER_WIRE_NONCE_BYTES, &clen, payload,
                                               len, out, ER_WIRE_HEADER_BYTES, NULL,
                                               out + ER_WIRE_HEADER_BYTES, key);
    return ER_WIRE_HEADER_BYTES + ER_WIRE_NONCE_BYTES + (size_t)clen;
}

er_open_result er_wire_open(const uint8_t *datagram, size_t len, uint8_t *plain, size_t plain_cap,
                            size_t *plain_len, uint8_t *type, const uint8_t key[ER_WIRE_KEY_BYTES]) {
    if (len < ER_WIRE_OVERHEAD || datagram[0] != ER_WIRE_VERSION ||
        (datagram[1] != ER_WIRE_DATA && datagram[1] != ER_WIRE_KEEPALIVE) || datagram[2] != 0 || datagram[3] != 0)
        return ER_OPEN_MALFORMED;
    if (len - ER_WIRE_OVERHEAD > plain_cap) return ER_OPEN_OVERSIZE;
    const uint8_t *nonce = datagram + ER_WIRE_HEADER_BYTES;
    const uint8_t *cipher = nonce + ER_WIRE_NONCE_BYTES;
    unsigned long long mlen = 0;
    if (crypto_aead_xchacha20poly1305_ietf_decrypt(plain, &mlen, NULL, cipher,
                                                   len - ER_WIRE_HEADER_BYTES - ER_WIRE_NONCE_BYTES, datagram,
                                                   ER_WIRE_HEADER_BYTES, nonce, key) != 0)
        return ER_OPEN_UNAUTHENTIC;
    *plain_len = (size_t)mlen;
    *type = datagram[1];
    return ER_OPEN_OK;
}
