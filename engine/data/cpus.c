/* dl_cpu_count: the default thread counts of the loader, the ImageFolder
 * scan and dljob pack.  Its own file, so that the formats (imagefolder.c,
 * pack.c) do not call back into dataset.c, which dispatches to them. */
#include "config.h"
#include <sched.h>
#include "engine/data/internal.h"

int dl_cpu_count(void)
{
	cpu_set_t set;
	CPU_ZERO(&set);
	if (sched_getaffinity(0, sizeof set, &set) != 0)
		return 1;
	int n = CPU_COUNT(&set);
	return n > 0 ? n : 1;
}
