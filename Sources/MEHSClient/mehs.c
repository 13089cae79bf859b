/* The MEHS names are implemented by the runtime library this target links (see mehs.h). */
#include "mehs.h"
