/* The runtime ABI is a header; this file pins its constants. */
#include "tunnelgate_runtime.h"

_Static_assert(TUNNELGATE_RUNTIME_OK == 0 && TUNNELGATE_RUNTIME_QUEUE_FULL == 1 &&
               TUNNELGATE_RUNTIME_INVALID_STATE == 2 && TUNNELGATE_RUNTIME_INVALID_ARGUMENT == 3 &&
               TUNNELGATE_RUNTIME_BUFFER_TOO_SMALL == 4 && TUNNELGATE_RUNTIME_FAILED == 5,
               "result codes are part of the ABI");
