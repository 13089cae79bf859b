/*
 * example_runtime.c — Tunnelgate's example packet runtime: the ABI's entry points (tunnelgate_runtime.h).
 *
 * IP packets travel inside UDP datagrams to one peer, sealed with XChaCha20-Poly1305 (er_wire.h).
 * docs/runtime-abi.md is the contract and uses this runtime as its worked example.
 *
 * Handles: start returns a pointer to an er_runtime and records it in a registry of live handles. Every
 * other entry point looks the handle up under the registry's read lock and holds that lock while it
 * works, and stop removes it under the write lock before tearing it down. So a stale handle (a second
 * stop, a packet_in after stop) is recognised without being dereferenced, and stop never frees a runtime
 * another thread is inside. The lock prefers writers, so a stream of packet_in calls cannot starve stop.
 */
#define _GNU_SOURCE
#include "er_runtime.h"
#include "tunnelgate_runtime.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#define ER_EXPORT __attribute__((visibility("default")))

/*
 * Names and result codes. The default build exports the ABI's six tunnelgate_runtime_* functions with the
 * header's codes, and MEHS's four names as aliases with the same codes (Sources/MEHSClient binds those).
 *
 * Built with -DER_ABI_VARIANT_MEHS, the same source is a runtime with its own names and codes, as an
 * existing binary would be: it exports MEHS's four names only (no tunnelgate_runtime_*, no batch call; MEHS
 * has none), its app_message under a name of its own (MEHS's guide documents none), and answers with the
 * codes below. A host binds it through the configuration's "symbols" and "resultCodes"
 * (netns/tests/runtime-binding.sh builds and hosts it; docs/runtime-abi.md). Inside, everything works in
 * the header's codes; ER_ABI_CODE translates them where they leave the library.
 */
#ifdef ER_ABI_VARIANT_MEHS
#define ER_ABI_EXPORT ER_HIDDEN
#define ER_VARIANT_OK                0
#define ER_VARIANT_QUEUE_FULL       11
#define ER_VARIANT_INVALID_STATE    12
#define ER_VARIANT_INVALID_ARGUMENT 13
#define ER_VARIANT_BUFFER_TOO_SMALL 14
#define ER_VARIANT_FAILED           15
static int32_t er_variant_code(int32_t rc) {
    switch (rc) {
    case TUNNELGATE_RUNTIME_OK: return ER_VARIANT_OK;
    case TUNNELGATE_RUNTIME_QUEUE_FULL: return ER_VARIANT_QUEUE_FULL;
    case TUNNELGATE_RUNTIME_INVALID_STATE: return ER_VARIANT_INVALID_STATE;
    case TUNNELGATE_RUNTIME_INVALID_ARGUMENT: return ER_VARIANT_INVALID_ARGUMENT;
    case TUNNELGATE_RUNTIME_BUFFER_TOO_SMALL: return ER_VARIANT_BUFFER_TOO_SMALL;
    default: return ER_VARIANT_FAILED;
    }
}
#define ER_ABI_CODE(rc) er_variant_code(rc)
#else
#define ER_ABI_EXPORT ER_EXPORT
#define ER_ABI_CODE(rc) (rc)
#endif

static pthread_rwlock_t registry_lock = PTHREAD_RWLOCK_WRITER_NONRECURSIVE_INITIALIZER_NP;
static er_runtime *registry; /* live runtimes, under registry_lock */

/* The live runtime `handle` names, or NULL. Call with registry_lock held. Never dereferences handle. */
static er_runtime *registry_find(const void *handle) {
    for (er_runtime *rt = registry; rt != NULL; rt = rt->next)
        if ((const void *)rt == handle) return rt;
    return NULL;
}

/* ---- teardown ----------------------------------------------------------------------------------- */

