#define _GNU_SOURCE
#include "er_args.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- args_json: a flat JSON array of strings (RFC 8259 strings; nothing else is accepted) -------- */

typedef struct {
    const char *start;
    const char *p;
    er_text *err;
} json_cursor;

static size_t offset_of(const json_cursor *c) { return (size_t)(c->p - c->start); }

static void skip_ws(json_cursor *c) {
    while (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r') c->p++;
}

static int fail_at(json_cursor *c, const char *what) {
    er_text_printf(c->err, "arguments: %s at byte %zu (expected a JSON array of strings)", what, offset_of(c));
    return -1;
}

static int hex4(const char *s, uint32_t *out) {
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) {
        char h = s[i];
        v <<= 4;
        if (h >= '0' && h <= '9') v |= (uint32_t)(h - '0');
        else if (h >= 'a' && h <= 'f') v |= (uint32_t)(h - 'a' + 10);
        else if (h >= 'A' && h <= 'F') v |= (uint32_t)(h - 'A' + 10);
        else return -1;
    }
    *out = v;
    return 0;
}

static char *put_utf8(char *o, uint32_t cp) {
    if (cp < 0x80) {
        *o++ = (char)cp;
    } else if (cp < 0x800) {
        *o++ = (char)(0xC0 | (cp >> 6));
        *o++ = (char)(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        *o++ = (char)(0xE0 | (cp >> 12));
        *o++ = (char)(0x80 | ((cp >> 6) & 0x3F));
        *o++ = (char)(0x80 | (cp & 0x3F));
    } else {
        *o++ = (char)(0xF0 | (cp >> 18));
        *o++ = (char)(0x80 | ((cp >> 12) & 0x3F));
        *o++ = (char)(0x80 | ((cp >> 6) & 0x3F));
        *o++ = (char)(0x80 | (cp & 0x3F));
    }
    return o;
}

/* Length of the well-formed UTF-8 character at s (1..4), or 0 when it is not well-formed. */
static size_t utf8_char_len(const unsigned char *s) {
    unsigned char b = s[0];
    size_t n;
    uint32_t cp, min;
    if (b < 0x80) return 1;
    if (b >= 0xC2 && b <= 0xDF) { n = 2; cp = b & 0x1F; min = 0x80; }
    else if (b >= 0xE0 && b <= 0xEF) { n = 3; cp = b & 0x0F; min = 0x800; }
    else if (b >= 0xF0 && b <= 0xF4) { n = 4; cp = b & 0x07; min = 0x10000; }
    else return 0;
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0; /* also stops at the NUL */
        cp = (cp << 6) | (s[i] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
    return n;
}

/* Decodes the string whose opening quote is at c->p into *o (advanced past the bytes and a NUL). */
static int parse_string(json_cursor *c, char **o) {
    char *out = *o;
    c->p++; /* the opening quote */
    for (;;) {
        unsigned char b = (unsigned char)*c->p;
        if (b == '\0') return fail_at(c, "unterminated string");
        if (b == '"') {
            c->p++;
            break;
        }
        if (b < 0x20) return fail_at(c, "unescaped control character in a string");
        if (b != '\\') {
            size_t n = utf8_char_len((const unsigned char *)c->p);
            if (n == 0) return fail_at(c, "invalid UTF-8");
            memcpy(out, c->p, n);
            out += n;
            c->p += n;
            continue;
        }
        char e = c->p[1];
        const char *simple = strchr("\"\\/bfnrt", e);
        if (e != '\0' && simple != NULL) {
            static const char decoded[] = "\"\\/\b\f\n\r\t";
            *out++ = decoded[simple - "\"\\/bfnrt"];
            c->p += 2;
            continue;
        }
        if (e != 'u') return fail_at(c, "invalid escape");
        uint32_t cp;
        if (hex4(c->p + 2, &cp) != 0) return fail_at(c, "invalid \\u escape");
        if (cp >= 0xDC00 && cp <= 0xDFFF) return fail_at(c, "unpaired UTF-16 surrogate in a \\u escape");
        if (cp >= 0xD800 && cp <= 0xDBFF) {
            uint32_t lo;
            if (c->p[6] != '\\' || c->p[7] != 'u' || hex4(c->p + 8, &lo) != 0 || lo < 0xDC00 || lo > 0xDFFF)
                return fail_at(c, "unpaired UTF-16 surrogate in a \\u escape");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            c->p += 6;
        }
        if (cp == 0) return fail_at(c, "\\u0000 (an argument cannot hold a NUL)");
        out = put_utf8(out, cp);
        c->p += 6;
    }
    *out++ = '\0';
    *o = out;
    return 0;
}

int er_arglist_parse(const char *json, er_arglist *out, er_text *err) {
    memset(out, 0, sizeof(*out));
    size_t json_len = strnlen(json, ER_ARGS_MAX_JSON + 1);
    if (json_len > ER_ARGS_MAX_JSON) {
        er_text_printf(err, "arguments: longer than %u bytes", ER_ARGS_MAX_JSON);
        return -1;
    }
    /* A decoded string is never longer than its JSON form, which has two quotes to make room for a NUL. */
    out->storage = malloc(json_len + 1);
    out->argv = calloc(ER_ARGS_MAX_COUNT, sizeof(char *));
    if (out->storage == NULL || out->argv == NULL) {
        er_text_puts(err, "arguments: out of memory");
        er_arglist_free(out);
        return -1;
    }
    json_cursor c = {.start = json, .p = json, .err = err};
    char *o = out->storage;
    skip_ws(&c);
    if (*c.p != '[') goto fail_not_array;
    c.p++;
    skip_ws(&c);
    if (*c.p == ']') {
        c.p++;
    } else {
        for (;;) {
            if (*c.p != '"') {
                fail_at(&c, "an element that is not a string");
                goto fail;
            }
            if (out->argc == ER_ARGS_MAX_COUNT) {
                er_text_printf(err, "arguments: more than %u strings", ER_ARGS_MAX_COUNT);
                goto fail;
            }
            out->argv[out->argc++] = o;
            if (parse_string(&c, &o) != 0) goto fail;
            skip_ws(&c);
            if (*c.p == ',') {
                c.p++;
                skip_ws(&c);
                continue;
            }
            if (*c.p == ']') {
                c.p++;
                break;
            }
            fail_at(&c, *c.p == '\0' ? "unterminated array" : "expected ',' or ']'");
            goto fail;
        }
    }
    skip_ws(&c);
    if (*c.p != '\0') {
        fail_at(&c, "text after the array");
        goto fail;
    }
    return 0;

fail_not_array:
    fail_at(&c, *c.p == '\0' ? "empty text" : "not an array");
fail:
    er_arglist_free(out);
    return -1;
}

void er_arglist_free(er_arglist *list) {
    free(list->argv);
    free(list->storage);
    memset(list, 0, sizeof(*list));
}

/* ---- options ------------------------------------------------------------------------------------ */

typedef enum { OPT_BIND, OPT_PEER, OPT_QUEUE, OPT_SILENCE, OPT_KEEPALIVE, OPT_FWMARK, OPT_FAIL_START,
               OPT_TUN_MTU, OPT_TUN_FD, OPT_DIRECT_SEND, OPT_START_DELAY, OPT_START_SILENT, OPT_NOTE, OPT_COUNT } option_id;

static const struct {
    const char *name;
    option_id id;
    uint64_t min, max; /* numeric options only (max == 0: not numeric) */
} options[] = {
    {"--bind", OPT_BIND, 0, 0},
    {"--peer", OPT_PEER, 0, 0},
    {"--queue", OPT_QUEUE, 1, ER_QUEUE_MAX},
    {"--silence-ms", OPT_SILENCE, 1, ER_INTERVAL_MAX_MS},
    {"--keepalive-ms", OPT_KEEPALIVE, 0, ER_INTERVAL_MAX_MS},
    {"--fwmark", OPT_FWMARK, 0, UINT32_MAX},
    {"--fail-start", OPT_FAIL_START, 0, 0},
    {"--tun-mtu", OPT_TUN_MTU, ER_MTU_MIN, ER_MTU_MAX},
    {"--tun-fd", OPT_TUN_FD, 0, INT32_MAX},
    {"--direct-send", OPT_DIRECT_SEND, 0, ER_DIRECT_SEND_MAX},
    {"--start-delay-ms", OPT_START_DELAY, 0, ER_INTERVAL_MAX_MS},
    {"--start-silent", OPT_START_SILENT, 0, 1},
    {"--note", OPT_NOTE, 0, 0},
};

/* A whole number in [min, max]: decimal, or 0x-prefixed hexadecimal when allow_hex. */
static int parse_number(const char *name, const char *text, uint64_t min, uint64_t max, bool allow_hex,
                        uint64_t *out, er_text *err) {
    const char *s = text;
    unsigned base = 10;
    if (allow_hex && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
        base = 16;
        s += 2;
    }
    uint64_t v = 0;
    bool ok = *s != '\0';
    for (; ok && *s != '\0'; s++) {
        unsigned d;
        if (*s >= '0' && *s <= '9') d = (unsigned)(*s - '0');
        else if (base == 16 && *s >= 'a' && *s <= 'f') d = (unsigned)(*s - 'a' + 10);
        else if (base == 16 && *s >= 'A' && *s <= 'F') d = (unsigned)(*s - 'A' + 10);
        else { ok = false; break; }
        if (d > max || v > (max - d) / base) { ok = false; break; } /* would exceed max (and cannot overflow) */
        v = v * base + d;
    }
    if (!ok || v < min) {
        er_text_printf(err, "%s: ", name);
        er_text_quote_arg(err, text);
        er_text_printf(err, " is not a whole number in %llu...%llu", (unsigned long long)min,
                       (unsigned long long)max);
        return -1;
    }
    *out = v;
    return 0;
}

/* "1.2.3.4:PORT" or "[IPV6]:PORT"; numeric addresses only (the runtime does no name resolution). */
static int parse_endpoint(const char *name, const char *text, bool port_zero_ok, struct sockaddr_storage *ss,
                          socklen_t *len, er_text *err) {
    char host[INET6_ADDRSTRLEN + 1];
    const char *port_text;
    bool v6 = text[0] == '[';
    size_t host_len;
    if (v6) {
        const char *close = strchr(text, ']');
        if (close == NULL || close[1] != ':') goto bad_form;
        host_len = (size_t)(close - text - 1);
        if (host_len >= sizeof(host)) goto bad_address;
        memcpy(host, text + 1, host_len);
        port_text = close + 2;
    } else {
        const char *colon = strrchr(text, ':');
        if (colon == NULL) goto bad_form;
        host_len = (size_t)(colon - text);
        if (memchr(text, ':', host_len) != NULL) {
            er_text_printf(err, "%s: ", name);
            er_text_quote_arg(err, text);
            er_text_puts(err, " needs brackets around an IPv6 address: [ADDRESS]:PORT");
            return -1;
        }
        if (host_len >= sizeof(host)) goto bad_address;
        memcpy(host, text, host_len);
        port_text = colon + 1;
    }
    host[host_len] = '\0';

    uint64_t port;
    char port_name[32];
    snprintf(port_name, sizeof(port_name), "%s port", name);
    if (parse_number(port_name, port_text, port_zero_ok ? 0 : 1, 65535, false, &port, err) != 0) return -1;

    memset(ss, 0, sizeof(*ss));
    if (v6) {
        struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;
        if (inet_pton(AF_INET6, host, &in6->sin6_addr) != 1) goto bad_address;
        in6->sin6_family = AF_INET6;
        in6->sin6_port = htons((uint16_t)port);
        *len = sizeof(*in6);
    } else {
        struct sockaddr_in *in = (struct sockaddr_in *)ss;
        if (inet_pton(AF_INET, host, &in->sin_addr) != 1) goto bad_address;
        in->sin_family = AF_INET;
        in->sin_port = htons((uint16_t)port);
        *len = sizeof(*in);
    }
    return 0;

bad_form:
    er_text_printf(err, "%s: ", name);
    er_text_quote_arg(err, text);
    er_text_puts(err, " is not ADDRESS:PORT or [IPV6-ADDRESS]:PORT");
    return -1;
bad_address:
    er_text_printf(err, "%s: ", name);
    er_text_quote_arg(err, text);
    er_text_puts(err, v6 ? " does not hold a numeric IPv6 address" : " does not hold a numeric IPv4 address");
    return -1;
}

/* Makes the peer's family match the socket's: an IPv4 peer of a [::] socket becomes ::ffff:a.b.c.d. */
static int reconcile_families(er_config *cfg, er_text *err) {
    sa_family_t bf = cfg->bind.ss_family, pf = cfg->peer.ss_family;
    if (!cfg->has_peer || bf == pf) return 0;
    if (bf == AF_INET) {
        er_text_puts(err, "--peer is IPv6 but --bind is IPv4; bind an IPv6 address such as [::]:PORT");
        return -1;
    }
    const struct sockaddr_in6 *b6 = (const struct sockaddr_in6 *)&cfg->bind;
    if (!IN6_IS_ADDR_UNSPECIFIED(&b6->sin6_addr)) {
        er_text_puts(err, "--peer is IPv4 but --bind is an IPv6 address other than [::]; bind an IPv4 address "
                          "or [::]:PORT");
        return -1;
    }
    struct sockaddr_in v4 = *(const struct sockaddr_in *)&cfg->peer;
    struct sockaddr_in6 mapped;
    memset(&mapped, 0, sizeof(mapped));
    mapped.sin6_family = AF_INET6;
    mapped.sin6_port = v4.sin_port;
    mapped.sin6_addr.s6_addr[10] = 0xff;
    mapped.sin6_addr.s6_addr[11] = 0xff;
    memcpy(&mapped.sin6_addr.s6_addr[12], &v4.sin_addr, 4);
    memset(&cfg->peer, 0, sizeof(cfg->peer));
    memcpy(&cfg->peer, &mapped, sizeof(mapped));
    cfg->peer_len = sizeof(mapped);
    cfg->dual_stack = true;
    return 0;
}

int er_config_parse(const er_arglist *list, er_config *cfg, er_text *err) {
    memset(cfg, 0, sizeof(*cfg));
    cfg->queue = ER_QUEUE_DEFAULT;
    cfg->silence_ms = ER_SILENCE_DEFAULT_MS;
    cfg->keepalive_ms = ER_KEEPALIVE_DEFAULT_MS;
    cfg->mtu = ER_MTU_DEFAULT;
    cfg->tun_fd = -1;
    cfg->direct_send = ER_DIRECT_SEND_DEFAULT;
    bool seen[OPT_COUNT] = {false};

    for (size_t i = 0; i < list->argc; i++) {
        const char *arg = list->argv[i];
        size_t k = 0;
        while (k < sizeof(options) / sizeof(options[0]) && strcmp(arg, options[k].name) != 0) k++;
        if (k == sizeof(options) / sizeof(options[0])) {
            er_text_puts(err, "unknown argument ");
            er_text_quote_arg(err, arg);
            er_text_puts(err, " (known: --bind, --peer, --queue, --silence-ms, --keepalive-ms, --fwmark, "
                              "--direct-send, --fail-start, --start-delay-ms, --start-silent, --note, --tun-mtu, --tun-fd)");
            return -1;
        }
        const char *name = options[k].name;
        option_id id = options[k].id;
        if (seen[id]) {
            er_text_printf(err, "%s is given twice", name);
            return -1;
        }
        seen[id] = true;
        if (i + 1 == list->argc) {
            er_text_printf(err, "%s needs a value", name);
            return -1;
        }
        const char *value = list->argv[++i];
        uint64_t n = 0;
        if (options[k].max != 0 &&
            parse_number(name, value, options[k].min, options[k].max, id == OPT_FWMARK, &n, err) != 0)
            return -1;
        switch (id) {
        case OPT_BIND:
            if (parse_endpoint(name, value, true, &cfg->bind, &cfg->bind_len, err) != 0) return -1;
            break;
        case OPT_PEER:
            if (parse_endpoint(name, value, false, &cfg->peer, &cfg->peer_len, err) != 0) return -1;
            cfg->has_peer = true;
            break;
        case OPT_QUEUE: cfg->queue = (uint32_t)n; break;
        case OPT_SILENCE: cfg->silence_ms = (uint32_t)n; break;
        case OPT_KEEPALIVE: cfg->keepalive_ms = (uint32_t)n; break;
        case OPT_FWMARK:
            cfg->fwmark = (uint32_t)n;
            cfg->has_fwmark = true;
            break;
        case OPT_FAIL_START: cfg->fail_start = value; break;
        case OPT_TUN_MTU: cfg->mtu = (uint32_t)n; break;
        case OPT_TUN_FD: cfg->tun_fd = (int)n; break;
        case OPT_DIRECT_SEND: cfg->direct_send = (uint32_t)n; break;
        case OPT_START_DELAY: cfg->start_delay_ms = (uint32_t)n; break;
        case OPT_START_SILENT: cfg->start_silent = n == 1; break;
        case OPT_NOTE: cfg->note = value; break;
        case OPT_COUNT: break;
        }
    }

    if (!seen[OPT_BIND]) {
        if (!cfg->has_peer) {
            er_text_puts(err, "needs --bind ADDRESS:PORT, --peer ADDRESS:PORT, or both");
            return -1;
        }
        /* Bind the wildcard address of the peer's family, on a port the kernel picks. */
        cfg->bind.ss_family = cfg->peer.ss_family;
        cfg->bind_len = cfg->peer_len;
    }
    if (reconcile_families(cfg, err) != 0) return -1;
    if ((uint64_t)cfg->queue * cfg->mtu > ER_QUEUE_MAX_BYTES) {
        er_text_printf(err, "--queue %u x --tun-mtu %u is more than %u MiB of queue", cfg->queue, cfg->mtu,
                       ER_QUEUE_MAX_BYTES >> 20);
        return -1;
    }
    return 0;
}
