/*
 * er_args.h — the example runtime's arguments: args_json (a flat JSON array of strings) to an argv,
 * and the argv to a validated er_config. Every error names the offending argument or byte offset.
 */
#ifndef ER_ARGS_H
#define ER_ARGS_H

#include "er_text.h"

#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>

/* Limits on what start accepts; documented in docs/runtime-abi.md. */
#define ER_ARGS_MAX_JSON      65536u   /* bytes of args_json */
#define ER_ARGS_MAX_COUNT     256u     /* strings in the array */
#define ER_QUEUE_DEFAULT      1024u
#define ER_QUEUE_MAX          65536u
#define ER_QUEUE_MAX_BYTES    (256u << 20) /* queue capacity x MTU */
#define ER_SILENCE_DEFAULT_MS 3000u
#define ER_KEEPALIVE_DEFAULT_MS 1000u
#define ER_DIRECT_SEND_DEFAULT 64u   /* every batch Tunnelgate hands over (it reads at most 64 per wake-up) */
#define ER_DIRECT_SEND_MAX    65536u
#define ER_INTERVAL_MAX_MS    86400000u /* one day */
#define ER_MTU_DEFAULT        1500u
#define ER_MTU_MIN            68u
/* The largest UDP payload over IPv4 (65535 - 20 - 8) less the wire overhead (er_wire.h). */
#define ER_MTU_MAX            (65507u - 44u)

/* The strings of args_json, decoded. argv[i] points into one allocation. */
typedef struct {
    char **argv;
    size_t argc;
    char *storage;
} er_arglist;

/* Parses args_json; on failure writes the reason to err and returns -1. */
ER_HIDDEN int er_arglist_parse(const char *json, er_arglist *out, er_text *err);
ER_HIDDEN void er_arglist_free(er_arglist *list);

typedef struct {
    struct sockaddr_storage bind; /* what the UDP socket binds; family decides the socket's */
    socklen_t bind_len;
    bool has_peer;
    struct sockaddr_storage peer; /* in the bind address's family (IPv4 peers of [::] are v4-mapped) */
    socklen_t peer_len;
    bool dual_stack;              /* bind is [::] and the peer is IPv4: IPV6_V6ONLY off */
    uint32_t queue;
    uint32_t silence_ms;
    uint32_t keepalive_ms;        /* 0: no keepalives */
    bool has_fwmark;
    uint32_t fwmark;
    uint32_t mtu;
    int tun_fd;                   /* -1: callback packet path */
    uint32_t direct_send;         /* packet_in_batch calls of at most this many packets are sealed and sent on the
                                     caller's thread while the sender is idle; 0: never */
    const char *fail_start;       /* points into the er_arglist; NULL unless --fail-start */
    uint32_t start_delay_ms;      /* test hook: stay "starting" this long after start */
    bool start_silent;            /* test hook (--start-silent 1): the silence is already over at start, so
                                     status says reconnecting until the first authentic datagram */
    const char *note;             /* test hook: points into the er_arglist; status shows it as "note" */
} er_config;

/*
 * Turns the argv into a config: defaults, ranges, duplicates, address families. On failure writes the
 * reason to err and returns -1. The config may point into `list`, which must outlive it.
 */
ER_HIDDEN int er_config_parse(const er_arglist *list, er_config *cfg, er_text *err);

#endif /* ER_ARGS_H */