/* Frees a runtime that is not (or no longer) in the registry, whatever part of start it got through. */
static void runtime_destroy(er_runtime *rt) {
    if (rt->stop_fd >= 0) {
        uint64_t one = 1;
        while (write(rt->stop_fd, &one, sizeof(one)) < 0 && errno == EINTR) {
        }
    }
    /* After these joins no runtime thread runs: the writer is never called again. */
    if (rt->sender_started) pthread_join(rt->sender, NULL);
    if (rt->receiver_started) pthread_join(rt->receiver, NULL);
    if (rt->udp_fd >= 0) close(rt->udp_fd);
    if (rt->stop_fd >= 0) close(rt->stop_fd);
    if (rt->wake_fd >= 0) close(rt->wake_fd);
    er_queue_destroy(&rt->queue);
    er_io_free(rt);
    if (rt->key != NULL) {
        sodium_memzero(rt->key, ER_WIRE_KEY_BYTES);
        sodium_free(rt->key);
    }
    pthread_mutex_destroy(&rt->peer_lock);
    pthread_mutex_destroy(&rt->fail_lock);
    pthread_mutex_destroy(&rt->tx_lock);
    free(rt);
}

/* ---- start -------------------------------------------------------------------------------------- */

/* Writes "what failed: strerror (errno)" to err; returns FAILED. */
static int32_t system_error(er_text *err, const char *what, int e) {
    er_text_puts(err, what);
    er_text_puts(err, " failed: ");
    er_text_errno(err, e);
    return TUNNELGATE_RUNTIME_FAILED;
}

static int32_t open_socket(er_runtime *rt, const er_config *cfg, er_text *err) {
    rt->udp_fd = socket(cfg->bind.ss_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (rt->udp_fd < 0) return system_error(err, "socket(SOCK_DGRAM)", errno);
    if (cfg->dual_stack) {
        int off = 0;
        if (setsockopt(rt->udp_fd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof(off)) != 0)
            return system_error(err, "setsockopt(IPV6_V6ONLY 0)", errno);
    }
    /* Large buffers ride out bursts (a sendmmsg of ER_BATCH datagrams, a slow writer). Past
       net.core.rmem_max/wmem_max only with CAP_NET_ADMIN (the FORCE options); without it the size the
       limits allow, which the kernel always grants: a refusal of that is an error. */
    int size = ER_SOCKET_BUFFER, on = 1;
    if (setsockopt(rt->udp_fd, SOL_SOCKET, SO_RCVBUFFORCE, &size, sizeof(size)) != 0
        && setsockopt(rt->udp_fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof(size)) != 0)
        return system_error(err, "setsockopt(SO_RCVBUF)", errno);
    if (setsockopt(rt->udp_fd, SOL_SOCKET, SO_SNDBUFFORCE, &size, sizeof(size)) != 0
        && setsockopt(rt->udp_fd, SOL_SOCKET, SO_SNDBUF, &size, sizeof(size)) != 0)
        return system_error(err, "setsockopt(SO_SNDBUF)", errno);
    if (setsockopt(rt->udp_fd, SOL_SOCKET, SO_RXQ_OVFL, &on, sizeof(on)) != 0)
        return system_error(err, "setsockopt(SO_RXQ_OVFL)", errno);
    if (cfg->has_fwmark) {
        if (setsockopt(rt->udp_fd, SOL_SOCKET, SO_MARK, &cfg->fwmark, sizeof(cfg->fwmark)) != 0) {
            char what[48];
            snprintf(what, sizeof(what), "setsockopt(SO_MARK %u)", cfg->fwmark);
            return system_error(err, what, errno);
        }
    }
    if (bind(rt->udp_fd, (const struct sockaddr *)&cfg->bind, cfg->bind_len) != 0) {
        int e = errno;
        er_text_puts(err, "bind(");
        er_text_sockaddr(err, (const struct sockaddr *)&cfg->bind);
        er_text_puts(err, ")");
        return system_error(err, "", e);
    }
    socklen_t len = sizeof(rt->local);
    if (getsockname(rt->udp_fd, (struct sockaddr *)&rt->local, &len) != 0)
        return system_error(err, "getsockname", errno);
    return TUNNELGATE_RUNTIME_OK;
}

/* fd path: the descriptor must be open; the runtime uses it non-blocking and never closes it. */
static int32_t adopt_tun_fd(int fd, er_text *err) {
    int flags = fcntl(fd, F_GETFL);
    if (flags < 0) {
        er_text_printf(err, "--tun-fd: %d is not an open file descriptor", fd);
        return TUNNELGATE_RUNTIME_INVALID_ARGUMENT;
    }
    if ((flags & O_ACCMODE) != O_RDWR) {
        er_text_printf(err, "--tun-fd: %d is not open for reading and writing", fd);
        return TUNNELGATE_RUNTIME_INVALID_ARGUMENT;
    }
    if (!(flags & O_NONBLOCK) && fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0) {
        char what[48];
        snprintf(what, sizeof(what), "fcntl(tun fd %d, O_NONBLOCK)", fd);
        return system_error(err, what, errno);
    }
    return TUNNELGATE_RUNTIME_OK;
}

/* Starts both threads with every signal blocked: signals go to the host's threads, not the runtime's. */
static int32_t start_threads(er_runtime *rt, er_text *err) {
    sigset_t all, saved;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &saved);
    int e = pthread_create(&rt->sender, NULL, er_sender_main, rt);
    rt->sender_started = e == 0;
    if (e == 0) {
        e = pthread_create(&rt->receiver, NULL, er_receiver_main, rt);
        rt->receiver_started = e == 0;
    }
    pthread_sigmask(SIG_SETMASK, &saved, NULL);
    return e == 0 ? TUNNELGATE_RUNTIME_OK : system_error(err, "pthread_create", e);
}

