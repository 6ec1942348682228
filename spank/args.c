/* plugstack.conf arguments: key=value words after the plugin path. */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/master.h"
#include "common/optval.h"
#include "spank/plugin.h"

#ifndef DLJOB_RUNTIME_DEFAULT
#define DLJOB_RUNTIME_DEFAULT "/usr/local/bin/dljob"
#endif

static int set_str(char *dst, size_t len, const char *key, const char *val, char *err, size_t errlen)
{
	if (strlen(val) >= len) {
		dl_errf(err, errlen, "plugstack.conf: %s=: value too long", key);
		return -1;
	}
	memcpy(dst, val, strlen(val) + 1);
	return 0;
}

static int parse_range(const char *val, int *lo, int *hi)
{
	char *end;
	long a, b;

	errno = 0;
	a = strtol(val, &end, 10);
	if (end == val || *end != '-' || errno)
		return -1;
	val = end + 1;
	b = strtol(val, &end, 10);
	if (end == val || *end || errno || a < 1 || b > 65535 || a > b)
		return -1;
	*lo = (int)a;
	*hi = (int)b;
	return 0;
}

/* data_allow=DIR[:DIR...]: "" would mean "no restriction" to the check,
 * so an empty value (or an empty or relative entry, resolved against
 * slurmstepd's own directory) is an admin's mistake, refused by name. */
static int check_allow(const char *val, char *err, size_t errlen)
{
	char q[256];

	if (!val[0]) {
		dl_errf(err, errlen, "plugstack.conf: data_allow= is empty: name the allowed directories "
			 "(DIR[:DIR...]), or leave data_allow out to allow any");
		return -1;
	}
	for (const char *p = val; *p;) {
		size_t n = strcspn(p, ":");

		if (n == 0 || p[0] != '/') {
			dl_errf(err, errlen, "plugstack.conf: data_allow=%s: every entry must be an absolute "
				 "directory (an empty or relative one is not)", dl_optval_escape(val, q, sizeof(q)));
			return -1;
		}
		p += n;
		if (*p == ':' && !*++p) {
			dl_errf(err, errlen, "plugstack.conf: data_allow=%s: every entry must be an absolute "
				 "directory (an empty or relative one is not)", dl_optval_escape(val, q, sizeof(q)));
			return -1;
		}
	}
	return 0;
}

int dl_args_parse(struct dl_args *a, int ac, char **av, char *err, size_t errlen)
{
	memset(a, 0, sizeof(*a));
	snprintf(a->runtime, sizeof(a->runtime), "%s", DLJOB_RUNTIME_DEFAULT);
	a->nic = 1;
	a->port_lo = DL_MASTER_PORT_LO;
	a->port_hi = DL_MASTER_PORT_HI;

	for (int i = 0; i < ac; i++) {
		char key[64], q[256];
		const char *eq = strchr(av[i], '='), *val;
		size_t klen;

		if (!eq || eq == av[i]) {
			dl_errf(err, errlen, "plugstack.conf: argument '%s' is not key=value",
				 dl_optval_escape(av[i], q, sizeof(q)));
			return -1;
		}
		klen = (size_t)(eq - av[i]);
		if (klen >= sizeof(key)) {
			dl_errf(err, errlen, "plugstack.conf: unknown argument '%.40s...'",
				 dl_optval_escape(av[i], q, sizeof(q)));
			return -1;
		}
		memcpy(key, av[i], klen);
		key[klen] = '\0';
		val = eq + 1;

		if (!strcmp(key, "runtime")) {
			if (val[0] != '/') {
				dl_errf(err, errlen, "plugstack.conf: runtime=%s is not an absolute path",
					 dl_optval_escape(val, q, sizeof(q)));
				return -1;
			}
			if (set_str(a->runtime, sizeof(a->runtime), key, val, err, errlen) < 0)
				return -1;
		} else if (!strcmp(key, "data_allow")) {
			if (check_allow(val, err, errlen) < 0 ||
			    set_str(a->data_allow, sizeof(a->data_allow), key, val, err, errlen) < 0)
				return -1;
		} else if (!strcmp(key, "default_data")) {
			if (set_str(a->default_data, sizeof(a->default_data), key, val, err, errlen) < 0)
				return -1;
		} else if (!strcmp(key, "topology")) {
			if (set_str(a->topology, sizeof(a->topology), key, val, err, errlen) < 0)
				return -1;
		} else if (!strcmp(key, "nic")) {
			if (!strcmp(val, "closest")) {
				a->nic = 1;
			} else if (!strcmp(val, "none")) {
				a->nic = 0;
			} else {
				dl_errf(err, errlen, "plugstack.conf: nic=%s: expected closest or none",
					 dl_optval_escape(val, q, sizeof(q)));
				return -1;
			}
		} else if (!strcmp(key, "master_port_range")) {
			if (parse_range(val, &a->port_lo, &a->port_hi) < 0) {
				dl_errf(err, errlen, "plugstack.conf: master_port_range=%s: expected LO-HI within 1-65535",
					 dl_optval_escape(val, q, sizeof(q)));
				return -1;
			}
		} else {
			dl_errf(err, errlen, "plugstack.conf: unknown argument '%s' (known: runtime, data_allow, "
				 "default_data, topology, nic, master_port_range)", dl_optval_escape(key, q, sizeof(q)));
			return -1;
		}
	}
	return 0;
}
