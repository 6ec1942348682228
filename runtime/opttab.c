/* Option tables (runtime/opttab.h). */
#include "config.h"
#include <limits.h>
#include <string.h>

#include "common/optval.h"
#include "runtime/opttab.h"

const struct dl_opt *dl_opt_find(const struct dl_opt_table *t, int code)
{
	for (size_t i = 0; i < t->n; i++)
		if (t->rows[i].name && t->rows[i].code == code)
			return &t->rows[i];
	return NULL;
}

const struct dl_opt *dl_opt_named(const struct dl_opt_table *t, const char *name)
{
	for (size_t i = 0; name && i < t->n; i++)
		if (t->rows[i].name && !strcmp(t->rows[i].name, name))
			return &t->rows[i];
	return NULL;
}

int dl_opt_number(const struct dl_opt *o, const char *arg, void *base, char *err, size_t errlen)
{
	void *dst = (char *)base + o->field;
	char q[96];

	switch (o->kind) {
	case DL_OPTK_INT: return dl_optval_int(o->name, arg, (int)o->min, (int)o->max, dst, err, errlen);
	case DL_OPTK_LONG: return dl_optval_long(o->name, arg, (long)o->min, o->max >= (double)LONG_MAX ? LONG_MAX :
						 (long)o->max, dst, err, errlen);
	case DL_OPTK_DBL: return dl_optval_double(o->name, arg, o->min, 0, o->max, 0, dst, err, errlen);
	case DL_OPTK_DBL_MIN_OPEN: return dl_optval_double(o->name, arg, o->min, 1, o->max, 0, dst, err, errlen);
	case DL_OPTK_DBL_MAX_OPEN: return dl_optval_double(o->name, arg, o->min, 0, o->max, 1, dst, err, errlen);
	case DL_OPTK_U64: {
		uint64_t v;

		if (dl_optval_u64(o->name, arg, &v, err, errlen) < 0)
			return -1;
		if (o->max > 0 && (double)v > o->max)
			return dl_errf(err, errlen, "--%s: %s is out of range [0, %.0f]", o->name,
				       dl_optval_escape(arg, q, sizeof(q)), o->max);
		memcpy(dst, &v, sizeof(v));
		return 0;
	}
	case DL_OPTK_NONE: break;
	}
	return dl_errf(err, errlen, "%s:%d: --%s is not a number option", __FILE__, __LINE__, o->name);
}

int dl_opt_refused(const struct dl_opt_table *t, int opt, char *const *argv, char *err, size_t errlen)
{
	char q[256];

	/* getopt_long has moved past the offending word */
	if (opt == ':')
		return dl_errf(err, errlen, "option '%s' needs a value", dl_optval_escape(argv[optind - 1], q, sizeof(q)));
	/* optopt: the option's code when a value was given to a flag, 0 when
	 * the option does not exist (or the character of a short one) */
	if (dl_opt_find(t, optopt))
		return dl_errf(err, errlen, "option '%s' takes no value", dl_optval_escape(argv[optind - 1], q, sizeof(q)));
	return dl_errf(err, errlen, "unknown option '%s' (see %s --help)",
		       dl_optval_escape(dl_optval_unknown(argv, optind, optopt, (char[4]){""}, 4), q, sizeof(q)),
		       t->cmd);
}

int dl_opt_next(const struct dl_opt_table *t, const char *optstring, int argc, char **argv, void *base,
		char *err, size_t errlen)
{
	int opt = getopt_long(argc, argv, optstring, t->long_opts, NULL);
	const struct dl_opt *row;

	if (opt == ':' || opt == '?') {
		dl_opt_refused(t, opt, argv, err, errlen);
		return DL_OPT_ERROR;
	}
	row = dl_opt_find(t, opt);
	if (row && row->kind != DL_OPTK_NONE && dl_opt_number(row, optarg, base, err, errlen) < 0)
		return DL_OPT_ERROR;
	return opt;
}

/* A row's help, its "%R" as the row's limits. */
static void put_help(FILE *f, const struct dl_opt *o)
{
	for (const char *h = o->help; *h; h++) {
		if (h[0] == '%' && h[1] == 'R') {
			if (o->kind == DL_OPTK_INT || o->kind == DL_OPTK_LONG || o->kind == DL_OPTK_U64)
				fprintf(f, "%.0f..%.0f", o->min, o->max);
			else
				fprintf(f, "%g..%g", o->min, o->max);
			h++;
			continue;
		}
		fputc(*h, f);
		if (*h == '\n')
			fprintf(f, "%25s", "");
	}
}

void dl_opt_usage(FILE *f, const struct dl_opt_table *t)
{
	for (size_t i = 0; i < t->n; i++) {
		const struct dl_opt *o = &t->rows[i];
		char left[64];

		if (o->heading) {
			/* the first group has a blank line before it */
			fprintf(f, "%s%s\n", i == 0 ? "\n" : "", o->heading);
			continue;
		}
		snprintf(left, sizeof(left), "--%s%s%s", o->name,
			 o->value && o->has_arg != optional_argument ? " " : "", o->value ? o->value : "");
		fprintf(f, "  %-22s ", left);
		put_help(f, o);
		fputc('\n', f);
	}
}

void dl_opt_list(FILE *f, const char *prefix, const struct dl_opt_table *t)
{
	for (size_t i = 0; i < t->n; i++)
		if (t->rows[i].name)
			fprintf(f, "%s--%s\n", prefix, t->rows[i].name);
}
