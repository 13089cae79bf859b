/*
 * mehs.h — the MEHS iOS runtime's C names, as the MEHS embedding guide uses
 * them (shared/seeds/000), declared for Linux. On Linux the symbols come from
 * a stand-in: the example runtime (Sources/CExampleRuntime) exports
 * mehs_ios_runtime_start, mehs_ios_runtime_packet_in, mehs_runtime_status and
 * mehs_runtime_stop with the MEHS contract's shape. A real MEHS build for
 * Linux provides the same names.
 */
#ifndef MEHS_CLIENT_H
#define MEHS_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#define MEHS_OK                0
#define MEHS_QUEUE_FULL        1
#define MEHS_INVALID_STATE     2
#define MEHS_INVALID_ARGUMENT  3
#define MEHS_BUFFER_TOO_SMALL  4
#define MEHS_FAILED            5

typedef struct MehsRuntime MehsRuntime;

/* Called on a runtime thread with one IP packet for the host; 1 when accepted. */
typedef uint8_t (*MehsPacketWriteCallback)(void *context, const uint8_t *packet, size_t packet_len);

int32_t mehs_ios_runtime_start(const char *args_json, const char *secret, MehsPacketWriteCallback callback,
                               void *context, MehsRuntime **runtime, char *error, size_t error_capacity,
                               size_t *error_len);
int32_t mehs_ios_runtime_packet_in(MehsRuntime *runtime, const uint8_t *packet, size_t packet_len);
int32_t mehs_runtime_status(MehsRuntime *runtime, char *json, size_t capacity, size_t *json_len);
void mehs_runtime_stop(MehsRuntime *runtime);

#endif
