/*
 * er_text.h — bounded text building for the example runtime: status JSON, error messages, addresses.
 *
 * Nothing here allocates. An er_text writes into a caller's buffer, always NUL-terminates it, and keeps
 * counting the length it would have needed once the buffer is full (snprintf's contract), so a caller
 * can tell "did not fit" from "fit" and report the size needed.
 */
#ifndef ER_TEXT_H
#define ER_TEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

/* Internal functions are hidden: the library exports only the ABI's symbols. */
#define ER_HIDDEN __attribute__((visibility("hidden")))

typedef struct {
    char *buf;
    size_t cap; /* bytes at buf, including room for the NUL */
    size_t len; /* length of the full text, even when it did not fit */
} er_text;

ER_HIDDEN void er_text_init(er_text *t, char *buf, size_t cap);
ER_HIDDEN bool er_text_fits(const er_text *t);
ER_HIDDEN void er_text_append(er_text *t, const char *s, size_t n);
ER_HIDDEN void er_text_puts(er_text *t, const char *s);
ER_HIDDEN void er_text_printf(er_text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Appends s[0..n) as a JSON string literal, quotes included. Bytes >= 0x80 pass through unchanged. */
ER_HIDDEN void er_text_json_string(er_text *t, const char *s, size_t n);
/* Appends a user-supplied argument for an error message: JSON-quoted, cut after 64 bytes with "...". */
ER_HIDDEN void er_text_quote_arg(er_text *t, const char *s);
/* Appends "strerror (errno)", e.g. "Address already in use (98)". */
ER_HIDDEN void er_text_errno(er_text *t, int err);
/* Appends "1.2.3.4:53" or "[2001:db8::1]:53"; an IPv4-mapped IPv6 address is written as IPv4. */
ER_HIDDEN void er_text_sockaddr(er_text *t, const struct sockaddr *sa);

/*
 * Copies a NUL-terminated message into a caller's error buffer of `cap` bytes: at most cap - 1 bytes,
 * cut at a UTF-8 character boundary, then a NUL. *out_len (when not NULL) receives the bytes written,
 * without the NUL. Tolerates dst == NULL or cap == 0 (then nothing is written and *out_len is 0).
 */
ER_HIDDEN void er_copy_message(char *dst, size_t cap, size_t *out_len, const char *msg);

/* CLOCK_MONOTONIC in milliseconds. */
ER_HIDDEN int64_t er_now_ms(void);

#endif /* ER_TEXT_H */