static int32_t start_runtime(const char *args_json, const char *secret, tunnelgate_runtime_writer writer,
                             void *context, void **handle, er_text *err) {
    if (handle == NULL) {
        er_text_puts(err, "handle is NULL");
        return TUNNELGATE_RUNTIME_INVALID_ARGUMENT;
    }
    *handle = NULL;
    if (args_json == NULL) {
        er_text_puts(err, "args_json is NULL");
        return TUNNELGATE_RUNTIME_INVALID_ARGUMENT;
    }
    er_arglist args;
    er_config cfg;
    if (er_arglist_parse(args_json, &args, err) != 0) return TUNNELGATE_RUNTIME_INVALID_ARGUMENT;
    if (er_config_parse(&args, &cfg, err) != 0) {
        er_arglist_free(&args);
        return TUNNELGATE_RUNTIME_INVALID_ARGUMENT;
    }
    if (cfg.fail_start != NULL) {
        er_text_puts(err, cfg.fail_start);
        er_arglist_free(&args);
        return TUNNELGATE_RUNTIME_FAILED;
    }
    char note[sizeof(((er_runtime *)0)->note)] = "";
    if (cfg.note != NULL) er_copy_message(note, sizeof(note), NULL, cfg.note);
    er_arglist_free(&args); /* nothing in cfg points into it past fail_start and note */
    cfg.fail_start = cfg.note = NULL;

    if (secret == NULL || secret[0] == '\0') {
        er_text_puts(err, "the secret is empty; the example runtime derives its key from it (secretFile)");
        return TUNNELGATE_RUNTIME_INVALID_ARGUMENT;
    }
    if (cfg.tun_fd < 0 && writer == NULL) {
        er_text_puts(err, "writer is NULL; the callback packet path needs one");
        return TUNNELGATE_RUNTIME_INVALID_ARGUMENT;
    }
    if (cfg.tun_fd >= 0) {
        int32_t rc = adopt_tun_fd(cfg.tun_fd, err);
        if (rc != TUNNELGATE_RUNTIME_OK) return rc;
    }
    if (sodium_init() < 0) {
        er_text_puts(err, "sodium_init failed");
        return TUNNELGATE_RUNTIME_FAILED;
    }

    er_runtime *rt = calloc(1, sizeof(*rt));
    if (rt == NULL) return system_error(err, "calloc(runtime)", ENOMEM);
    rt->udp_fd = rt->stop_fd = rt->wake_fd = -1;
    pthread_mutex_init(&rt->peer_lock, NULL);
    pthread_mutex_init(&rt->fail_lock, NULL);
    pthread_mutex_init(&rt->tx_lock, NULL);
    atomic_init(&rt->state, ER_STARTING);
    rt->mtu = cfg.mtu;
    rt->silence_ms = cfg.silence_ms;
    rt->keepalive_ms = cfg.keepalive_ms;
    rt->tun_fd = cfg.tun_fd;
    rt->direct_send = cfg.direct_send;
    rt->start_delay_ms = cfg.start_delay_ms;
    rt->start_silent = cfg.start_silent;
    memcpy(rt->note, note, sizeof(rt->note));
    rt->writer = cfg.tun_fd < 0 ? writer : NULL;
    rt->context = context;
    rt->has_peer = cfg.has_peer;
    rt->peer = cfg.peer;
    rt->peer_len = cfg.peer_len;

    int32_t rc = TUNNELGATE_RUNTIME_OK;
    /* The key: derived straight from the caller's secret (never copied), into locked, guarded memory. */
    rt->key = sodium_malloc(ER_WIRE_KEY_BYTES);
    if (rt->key == NULL) rc = system_error(err, "sodium_malloc(key)", errno);
    else if (er_wire_derive_key(rt->key, secret, strlen(secret)) != 0) {
        er_text_puts(err, "deriving the key (crypto_generichash) failed");
        rc = TUNNELGATE_RUNTIME_FAILED;
    }
    if (rc == TUNNELGATE_RUNTIME_OK) {
        rt->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        rt->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (rt->stop_fd < 0 || rt->wake_fd < 0) rc = system_error(err, "eventfd", errno);
    }
    if (rc == TUNNELGATE_RUNTIME_OK && rt->tun_fd < 0 && er_queue_init(&rt->queue, cfg.queue, cfg.mtu, rt->wake_fd) != 0)
        rc = system_error(err, "allocating the input queue", ENOMEM);
    if (rc == TUNNELGATE_RUNTIME_OK && er_io_allocate(rt) != 0)
        rc = system_error(err, "allocating packet buffers", ENOMEM);
    if (rc == TUNNELGATE_RUNTIME_OK) rc = open_socket(rt, &cfg, err);
    if (rc == TUNNELGATE_RUNTIME_OK) {
        int64_t now = er_now_ms();
        atomic_init(&rt->last_rx_ms, er_silence_origin(rt, now));       /* silence counts from start */
        atomic_init(&rt->last_tx_ms, now - (int64_t)rt->keepalive_ms); /* first keepalive at once */
        rc = start_threads(rt, err);
    }
    if (rc != TUNNELGATE_RUNTIME_OK) {
        atomic_store(&rt->state, ER_STOPPED);
        runtime_destroy(rt);
        return rc;
    }
    pthread_rwlock_wrlock(&registry_lock);
    rt->next = registry;
    registry = rt;
    pthread_rwlock_unlock(&registry_lock);
    *handle = rt;
    return TUNNELGATE_RUNTIME_OK;
}

