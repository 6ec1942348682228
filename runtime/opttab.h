/* Option tables: the one way dljob's command lines (training, runtime/cli.c,
 * and every subcommand) declare their options.  A command lists its options
 * once, as an X-macro, and its usage text, getopt_long's table, the limits
 * of its numeric options and its rows in `dljob --list-options` all come
 * from that list:
 *   #define EX_OPTIONS(X, H) \
 *	H("Heading:") \
 *	X(ID, name, has_arg, value, kind, min, max, field, help) ...
 *   #define DL_OPT_STRUCT struct ex_opts
 *   DL_OPT_DEFINE(EX_OPTIONS, ex)
 *   const struct dl_opt_table ex_table = DL_OPT_TABLE(ex, "dljob ex");
 * ID: OPT_<ID>, the getopt code (an enum of the command's file).  value:
 * the placeholder --help shows (NULL: none; "[=PATH]" for an optional one).
 * kind: NONE (the command's switch parses it), INT, LONG, DBL,
 * DBL_MIN_OPEN, DBL_MAX_OPEN or U64, parsed by common/optval into field (a
 * member of DL_OPT_STRUCT of that type; a static assertion checks it)
 * within [min, max] (an _OPEN bound excluded; U64: max 0 is no limit).
 * help: "\n" starts another line, indented under the first; "%R" stands
 * for the row's limits, "MIN..MAX".  H(heading) starts a group. */
#ifndef DLJOB_RUNTIME_OPTTAB_H
#define DLJOB_RUNTIME_OPTTAB_H

#include <getopt.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

enum dl_opt_kind {
	DL_OPTK_NONE, DL_OPTK_INT, DL_OPTK_LONG, DL_OPTK_DBL, DL_OPTK_DBL_MIN_OPEN, DL_OPTK_DBL_MAX_OPEN,
	DL_OPTK_U64
};

/* One row: an option, or (name NULL) a heading. */
struct dl_opt {
	const char *name, *dashed, *value, *help, *heading;
	int has_arg, code;
	enum dl_opt_kind kind;
	double min, max;
	size_t field;
};

struct dl_opt_table {
	const char *cmd;              /* "dljob", "dljob eval": errors say "see CMD --help" */
	const struct dl_opt *rows;
	size_t n;
	const struct option *long_opts; /* getopt_long's, from the same rows */
};

/* The pieces DL_OPT_DEFINE builds a command's table from. */
#define DL_OPT_X_NOTHING(heading)
#define DL_OPT_X_ENUM(id, name, has_arg, value, kind, min, max, field, help) OPT_##id,
#define DL_OPT_X_ROW(id, name, has_arg, value, kind, min, max, field, help) \
	{ name, "--" name, value, help, NULL, has_arg, OPT_##id, DL_OPTK_##kind, min, max, \
	  offsetof(DL_OPT_STRUCT, field) },
#define DL_OPT_X_HEAD(heading) { NULL, NULL, NULL, NULL, heading, 0, 0, DL_OPTK_NONE, 0, 0, 0 },
#define DL_OPT_X_LONG(id, name, has_arg, value, kind, min, max, field, help) { name, has_arg, NULL, OPT_##id },
/* The field each numeric kind writes has that kind's type. */
#define DL_OPT_X_CHECK(id, name, has_arg, value, kind, min, max, field, help) \
	_Static_assert(DL_OPTK_##kind == DL_OPTK_NONE || \
		       sizeof(((DL_OPT_STRUCT *)0)->field) == \
		       (DL_OPTK_##kind == DL_OPTK_INT ? sizeof(int) : DL_OPTK_##kind == DL_OPTK_LONG ? sizeof(long) : \
			DL_OPTK_##kind == DL_OPTK_U64 ? sizeof(uint64_t) : sizeof(double)), "--" name ": field type");

/* The getopt codes OPT_<ID> (above every character), prefix_rows and
 * prefix_long of the option list LIST, whose fields are members of
 * DL_OPT_STRUCT. */
#define DL_OPT_DEFINE(LIST, prefix) \
	enum { OPT_FIRST_ = 255, LIST(DL_OPT_X_ENUM, DL_OPT_X_NOTHING) OPT_END_ }; \
	static const struct dl_opt prefix##_rows[] = { LIST(DL_OPT_X_ROW, DL_OPT_X_HEAD) }; \
	static const struct option prefix##_long[] = { LIST(DL_OPT_X_LONG, DL_OPT_X_NOTHING) { NULL, 0, NULL, 0 } }; \
	LIST(DL_OPT_X_CHECK, DL_OPT_X_NOTHING)
/* The initializer of the table DL_OPT_DEFINE(LIST, prefix) made. */
#define DL_OPT_TABLE(prefix, cmd) \
	{ cmd, prefix##_rows, sizeof(prefix##_rows) / sizeof(prefix##_rows[0]), prefix##_long }

/* The row of getopt code code, or of the option called name (without
 * "--"), or NULL. */
const struct dl_opt *dl_opt_find(const struct dl_opt_table *t, int code);
const struct dl_opt *dl_opt_named(const struct dl_opt_table *t, const char *name);

/* A numeric row's value arg into its field of base (a DL_OPT_STRUCT),
 * within the row's limits.  0, or -1 with one line naming the option. */
int dl_opt_number(const struct dl_opt *o, const char *arg, void *base, char *err, size_t errlen);

/* The one line for what getopt_long refused: opt ':' (a value missing) or
 * '?' (an unknown option, or a value given to one that takes none),
 * read from argv, optind and optopt as getopt_long left them.  Returns -1. */
int dl_opt_refused(const struct dl_opt_table *t, int opt, char *const *argv, char *err, size_t errlen);

/* getopt_long over t's options (optstring: ":" and any short ones); a
 * numeric row's value is parsed into its field of base.  Returns the
 * option's code (the caller's switch handles what a row of kind NONE
 * means; a numeric one needs no case), -1 at the end of the options, or
 * DL_OPT_ERROR with one line in err.  The caller sets optind = 1 first. */
#define DL_OPT_ERROR (-2)
int dl_opt_next(const struct dl_opt_table *t, const char *optstring, int argc, char **argv, void *base,
		char *err, size_t errlen);

/* The option lines of --help: "  --name VALUE   help", the help's further
 * lines indented under its first, each heading on a line of its own (a
 * blank line before the first row when that is a heading). */
void dl_opt_usage(FILE *f, const struct dl_opt_table *t);

/* dljob --list-options: "PREFIX--name" for each option, one a line. */
void dl_opt_list(FILE *f, const char *prefix, const struct dl_opt_table *t);

#endif
