/* Option values: the one table of limits and the whole-string parsers that
 * the SPANK plugin (srun/sbatch/salloc and again in slurmstepd) and the
 * runtime's command line share, so that srun refuses exactly what the node
 * would refuse.  Also the two rules for untrusted text: a value with a
 * control character is refused where it enters, and a value is escaped
 * before it is written to any log.  Shared by spank/ and runtime/; no Slurm
 * or engine dependency (the fuzz targets drive it directly). */
#ifndef DLJOB_COMMON_OPTVAL_H
#define DLJOB_COMMON_OPTVAL_H

#include <stddef.h>
#include <stdint.h>

/* Limits, inclusive unless marked open.  --dl-epochs/--epochs,
 * --dl-batch/--batch, --dl-lr/--lr (0 excluded), --timeout. */
#define DL_EPOCHS_MIN 1
#define DL_EPOCHS_MAX 100000
#define DL_BATCH_MIN 1
#define DL_BATCH_MAX 65536
#define DL_LR_MIN 0.0      /* open: 0 itself is refused */
#define DL_LR_MAX 1000.0
#define DL_TIMEOUT_MIN 1.0 /* seconds */
#define DL_TIMEOUT_MAX 1e6

/* The longest value the plugin keeps for a path option (--dl-data,
 * --dl-out), in bytes. */
#define DL_PATH_MAX 4096

/* Errors are reported with dl_errf (common/err.h). */
#include "common/err.h"

/* Whole-string decimal integer in [min, max] (no blanks, no "0x"; a sign
 * only when min < 0).  0, or -1 with one line naming opt in err. */
int dl_optval_long(const char *opt, const char *s, long min, long max, long *out,
		   char *err, size_t errlen);
int dl_optval_int(const char *opt, const char *s, int min, int max, int *out,
		  char *err, size_t errlen);
/* Whole-string finite decimal number in [min, max]; min_open/max_open
 * exclude the bound itself.  No blanks, no hex, no inf/nan. */
int dl_optval_double(const char *opt, const char *s, double min, int min_open, double max,
		     int max_open, double *out, char *err, size_t errlen);
/* Whole-string non-negative decimal integer that fits 64 bits (" -1" and
 * "-1" are refused, never wrapped). */
int dl_optval_u64(const char *opt, const char *s, uint64_t *out, char *err, size_t errlen);

/* path made absolute from base (an absolute directory): base/path with
 * the "." and empty components of path dropped ("..", which the kernel
 * resolves through symbolic links, is kept); an absolute path is copied.
 * 0, or -1 when the result does not fit outlen. */
int dl_optval_path_abs(const char *base, const char *path, char *out, size_t outlen);

/* 1 if s holds a byte below 0x20 or 0x7f (newline, escape, ...). */
int dl_optval_has_ctl(const char *s);

/* Copy s into out (outlen >= 4) with every byte outside printable ASCII
 * written as \n, \t, \\ or \xNN, cut with "..." if it does not fit: what
 * may be written to a log.  Returns out. */
char *dl_optval_escape(const char *s, char *out, size_t outlen);
/* The same for a whole message whose values are already quoted with
 * dl_optval_escape: a backslash is kept as it is, everything else that is
 * not printable ASCII (newline, escape, bytes >= 0x7f) is escaped. */
char *dl_optval_escape_msg(const char *s, char *out, size_t outlen);
/* The option getopt_long refused as unknown, for its message: "-c" for a
 * short one (its optopt; argv[optind - 1] is then its group, "-hc", or,
 * while the group is still being read, the word before it: the program's
 * name for "dljob -hc"), else argv[optind - 1] (a long one: optopt 0).
 * Returns buf (len >= 3) or that word. */
const char *dl_optval_unknown(char *const *argv, int optind, int optopt, char *buf, size_t len);

#endif