ER_ABI_EXPORT int32_t tunnelgate_runtime_start(const char *args_json, const char *secret,
                                           tunnelgate_runtime_writer writer, void *context, void **handle,
                                           char *error, size_t error_capacity, size_t *error_len) {
    char message[512];
    er_text err;
    er_text_init(&err, message, sizeof(message));
    int32_t rc = start_runtime(args_json, secret, writer, context, handle, &err);
    if (rc == TUNNELGATE_RUNTIME_OK) {
        er_copy_message(error, error_capacity, error_len, "");
    } else {
        er_copy_message(error, error_capacity, error_len, message);
    }
    return rc;
}

/* ---- packet_in ---------------------------------------------------------------------------------- */

static int32_t packet_in(er_runtime *rt, const uint8_t *packet, size_t len) {
    if (packet == NULL || len == 0) return TUNNELGATE_RUNTIME_INVALID_ARGUMENT;
    if (len > rt->mtu) {
        er_count(rt, ER_C_DROPS_OVERSIZE, 1);
        return TUNNELGATE_RUNTIME_INVALID_ARGUMENT;
    }
    /* The fd path reads its own packets; starting, failed: nothing would send them. */
    if (rt->tun_fd >= 0 || atomic_load_explicit(&rt->state, memory_order_acquire) != ER_RUNNING)
        return TUNNELGATE_RUNTIME_INVALID_STATE;
    if (er_queue_push(&rt->queue, packet, len) != 0) {
        er_count(rt, ER_C_QUEUE_FULL, 1);
        return TUNNELGATE_RUNTIME_QUEUE_FULL;
    }
    er_count(rt, ER_C_PACKETS_IN, 1);
    er_count(rt, ER_C_BYTES_IN, len);
    return TUNNELGATE_RUNTIME_OK;
}

