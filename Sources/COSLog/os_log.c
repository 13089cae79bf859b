// A Clang target needs a source file; the module's content is its module map (include/).
#include "os_log.h"

int tunnelgate_os_log_version(void) { return TUNNELGATE_OS_LOG; }
