/* GPU and CPU lists ("0,1,3", "0-3": Slurm's syntax, from the untrusted
 * job environment) and Slurm's core numbers as CPUs of the topology. */
#include "config.h"

#include <errno.h>
#include <stdlib.h>

#include "common/err.h"
#include "mapping/internal.h"

/* The next range of a list "0,1,3" or "0-3" (digits only: strtol alone
 * would take blanks and signs), moving *s past it and its comma.  Returns
 * 1 with [*lo, *hi], 0 at the end, -1 on a malformed range or an index
 * above DL_MAP_MAX_INDEX. */
static int next_range(const char **s, long *lo, long *hi)
{
	const char *c = *s;
	char *end;

	if (!*c)
		return 0;
	if (*c < '0' || *c > '9')
		return -1;
	errno = 0;
	*lo = strtol(c, &end, 10);
	if (errno || *lo > DL_MAP_MAX_INDEX)
		return -1;
	*hi = *lo;
	c = end;
	if (*c == '-') {
		c++;
		if (*c < '0' || *c > '9')
			return -1;
		*hi = strtol(c, &end, 10);
		if (errno || *hi < *lo || *hi > DL_MAP_MAX_INDEX)
			return -1;
		c = end;
	}
	if (*c == ',')
		c++;
	else if (*c)
		return -1;
	*s = c;
	return 1;
}

int dl_map_parse_index_list(const char *s, int *idx, int max)
{
	long lo, hi;
	int n = 0, r;

	if (!s)
		return -1;
	while ((r = next_range(&s, &lo, &hi)) > 0) {
		if (hi - lo >= (long)(max - n))
			return -1;
		for (long i = lo; i <= hi; i++)
			idx[n++] = (int)i;
	}
	return r < 0 ? -1 : n;
}

int dl_map_parse_cpu_list(const char *s, hwloc_bitmap_t out)
{
	long lo, hi;
	int r;

	hwloc_bitmap_zero(out);
	if (!s || !*s)
		return -1;
	while ((r = next_range(&s, &lo, &hi)) > 0)
		if (hwloc_bitmap_set_range(out, (unsigned)lo, (int)hi) < 0)
			return -1;
	return r < 0 ? -1 : hwloc_bitmap_weight(out);
}

int dl_map_slurm_cores(const struct dl_map *m, const char *cores, hwloc_bitmap_t out, char *err, size_t errlen)
{
	hwloc_obj_t root = hwloc_get_root_obj(m->topo);
	hwloc_bitmap_t abs = hwloc_bitmap_alloc();
	int n = hwloc_get_nbobjs_by_type(m->topo, HWLOC_OBJ_CORE), rv = -1, c;

	hwloc_bitmap_zero(out);
	if (!abs) {
		dl_errf(err, errlen, "out of memory");
		return -1;
	}
	if (dl_map_parse_cpu_list(cores, abs) <= 0) {
		dl_errf(err, errlen, "Slurm's core list is not a list of core numbers");
		goto out;
	}
	if (!m->has_cores) {
		dl_errf(err, errlen, "the topology has no Core objects");
		goto out;
	}
	/* Slurm counts the cores of the whole machine (its hwloc topology
	 * includes the CPUs a cgroup disallows); hwloc dropped some here. */
	if (root->complete_cpuset && !hwloc_bitmap_isequal(root->cpuset, root->complete_cpuset)) {
		dl_errf(err, errlen, "the topology lacks some of the machine's CPUs (disallowed or offline)");
		goto out;
	}
	if ((c = hwloc_bitmap_last(abs)) >= n) {
		dl_errf(err, errlen, "Slurm's core %d is not among the topology's %d cores", c, n);
		goto out;
	}
	hwloc_bitmap_foreach_begin(c, abs)
		hwloc_obj_t o = hwloc_get_obj_by_type(m->topo, HWLOC_OBJ_CORE, (unsigned)c);

		if (!o || !o->cpuset || hwloc_bitmap_or(out, out, o->cpuset) < 0) {
			dl_errf(err, errlen, o ? "out of memory" : "core %d is missing from the topology", c);
			goto out;
		}
	hwloc_bitmap_foreach_end();
	rv = 0;
out:
	hwloc_bitmap_free(abs);
	return rv;
}