ER_ABI_EXPORT int32_t tunnelgate_runtime_packet_in(void *handle, const uint8_t *packet, size_t len) {
    if (handle == NULL) return TUNNELGATE_RUNTIME_INVALID_ARGUMENT;
    pthread_rwlock_rdlock(&registry_lock);
    er_runtime *rt = registry_find(handle);
    int32_t rc = rt == NULL ? TUNNELGATE_RUNTIME_INVALID_STATE : packet_in(rt, packet, len);
    pthread_rwlock_unlock(&registry_lock);
    return rc;
}

/* ---- packet_in_batch ---------------------------------------------------------------------------- */

/* The packets up to the first that packet_in would refuse are taken: sealed and sent right here when the
   sender is idle (and the batch is no larger than --direct-send), else copied into the queue under one lock with at most one wake-up of
   the sender; *accepted says how many were taken. */
static int32_t packet_in_batch(er_runtime *rt, const uint8_t *const *packets, const size_t *lengths, size_t count,
                               size_t *accepted) {
    if (rt->tun_fd >= 0 || atomic_load_explicit(&rt->state, memory_order_acquire) != ER_RUNNING)
        return TUNNELGATE_RUNTIME_INVALID_STATE;
    er_count(rt, ER_C_BATCH_CALLS, 1);
    size_t valid = 0;
    while (valid < count && packets[valid] != NULL && lengths[valid] != 0 && lengths[valid] <= rt->mtu) valid++;
    size_t direct = 0;
    size_t taken = er_take_batch(rt, packets, lengths, valid, &direct);
    uint64_t bytes = 0;
    for (size_t i = 0; i < taken; i++) bytes += lengths[i];
    *accepted = taken;
    er_count(rt, ER_C_PACKETS_IN, taken);
    er_count(rt, ER_C_BATCH_PACKETS, taken);
    er_count(rt, ER_C_BATCH_DIRECT, direct);
    er_count(rt, ER_C_BYTES_IN, bytes);
    if (taken < valid) {
        er_count(rt, ER_C_QUEUE_FULL, 1);
        return TUNNELGATE_RUNTIME_QUEUE_FULL;
    }
    if (valid < count) {
        if (packets[valid] != NULL && lengths[valid] > rt->mtu) er_count(rt, ER_C_DROPS_OVERSIZE, 1);
        return TUNNELGATE_RUNTIME_INVALID_ARGUMENT;
    }
    return TUNNELGATE_RUNTIME_OK;
}

ER_ABI_EXPORT int32_t tunnelgate_runtime_packet_in_batch(void *handle, const uint8_t *const *packets,
                                                     const size_t *lengths, size_t count, size_t *accepted) {
    if (accepted != NULL) *accepted = 0;
    if (handle == NULL || accepted == NULL || (count > 0 && (packets == NULL || lengths == NULL)))
        return TUNNELGATE_RUNTIME_INVALID_ARGUMENT;
    pthread_rwlock_rdlock(&registry_lock);
    er_runtime *rt = registry_find(handle);
    int32_t rc = rt == NULL ? TUNNELGATE_RUNTIME_INVALID_STATE : packet_in_batch(rt, packets, lengths, count, accepted);
    pthread_rwlock_unlock(&registry_lock);
    return rc;
}

