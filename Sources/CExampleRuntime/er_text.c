#define _GNU_SOURCE
#include "er_text.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

void er_text_init(er_text *t, char *buf, size_t cap) {
    t->buf = buf;
    t->cap = cap;
    t->len = 0;
    if (cap > 0) buf[0] = '\0';
}

bool er_text_fits(const er_text *t) { return t->len < t->cap; }

void er_text_append(er_text *t, const char *s, size_t n) {
    if (t->len < t->cap) {
        size_t room = t->cap - 1 - t->len;
        size_t k = n < room ? n : room;
        memcpy(t->buf + t->len, s, k);
        t->buf[t->len + k] = '\0';
    }
    t->len += n;
}

void er_text_puts(er_text *t, const char *s) { er_text_append(t, s, strlen(s)); }

void er_text_printf(er_text *t, const char *fmt, ...) {
    char local[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(local, sizeof(local), fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if ((size_t)n < sizeof(local)) {
        er_text_append(t, local, (size_t)n);
        return;
    }
    /* Longer than the local buffer: format straight into the remaining room, then account for all of it. */
    size_t start = t->len;
    if (start < t->cap) {
        va_start(ap, fmt);
        vsnprintf(t->buf + start, t->cap - start, fmt, ap);
        va_end(ap);
    }
    t->len = start + (size_t)n;
}

void er_text_json_string(er_text *t, const char *s, size_t n) {
    static const char hex[] = "0123456789abcdef";
    er_text_append(t, "\"", 1);
    size_t run = 0; /* bytes of s[i - run .. i) that need no escaping, appended in one go */
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        const char *esc = NULL;
        char u[7];
        switch (c) {
        case '"': esc = "\\\""; break;
        case '\\': esc = "\\\\"; break;
        case '\n': esc = "\\n"; break;
        case '\r': esc = "\\r"; break;
        case '\t': esc = "\\t"; break;
        case '\b': esc = "\\b"; break;
        case '\f': esc = "\\f"; break;
        default:
            if (c < 0x20 || c == 0x7f) {
                u[0] = '\\'; u[1] = 'u'; u[2] = '0'; u[3] = '0';
                u[4] = hex[c >> 4]; u[5] = hex[c & 0xf]; u[6] = '\0';
                esc = u;
            }
        }
        if (esc == NULL) {
            run++;
            continue;
        }
        er_text_append(t, s + i - run, run);
        run = 0;
        er_text_puts(t, esc);
    }
    er_text_append(t, s + n - run, run);
    er_text_append(t, "\"", 1);
}

void er_text_quote_arg(er_text *t, const char *s) {
    enum { shown = 64 };
    size_t n = strlen(s);
    if (n <= shown) {
        er_text_json_string(t, s, n);
        return;
    }
    size_t cut = shown;
    while (cut > 0 && ((unsigned char)s[cut] & 0xC0) == 0x80) cut--; /* not inside a UTF-8 character */
    er_text_json_string(t, s, cut);
    er_text_puts(t, "...");
}

void er_text_errno(er_text *t, int err) {
    char buf[128];
    const char *msg = strerror_r(err, buf, sizeof(buf)); /* GNU strerror_r: returns the message */
    er_text_printf(t, "%s (%d)", msg, err);
}

void er_text_sockaddr(er_text *t, const struct sockaddr *sa) {
    char host[INET6_ADDRSTRLEN];
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
        inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
        er_text_printf(t, "%s:%u", host, (unsigned)ntohs(in->sin_port));
    } else if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
        if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr)) {
            inet_ntop(AF_INET, &in6->sin6_addr.s6_addr[12], host, sizeof(host));
            er_text_printf(t, "%s:%u", host, (unsigned)ntohs(in6->sin6_port));
        } else {
            inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
            er_text_printf(t, "[%s]:%u", host, (unsigned)ntohs(in6->sin6_port));
        }
    } else {
        er_text_printf(t, "(address family %d)", (int)sa->sa_family);
    }
}

void er_copy_message(char *dst, size_t cap, size_t *out_len, const char *msg) {
    size_t n = 0;
    if (dst != NULL && cap > 0) {
        n = strlen(msg);
        if (n > cap - 1) {
            n = cap - 1;
            while (n > 0 && ((unsigned char)msg[n] & 0xC0) == 0x80) n--;
        }
        memcpy(dst, msg, n);
        dst[n] = '\0';
    }
    if (out_len != NULL) *out_len = n;
}

int64_t er_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}
