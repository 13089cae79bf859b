/*
 * tunnelgate_runtime.h — the C ABI between Tunnelgate and a packet runtime.
 *
 * A runtime is a shared library that moves IP packets between the tunnel and
 * its carrier (its own sockets, its own protocol). Tunnelgate loads it with
 * dlopen, applies the tunnel's network settings, and hosts it:
 *
 *   start      once, before any packet; returns a handle
 *   packet_in  Tunnelgate → runtime: a packet the host sent into the tunnel
 *   packet_in_batch  (optional) the same for many packets in one call
 *   writer     runtime → Tunnelgate: a packet to deliver to the host
 *   status     polled: JSON with the runtime's state
 *   stop       exactly once; after it returns nothing is called again
 *
 * The shape is the MEHS iOS runtime contract's; a runtime built with other
 * symbol names binds without a wrapper through the configuration's
 * "symbols", and other result-code values through "resultCodes".
 * docs/runtime-abi.md is the full contract.
 */
#ifndef TUNNELGATE_RUNTIME_H
#define TUNNELGATE_RUNTIME_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Result codes. */
#define TUNNELGATE_RUNTIME_OK                0
#define TUNNELGATE_RUNTIME_QUEUE_FULL        1  /* packet_in: the input queue is full; retry the packet later */
#define TUNNELGATE_RUNTIME_INVALID_STATE     2  /* before the runtime is ready, or after stop */
#define TUNNELGATE_RUNTIME_INVALID_ARGUMENT  3
#define TUNNELGATE_RUNTIME_BUFFER_TOO_SMALL  4  /* status/app_message: *len holds the size needed */
#define TUNNELGATE_RUNTIME_FAILED            5

/*
 * Called by the runtime, on a runtime thread, with one complete IP packet
 * for the host. Returns 1 only when the packet was accepted. Never blocks
 * indefinitely; never unwinds. `context` is start's `context`.
 */
typedef uint8_t (*tunnelgate_runtime_writer)(void *context, const uint8_t *packet, size_t len);

/*
 * Starts the runtime. `args_json` is a NUL-terminated JSON array of strings
 * (the configuration's "arguments", then Tunnelgate's own: "--tun-mtu", N,
 * and in the fd packet path "--tun-fd", N). `secret` is NUL-terminated and
 * never part of args_json. On success *handle is set and OK returned; the
 * runtime may still be starting (see status). On failure a message of at
 * most error_capacity bytes is written to `error` and its length to *error_len.
 */
typedef int32_t (*tunnelgate_runtime_start_fn)(const char *args_json, const char *secret,
                                               tunnelgate_runtime_writer writer, void *context,
                                               void **handle, char *error, size_t error_capacity,
                                               size_t *error_len);

/* Copies the packet into the runtime's bounded input queue. */
typedef int32_t (*tunnelgate_runtime_packet_in_fn)(void *handle, const uint8_t *packet, size_t len);

/*
 * Optional: packets[0 .. count) (lengths[i] bytes each) in one call, in order. The result is that of
 * calling packet_in for packets[0], packets[1], ... and stopping at the first result that is not OK:
 * *accepted is set to the number of packets taken (a prefix; each was copied or already sent: the
 * caller may reuse every buffer as soon as the call returns) and the result is OK when that is all
 * `count`, otherwise the code for packets[*accepted]: QUEUE_FULL (keep it and the rest, retry later),
 * INVALID_STATE (not ready, stopped, or the fd path; nothing taken), INVALID_ARGUMENT (that packet is
 * NULL, empty or over the MTU: drop it and go on with the next). A NULL handle or `accepted`, or NULL
 * arrays with count > 0, are INVALID_ARGUMENT with nothing taken. A host uses packet_in one packet at
 * a time when the library has no such symbol.
 */
typedef int32_t (*tunnelgate_runtime_packet_in_batch_fn)(void *handle, const uint8_t *const *packets,
                                                         const size_t *lengths, size_t count, size_t *accepted);

/*
 * Writes the runtime's status as JSON: at least
 *   {"state": "starting"|"ready"|"reconnecting"|"failed"|"stopped",
 *    "interface": null | "<name>",       (non-null once packets may be sent in)
 *    "error": "<message>"}               (when failed)
 */
typedef int32_t (*tunnelgate_runtime_status_fn)(void *handle, char *json, size_t capacity, size_t *json_len);

/* Stops the runtime; called exactly once. writer and context stay valid until it returns. */
typedef void (*tunnelgate_runtime_stop_fn)(void *handle);

/* Optional: a message from the app (tunnelgate message NAME DATA); the reply goes to `reply`. */
typedef int32_t (*tunnelgate_runtime_app_message_fn)(void *handle, const uint8_t *bytes, size_t len,
                                                     uint8_t *reply, size_t reply_capacity, size_t *reply_len);

/* The default symbol names. */
int32_t tunnelgate_runtime_start(const char *args_json, const char *secret, tunnelgate_runtime_writer writer,
                                 void *context, void **handle, char *error, size_t error_capacity,
                                 size_t *error_len);
int32_t tunnelgate_runtime_packet_in(void *handle, const uint8_t *packet, size_t len);
int32_t tunnelgate_runtime_packet_in_batch(void *handle, const uint8_t *const *packets, const size_t *lengths,
                                           size_t count, size_t *accepted);
int32_t tunnelgate_runtime_status(void *handle, char *json, size_t capacity, size_t *json_len);
void tunnelgate_runtime_stop(void *handle);
int32_t tunnelgate_runtime_app_message(void *handle, const uint8_t *bytes, size_t len, uint8_t *reply,
                                       size_t reply_capacity, size_t *reply_len);

#ifdef __cplusplus
}
#endif

#endif /* TUNNELGATE_RUNTIME_H */