/* ---- status ------------------------------------------------------------------------------------- */

/* Big enough for any status: the error and the note are at most 255 bytes each (x6 escaped), the rest is
   bounded. */
#define ER_STATUS_MAX 8192

static void format_status(er_runtime *rt, er_text *t) {
    int state = atomic_load_explicit(&rt->state, memory_order_acquire);
    const char *name = "stopped";
    switch ((er_state)state) {
    case ER_STARTING: name = "starting"; break;
    case ER_RUNNING: {
        int64_t silent = er_now_ms() - atomic_load_explicit(&rt->last_rx_ms, memory_order_relaxed);
        name = silent > (int64_t)rt->silence_ms ? "reconnecting" : "ready";
        break;
    }
    case ER_FAILED: name = "failed"; break;
    case ER_STOPPED: name = "stopped"; break;
    }
    er_text_printf(t, "{\"state\":\"%s\",\"interface\":%s", name,
                   state == ER_RUNNING ? "\"" ER_INTERFACE_NAME "\"" : "null");
    if (state == ER_FAILED) {
        er_text_puts(t, ",\"error\":");
        er_text_json_string(t, rt->error, strlen(rt->error));
    }
    if (rt->note[0] != '\0') {
        er_text_puts(t, ",\"note\":");
        er_text_json_string(t, rt->note, strlen(rt->note));
    }
    er_text_printf(t, ",\"packetPath\":\"%s\",\"mtu\":%u,\"local\":\"", rt->tun_fd >= 0 ? "fd" : "callback",
                   rt->mtu);
    er_text_sockaddr(t, (const struct sockaddr *)&rt->local);
    er_text_puts(t, "\",\"peer\":");
    pthread_mutex_lock(&rt->peer_lock);
    if (rt->has_peer) {
        er_text_puts(t, "\"");
        er_text_sockaddr(t, (const struct sockaddr *)&rt->peer);
        er_text_puts(t, "\"");
    } else {
        er_text_puts(t, "null");
    }
    pthread_mutex_unlock(&rt->peer_lock);
    for (int c = 0; c < ER_C_COUNT; c++)
        er_text_printf(t, ",\"%s\":%llu", er_counter_names[c],
                       (unsigned long long)atomic_load_explicit(&rt->counters[c], memory_order_relaxed));
    er_text_printf(t, ",\"dropsSocket\":%llu",
                   (unsigned long long)atomic_load_explicit(&rt->socket_drops, memory_order_relaxed));
    er_text_puts(t, "}");
}

/* The status of `handle` into buf; a handle that is not live (stopped, or never started) is "stopped". */
static void status_text(const void *handle, er_text *t) {
    pthread_rwlock_rdlock(&registry_lock);
    er_runtime *rt = registry_find(handle);
    if (rt != NULL) format_status(rt, t);
    else er_text_puts(t, "{\"state\":\"stopped\",\"interface\":null}");
    pthread_rwlock_unlock(&registry_lock);
}

ER_ABI_EXPORT int32_t tunnelgate_runtime_status(void *handle, char *json, size_t capacity, size_t *json_len) {
    if (handle == NULL || json_len == NULL || (json == NULL && capacity > 0))
        return TUNNELGATE_RUNTIME_INVALID_ARGUMENT;
    char buf[ER_STATUS_MAX];
    er_text t;
    er_text_init(&t, buf, sizeof(buf));
    status_text(handle, &t);
    if (!er_text_fits(&t)) return TUNNELGATE_RUNTIME_FAILED; /* cannot happen: ER_STATUS_MAX bounds it */
    if (capacity < t.len + 1) {
        *json_len = t.len + 1; /* the capacity needed: the JSON and its NUL */
        return TUNNELGATE_RUNTIME_BUFFER_TOO_SMALL;
    }
    memcpy(json, buf, t.len + 1);
    *json_len = t.len;
    return TUNNELGATE_RUNTIME_OK;
}

