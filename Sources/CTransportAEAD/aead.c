#include "CTransportAEAD.h"

#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <openssl/core.h>
#include <openssl/core_dispatch.h>
#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/params.h>
#include <openssl/provider.h>

enum { key_length = 32, tag_length = 16, nonce_length = 12 };

// ---- The provider's own functions ------------------------------------------------------------------
//
// EVP_CipherInit_ex, called per message to set the nonce, asks the provider for the IV length every
// time (EVP_CIPHER_CTX_get_iv_length: a parameter lookup by name, strcmp), and EVP_CipherUpdate and
// EVP_CipherFinal_ex check the context before they call the provider. All three end in the provider's
// dispatch functions, which OpenSSL 3 publishes (OSSL_PROVIDER_query_operation): called directly, a
// message costs the cipher's work and the provider's own bookkeeping only. The cipher libcrypto
// fetches for "ChaCha20-Poly1305" names the provider; its implementation of that name is the table.
// When any of it is missing (another provider, another OpenSSL), contexts go through EVP as before.

static const char algorithm_name[] = "ChaCha20-Poly1305";

static struct {
    OSSL_FUNC_cipher_newctx_fn *newctx;
    OSSL_FUNC_cipher_freectx_fn *freectx;
    OSSL_FUNC_cipher_encrypt_init_fn *encrypt_init;
    OSSL_FUNC_cipher_decrypt_init_fn *decrypt_init;
    OSSL_FUNC_cipher_update_fn *update;
    OSSL_FUNC_cipher_final_fn *final;
    OSSL_FUNC_cipher_get_ctx_params_fn *get_ctx_params;
    OSSL_FUNC_cipher_set_ctx_params_fn *set_ctx_params;
    void *provider_context;
    EVP_CIPHER *fetched;  // held for the process's life: it keeps the provider, so the table, loaded
    int ready;
} provider;
static pthread_once_t provider_once = PTHREAD_ONCE_INIT;

// Whether `names` (colon-separated, as OSSL_ALGORITHM lists them) holds `name`, ignoring case.
static int names_hold(const char *names, const char *name) {
    size_t length = strlen(name);
    for (const char *p = names;;) {
        if (strncasecmp(p, name, length) == 0 && (p[length] == '\0' || p[length] == ':')) return 1;
        if ((p = strchr(p, ':')) == NULL) return 0;
        p++;
    }
}

static void load_provider(void) {
    EVP_CIPHER *cipher = EVP_CIPHER_fetch(NULL, algorithm_name, NULL);
    if (cipher == NULL) return;
    const OSSL_PROVIDER *owner = EVP_CIPHER_get0_provider(cipher);
    int no_cache = 0;
    const OSSL_ALGORITHM *algorithms = owner != NULL ? OSSL_PROVIDER_query_operation(owner, OSSL_OP_CIPHER, &no_cache) : NULL;
    for (const OSSL_ALGORITHM *a = algorithms; a != NULL && a->algorithm_names != NULL; a++) {
        if (!names_hold(a->algorithm_names, algorithm_name)) continue;
        for (const OSSL_DISPATCH *d = a->implementation; d->function_id != 0; d++) {
            switch (d->function_id) {
            case OSSL_FUNC_CIPHER_NEWCTX: provider.newctx = OSSL_FUNC_cipher_newctx(d); break;
            case OSSL_FUNC_CIPHER_FREECTX: provider.freectx = OSSL_FUNC_cipher_freectx(d); break;
            case OSSL_FUNC_CIPHER_ENCRYPT_INIT: provider.encrypt_init = OSSL_FUNC_cipher_encrypt_init(d); break;
            case OSSL_FUNC_CIPHER_DECRYPT_INIT: provider.decrypt_init = OSSL_FUNC_cipher_decrypt_init(d); break;
            case OSSL_FUNC_CIPHER_UPDATE: provider.update = OSSL_FUNC_cipher_update(d); break;
            case OSSL_FUNC_CIPHER_FINAL: provider.final = OSSL_FUNC_cipher_final(d); break;
            case OSSL_FUNC_CIPHER_GET_CTX_PARAMS: provider.get_ctx_params = OSSL_FUNC_cipher_get_ctx_params(d); break;
            case OSSL_FUNC_CIPHER_SET_CTX_PARAMS: provider.set_ctx_params = OSSL_FUNC_cipher_set_ctx_params(d); break;
            default: break;
            }
        }
        break;
    }
    if (algorithms != NULL) OSSL_PROVIDER_unquery_operation(owner, OSSL_OP_CIPHER, algorithms);
    provider.provider_context = owner != NULL ? OSSL_PROVIDER_get0_provider_ctx(owner) : NULL;
    provider.ready = provider.newctx != NULL && provider.freectx != NULL && provider.encrypt_init != NULL &&
                     provider.decrypt_init != NULL && provider.update != NULL && provider.final != NULL &&
                     provider.get_ctx_params != NULL && provider.set_ctx_params != NULL;
    if (provider.ready) provider.fetched = cipher;
    else EVP_CIPHER_free(cipher);
}

int tg_transport_aead_provider_available(void) {
    pthread_once(&provider_once, load_provider);
    return provider.ready;
}

// ---- Contexts ----------------------------------------------------------------------------------------

