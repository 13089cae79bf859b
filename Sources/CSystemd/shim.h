/* sd-bus, libsystemd's D-Bus client (Debian: libsystemd-dev). Only the
 * non-variadic calls are usable from Swift: messages are built with
 * sd_bus_message_append_basic / open_container / append_array and read with
 * peek_type / read_basic / enter_container. */
#include <systemd/sd-bus.h>