/* ---- app_message -------------------------------------------------------------------------------- */

static int32_t reply_with(const void *data1, size_t len1, const void *data2, size_t len2, uint8_t *reply,
                          size_t capacity, size_t *reply_len) {
    *reply_len = len1 + len2;
    if (capacity < len1 + len2) return TUNNELGATE_RUNTIME_BUFFER_TOO_SMALL;
    if (len1 > 0) memcpy(reply, data1, len1);
    if (len2 > 0) memcpy(reply + len1, data2, len2);
    return TUNNELGATE_RUNTIME_OK;
}

ER_ABI_EXPORT int32_t tunnelgate_runtime_app_message(void *handle, const uint8_t *bytes, size_t len, uint8_t *reply,
                                                 size_t reply_capacity, size_t *reply_len) {
    if (handle == NULL || reply_len == NULL || (bytes == NULL && len > 0) || (reply == NULL && reply_capacity > 0))
        return TUNNELGATE_RUNTIME_INVALID_ARGUMENT;
    pthread_rwlock_rdlock(&registry_lock);
    er_runtime *rt = registry_find(handle);
    int32_t rc;
    if (rt == NULL) {
        rc = TUNNELGATE_RUNTIME_INVALID_STATE;
    } else if (len == 4 && memcmp(bytes, "ping", 4) == 0) {
        rc = reply_with("pong", 4, NULL, 0, reply, reply_capacity, reply_len);
    } else if (len == 5 && memcmp(bytes, "stats", 5) == 0) {
        char buf[ER_STATUS_MAX];
        er_text t;
        er_text_init(&t, buf, sizeof(buf));
        format_status(rt, &t);
        rc = reply_with(buf, t.len, NULL, 0, reply, reply_capacity, reply_len);
    } else if (len == 14 && memcmp(bytes, "emit-malformed", 14) == 0 && rt->writer != NULL) {
        /* Test hook: hands the host four packets it must refuse (not IP, truncated IPv4, an IPv6
           length mismatch, over the MTU) and replies how many it accepted. */
        static uint8_t bad[2048];
        size_t accepted = 0;
        memset(bad, 0, sizeof(bad));
        bad[0] = 0x50;                                            /* IP version 5 */
        accepted += rt->writer(rt->context, bad, 40);
        bad[0] = 0x45; bad[2] = 0; bad[3] = 60;                   /* IPv4 claiming 60 bytes, 40 given */
        accepted += rt->writer(rt->context, bad, 40);
        memset(bad, 0, 8);
        bad[0] = 0x60; bad[5] = 100;                              /* IPv6 claiming 100 payload bytes, 20 given */
        accepted += rt->writer(rt->context, bad, 60);
        size_t big = (size_t)rt->mtu + 100;                       /* a well-formed IPv4 packet over the MTU */
        if (big > sizeof(bad)) big = sizeof(bad);
        memset(bad, 0, big);
        bad[0] = 0x45; bad[2] = (uint8_t)(big >> 8); bad[3] = (uint8_t)(big & 0xff);
        accepted += rt->writer(rt->context, bad, big);
        char text[32];
        int n = snprintf(text, sizeof(text), "accepted %zu of 4", accepted);
        rc = reply_with(text, (size_t)n, NULL, 0, reply, reply_capacity, reply_len);
    } else if (len > 5 && memcmp(bytes, "fail ", 5) == 0) {
        /* Test hook: the runtime fails as if its carrier broke for good, with the rest as its error. */
        char error[sizeof(rt->error)];
        size_t n = len - 5 < sizeof(error) - 1 ? len - 5 : sizeof(error) - 1;
        memcpy(error, bytes + 5, n);
        error[n] = '\0';
        er_runtime_fail(rt, error);
        rc = reply_with("failing", 7, NULL, 0, reply, reply_capacity, reply_len);
    } else {
        rc = reply_with("echo: ", 6, bytes, len, reply, reply_capacity, reply_len);
    }
    pthread_rwlock_unlock(&registry_lock);
    return rc;
}

