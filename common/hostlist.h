/* Slurm host lists (SLURM_STEP_NODELIST, SLURM_JOB_NODELIST: "n[01-04,7],
 * gpu1"), untrusted input: one checking parser and an iterator over the
 * hosts, shared by spank/ (MASTER_ADDR) and runtime/ (MASTER_ADDR, the
 * other node of the step).
 *
 * What is accepted (the forms Slurm writes):
 *   list    = element { "," element }
 *   element = one or more of: text, "[" item { "," item } "]"
 *   item    = number [ "-" number ]          (the first <= the second)
 * text is printable ASCII other than blank, ',', '[' and ']'; a number has
 * 1 to DL_HOSTLIST_DIGITS digits (Slurm ranges a name's numeric suffix of
 * any length: "node[20231124001-20231124002]"), and the digit count of an item's first
 * number (its leading zeros) is the width of every host of the item:
 * "n[08-10]" is n08 n09 n10, "n[8-10]" is n8 n9 n10.  An element may hold
 * up to DL_HOSTLIST_GROUPS bracket groups ("r[1-2]n[3-4]", rare in Slurm
 * node names): their product, the last group fastest (r1n3 r1n4 r2n3
 * r2n4).  Hosts come in the list's order, repeats kept.  Refused, though
 * Slurm's own parser takes them: blanks as separators, BlueGene's
 * "[000x133]" boxes, an empty element ("a,,b").
 *
 * Bounds, so a hostile list costs little: DL_HOSTLIST_LEN_MAX bytes of
 * list, DL_HOSTLIST_NAME_MAX bytes per host name, DL_HOSTLIST_RANGE_MAX
 * hosts per range ("n[0-999999999]" is refused, never walked).
 * dl_hostlist_init checks the whole list in one pass without expanding
 * it; dl_hostlist_next then expands one host per call, so a caller that
 * needs the first host or two never walks the rest. */
#ifndef DLJOB_COMMON_HOSTLIST_H
#define DLJOB_COMMON_HOSTLIST_H

#include <stddef.h>

#define DL_HOSTLIST_LEN_MAX (1 << 20)
#define DL_HOSTLIST_NAME_MAX 255
#define DL_HOSTLIST_DIGITS 18
#define DL_HOSTLIST_RANGE_MAX (1 << 20)
#define DL_HOSTLIST_GROUPS 4

/* One bracket group of the current element, at its current host. */
struct dl_hostlist_group {
	const char *open, *close;  /* its '[' and ']' in the list */
	const char *item;          /* the current item */
	unsigned long long cur, hi; /* the current number, the item's last */
	int width;                 /* the item's zero padding */
};

/* Points into the list, which must outlive it. */
struct dl_hostlist {
	const char *elem, *end;    /* the current element [elem, end); elem is NULL after the last host */
	int ngroups;
	struct dl_hostlist_group g[DL_HOSTLIST_GROUPS];
};

/* Check list and set h at its first host.  Returns 0, or -1 with one line
 * in err saying what is wrong and at which byte (1 is the first). */
int dl_hostlist_init(struct dl_hostlist *h, const char *list, char *err, size_t errlen);

/* The next host into out: 1, 0 after the last one, -1 (with err) when it
 * does not fit in outlen bytes (h has moved past it all the same). */
int dl_hostlist_next(struct dl_hostlist *h, char *out, size_t outlen, char *err, size_t errlen);

/* The first host of list ("gpu[007-010,12]-ib,cpu1" -> "gpu007-ib"):
 * dl_hostlist_init and one dl_hostlist_next.  Returns 0, or -1 with err. */
int dl_hostlist_first(const char *list, char *out, size_t outlen, char *err, size_t errlen);

#endif
