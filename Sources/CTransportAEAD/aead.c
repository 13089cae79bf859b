#include "CTransportAEAD.h"

#include <limits.h>
#include <string.h>
#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/params.h>

enum { key_length = 32, tag_length = 16, nonce_length = 12 };

tg_transport_aead *tg_transport_aead_new(const uint8_t *key, int seal) {
    EVP_CIPHER_CTX *context = EVP_CIPHER_CTX_new();
    if (context == NULL) return NULL;
    // The key now, the nonce per message.
    if (EVP_CipherInit_ex(context, EVP_chacha20_poly1305(), NULL, key, NULL, seal ? 1 : 0) != 1) {
        EVP_CIPHER_CTX_free(context);
        return NULL;
    }
    return (tg_transport_aead *)context;
}

void tg_transport_aead_free(tg_transport_aead *aead) {
    if (aead != NULL) EVP_CIPHER_CTX_free((EVP_CIPHER_CTX *)aead);
}

static void nonce_of(uint64_t counter, uint8_t nonce[nonce_length]) {
    memset(nonce, 0, 4);
    for (int i = 0; i < 8; i++) nonce[4 + i] = (uint8_t)(counter >> (8 * i));
}

size_t tg_transport_aead_seal(tg_transport_aead *aead, uint64_t counter, uint8_t *buffer, size_t length) {
    EVP_CIPHER_CTX *context = (EVP_CIPHER_CTX *)aead;
    uint8_t nonce[nonce_length];
    int written = 0, final = 0;
    if (context == NULL || length > INT_MAX) return 0;
    nonce_of(counter, nonce);
    if (EVP_CipherInit_ex(context, NULL, NULL, NULL, nonce, 1) != 1) return 0;
    if (length > 0 && EVP_CipherUpdate(context, buffer, &written, buffer, (int)length) != 1) return 0;
    if (EVP_CipherFinal_ex(context, buffer + written, &final) != 1) return 0;
    if ((size_t)(written + final) != length) return 0;
    // The tag through the parameter itself: EVP_CIPHER_CTX_ctrl would build this array on every call.
    OSSL_PARAM tag[2] = {
        OSSL_PARAM_construct_octet_string(OSSL_CIPHER_PARAM_AEAD_TAG, buffer + length, tag_length), OSSL_PARAM_construct_end()
    };
    if (EVP_CIPHER_CTX_get_params(context, tag) != 1) return 0;
    return length + tag_length;
}

long tg_transport_aead_open(tg_transport_aead *aead, uint64_t counter, uint8_t *buffer, size_t length) {
    EVP_CIPHER_CTX *context = (EVP_CIPHER_CTX *)aead;
    uint8_t nonce[nonce_length];
    int written = 0, final = 0;
    if (context == NULL || length < tag_length || length > INT_MAX) return -1;
    size_t ciphertext = length - tag_length;
    nonce_of(counter, nonce);
    if (EVP_CipherInit_ex(context, NULL, NULL, NULL, nonce, 0) != 1) return -1;
    OSSL_PARAM tag[2] = {
        OSSL_PARAM_construct_octet_string(OSSL_CIPHER_PARAM_AEAD_TAG, buffer + ciphertext, tag_length), OSSL_PARAM_construct_end()
    };
    if (EVP_CIPHER_CTX_set_params(context, tag) != 1) return -1;
    if (ciphertext > 0 && EVP_CipherUpdate(context, buffer, &written, buffer, (int)ciphertext) != 1) return -1;
    // The tag is checked here; a message that does not authenticate fails.
    if (EVP_CipherFinal_ex(context, buffer + written, &final) != 1) return -1;
    return (long)(written + final);
}