/* ---- stop --------------------------------------------------------------------------------------- */

ER_ABI_EXPORT void tunnelgate_runtime_stop(void *handle) {
    if (handle == NULL) return;
    pthread_rwlock_wrlock(&registry_lock);
    er_runtime *rt = registry_find(handle);
    if (rt != NULL) {
        er_runtime **link = &registry;
        while (*link != rt) link = &(*link)->next;
        *link = rt->next;
    }
    pthread_rwlock_unlock(&registry_lock);
    if (rt == NULL) return; /* already stopped, or never a handle: nothing to do */
    atomic_store(&rt->state, ER_STOPPED);
    runtime_destroy(rt);
}

/* ---- MEHS's names (bind with "symbols"; see docs/runtime-abi.md) ------------------------------------ */

/* MEHS's contract has no batch call: under these names a host sends packets in one at a time. The codes
   are the header's, or the variant's (ER_ABI_VARIANT_MEHS, above). */

ER_EXPORT int32_t mehs_ios_runtime_start(const char *args_json, const char *secret,
                                         tunnelgate_runtime_writer writer, void *context, void **handle,
                                         char *error, size_t error_capacity, size_t *error_len) {
    return ER_ABI_CODE(
        tunnelgate_runtime_start(args_json, secret, writer, context, handle, error, error_capacity, error_len));
}

ER_EXPORT int32_t mehs_ios_runtime_packet_in(void *handle, const uint8_t *packet, size_t len) {
    return ER_ABI_CODE(tunnelgate_runtime_packet_in(handle, packet, len));
}

ER_EXPORT int32_t mehs_runtime_status(void *handle, char *json, size_t capacity, size_t *json_len) {
    return ER_ABI_CODE(tunnelgate_runtime_status(handle, json, capacity, json_len));
}

ER_EXPORT void mehs_runtime_stop(void *handle) { tunnelgate_runtime_stop(handle); }

#ifdef ER_ABI_VARIANT_MEHS
/* Not a MEHS name (MEHS has no app_message): the variant's own, so a host binds it with "appMessage". */
ER_EXPORT int32_t mehs_example_app_message(void *handle, const uint8_t *bytes, size_t len, uint8_t *reply,
                                           size_t reply_capacity, size_t *reply_len) {
    return ER_ABI_CODE(tunnelgate_runtime_app_message(handle, bytes, len, reply, reply_capacity, reply_len));
}
#endif

/* The ABI's function types, checked against the definitions above. */
static const tunnelgate_runtime_start_fn check_start __attribute__((unused)) = tunnelgate_runtime_start;
static const tunnelgate_runtime_packet_in_fn check_packet_in __attribute__((unused)) = tunnelgate_runtime_packet_in;
static const tunnelgate_runtime_packet_in_batch_fn check_packet_in_batch __attribute__((unused)) =
    tunnelgate_runtime_packet_in_batch;
static const tunnelgate_runtime_status_fn check_status __attribute__((unused)) = tunnelgate_runtime_status;
static const tunnelgate_runtime_stop_fn check_stop __attribute__((unused)) = tunnelgate_runtime_stop;
static const tunnelgate_runtime_app_message_fn check_app_message __attribute__((unused)) =
    tunnelgate_runtime_app_message;
static const tunnelgate_runtime_start_fn check_mehs_start __attribute__((unused)) = mehs_ios_runtime_start;
static const tunnelgate_runtime_packet_in_fn check_mehs_packet_in __attribute__((unused)) =
    mehs_ios_runtime_packet_in;
static const tunnelgate_runtime_status_fn check_mehs_status __attribute__((unused)) = mehs_runtime_status;
static const tunnelgate_runtime_stop_fn check_mehs_stop __attribute__((unused)) = mehs_runtime_stop;
#ifdef ER_ABI_VARIANT_MEHS
static const tunnelgate_runtime_app_message_fn check_mehs_app_message __attribute__((unused)) =
    mehs_example_app_message;
#endif