struct tg_transport_aead {
    int direct;     // 1: `context` is the provider's; 0: an EVP_CIPHER_CTX
    int seal;
    void *context;
};

static tg_transport_aead *new_context(const uint8_t *key, int seal, int direct) {
    tg_transport_aead *aead = calloc(1, sizeof(*aead));
    if (aead == NULL) return NULL;
    aead->direct = direct;
    aead->seal = seal ? 1 : 0;
    // The key now, the nonce per message.
    if (direct) {
        aead->context = provider.newctx(provider.provider_context);
        int ok = aead->context != NULL &&
                 (seal ? provider.encrypt_init : provider.decrypt_init)(aead->context, key, key_length, NULL, 0, NULL) == 1;
        if (!ok) {
            if (aead->context != NULL) provider.freectx(aead->context);
            free(aead);
            return NULL;
        }
        return aead;
    }
    EVP_CIPHER_CTX *context = EVP_CIPHER_CTX_new();
    if (context == NULL || EVP_CipherInit_ex(context, EVP_chacha20_poly1305(), NULL, key, NULL, aead->seal) != 1) {
        EVP_CIPHER_CTX_free(context);
        free(aead);
        return NULL;
    }
    aead->context = context;
    return aead;
}

tg_transport_aead *tg_transport_aead_new(const uint8_t *key, int seal) {
    return new_context(key, seal, tg_transport_aead_provider_available());
}

tg_transport_aead *tg_transport_aead_new_through_evp(const uint8_t *key, int seal) {
    return new_context(key, seal, 0);
}

void tg_transport_aead_free(tg_transport_aead *aead) {
    if (aead == NULL) return;
    // Both cleanse the key before they free it.
    if (aead->direct) provider.freectx(aead->context);
    else EVP_CIPHER_CTX_free((EVP_CIPHER_CTX *)aead->context);
    free(aead);
}

static void nonce_of(uint64_t counter, uint8_t nonce[nonce_length]) {
    memset(nonce, 0, 4);
    for (int i = 0; i < 8; i++) nonce[4 + i] = (uint8_t)(counter >> (8 * i));
}

// The nonce, the bytes in place, and the end of the message (where the tag is made or checked), through
// the provider or EVP. 1 on success; 0 when libcrypto failed or (opening) the tag did not match.
static int run(tg_transport_aead *aead, const uint8_t nonce[nonce_length], uint8_t *buffer, size_t length,
               const OSSL_PARAM *tag_to_check) {
    if (aead->direct) {
        void *context = aead->context;
        size_t written = 0, final = 0;
        if ((aead->seal ? provider.encrypt_init : provider.decrypt_init)(context, NULL, 0, nonce, nonce_length, NULL) != 1) return 0;
        if (tag_to_check != NULL && provider.set_ctx_params(context, tag_to_check) != 1) return 0;
        if (length > 0 && provider.update(context, buffer, &written, length, buffer, length) != 1) return 0;
        if (provider.final(context, buffer + written, &final, length - written) != 1) return 0;
        return written + final == length;
    }
    EVP_CIPHER_CTX *context = (EVP_CIPHER_CTX *)aead->context;
    int written = 0, final = 0;
    if (EVP_CipherInit_ex(context, NULL, NULL, NULL, nonce, aead->seal) != 1) return 0;
    if (tag_to_check != NULL && EVP_CIPHER_CTX_set_params(context, tag_to_check) != 1) return 0;
    if (length > 0 && EVP_CipherUpdate(context, buffer, &written, buffer, (int)length) != 1) return 0;
    if (EVP_CipherFinal_ex(context, buffer + written, &final) != 1) return 0;
    return (size_t)(written + final) == length;
}

size_t tg_transport_aead_seal(tg_transport_aead *aead, uint64_t counter, uint8_t *buffer, size_t length) {
    uint8_t nonce[nonce_length];
    if (aead == NULL || !aead->seal || length > INT_MAX) return 0;
    nonce_of(counter, nonce);
    if (!run(aead, nonce, buffer, length, NULL)) return 0;
    // The tag through the parameter itself: EVP_CIPHER_CTX_ctrl would build this array on every call.
    OSSL_PARAM tag[2] = {
        OSSL_PARAM_construct_octet_string(OSSL_CIPHER_PARAM_AEAD_TAG, buffer + length, tag_length), OSSL_PARAM_construct_end()
    };
    int got = aead->direct ? provider.get_ctx_params(aead->context, tag)
                           : EVP_CIPHER_CTX_get_params((EVP_CIPHER_CTX *)aead->context, tag);
    return got == 1 ? length + tag_length : 0;
}

long tg_transport_aead_open(tg_transport_aead *aead, uint64_t counter, uint8_t *buffer, size_t length) {
    uint8_t nonce[nonce_length];
    if (aead == NULL || aead->seal || length < tag_length || length > INT_MAX) return -1;
    size_t ciphertext = length - tag_length;
    nonce_of(counter, nonce);
    OSSL_PARAM tag[2] = {
        OSSL_PARAM_construct_octet_string(OSSL_CIPHER_PARAM_AEAD_TAG, buffer + ciphertext, tag_length), OSSL_PARAM_construct_end()
    };
    // The tag is checked at the end; a message that does not authenticate fails.
    return run(aead, nonce, buffer, ciphertext, tag) ? (long)ciphertext : -1;
}
