/* Slurm host lists: the checking parser and the iterator (common/hostlist.h
 * says what is accepted and the bounds). */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "common/hostlist.h"
#include "common/optval.h"

static int is_digit(char c) { return c >= '0' && c <= '9'; }

/* A byte of a host name outside brackets. */
static int is_text(char c) { return c > ' ' && c < 0x7f && c != ',' && c != '[' && c != ']'; }

/* What is at p, for an error: "'x'", "0x07" or "the end". */
static const char *what(const char *p, char *buf, size_t len)
{
	if (!*p)
		snprintf(buf, len, "the end");
	else if (*p > ' ' && *p < 0x7f)
		snprintf(buf, len, "'%c'", *p);
	else
		snprintf(buf, len, "0x%02x", (unsigned)(unsigned char)*p);
	return buf;
}

/* A number at *p (moved past it): its value and digit count; -1 (with
 * err) if there is none or it is too long. */
static int number(const char *list, const char **p, unsigned long long *v, int *digits, char *err,
		  size_t errlen)
{
	const char *s = *p, *q = s;
	char w[16];

	*v = 0;
	for (; is_digit(*q); q++) {
		if (q - s == DL_HOSTLIST_DIGITS)
			return dl_errf(err, errlen, "the number at byte %zu has more than %d digits",
				       (size_t)(s - list) + 1, DL_HOSTLIST_DIGITS);
		*v = *v * 10 + (unsigned long long)(*q - '0');
	}
	if (q == s)
		return dl_errf(err, errlen, "%s at byte %zu is not a number", what(q, w, sizeof(w)),
			       (size_t)(q - list) + 1);
	*digits = (int)(q - s);
	*p = q;
	return 0;
}

/* An item "lo" or "lo-hi" at *p (moved to the ',' or ']' after it) inside
 * the group opened at open: its range, its width and the most bytes its
 * hosts' numbers take; -1 (with err) if it is not one. */
static int item(const char *list, const char *open, const char **p, unsigned long long *lo, unsigned long long *hi,
		int *width, int *bytes, char *err, size_t errlen)
{
	const char *s = *p;
	char w[16];
	int hd;

	if (!**p)
		return dl_errf(err, errlen, "the '[' at byte %zu is not closed", (size_t)(open - list) + 1);
	if (number(list, p, lo, width, err, errlen) < 0)
		return -1;
	*hi = *lo;
	*bytes = *width;
	if (**p == '-') {
		if (!*++*p)
			return dl_errf(err, errlen, "the '[' at byte %zu is not closed", (size_t)(open - list) + 1);
		if (number(list, p, hi, &hd, err, errlen) < 0)
			return -1;
		if (*hi < *lo)
			return dl_errf(err, errlen, "the range %llu-%llu at byte %zu goes down", *lo, *hi,
				       (size_t)(s - list) + 1);
		if (*hi - *lo >= DL_HOSTLIST_RANGE_MAX)
			return dl_errf(err, errlen, "the range %llu-%llu at byte %zu has more than %d hosts", *lo, *hi,
				       (size_t)(s - list) + 1, DL_HOSTLIST_RANGE_MAX);
		if (hd > *bytes)
			*bytes = hd;
	}
	if (!**p)
		return dl_errf(err, errlen, "the '[' at byte %zu is not closed", (size_t)(open - list) + 1);
	if (**p != ',' && **p != ']')
		return dl_errf(err, errlen, "%s at byte %zu: expected a digit, '-', ',' or ']' inside brackets",
			       what(*p, w, sizeof(w)), (size_t)(*p - list) + 1);
	return 0;
}

/* Group g at its item it, at the item's first number (checked before). */
static void group_at(struct dl_hostlist_group *g, const char *it)
{
	unsigned long long lo;
	int bytes;

	g->item = it;
	item(it, g->open, &it, &lo, &g->hi, &g->width, &bytes, NULL, 0);
	g->cur = lo;
}

/* h at the first host of the element at p (checked before). */
static void element_at(struct dl_hostlist *h, const char *p)
{
	h->elem = p;
	h->ngroups = 0;
	while (*p && *p != ',') {
		if (*p == '[') {
			struct dl_hostlist_group *g = &h->g[h->ngroups++];

			g->open = p;
			g->close = strchr(p, ']');
			group_at(g, p + 1);
			p = g->close + 1;
		} else {
			p++;
		}
	}
	h->end = p;
}

int dl_hostlist_init(struct dl_hostlist *h, const char *list, char *err, size_t errlen)
{
	size_t len = strnlen(list, DL_HOSTLIST_LEN_MAX + 1);
	const char *p = list;
	char w[16];

	h->elem = NULL;
	if (len == 0)
		return dl_errf(err, errlen, "empty");
	if (len > DL_HOSTLIST_LEN_MAX)
		return dl_errf(err, errlen, "longer than %d bytes", DL_HOSTLIST_LEN_MAX);
	for (;;) {
		const char *start = p;
		size_t name = 0; /* the most bytes a host of this element takes */
		int groups = 0;

		while (*p && *p != ',') {
			if (*p == '[') {
				const char *open = p++;
				int most = 0;

				if (++groups > DL_HOSTLIST_GROUPS)
					return dl_errf(err, errlen, "more than %d bracket groups in one host name (byte %zu)",
						    DL_HOSTLIST_GROUPS, (size_t)(open - list) + 1);
				for (;;) {
					unsigned long long lo, hi;
					int width, bytes;

					if (item(list, open, &p, &lo, &hi, &width, &bytes, err, errlen) < 0)
						return -1;
					most = bytes > most ? bytes : most;
					if (*p++ == ']')
						break;
				}
				name += (size_t)most;
			} else if (*p == ']') {
				return dl_errf(err, errlen, "the ']' at byte %zu has no '['", (size_t)(p - list) + 1);
			} else if (!is_text(*p)) {
				return dl_errf(err, errlen, "%s at byte %zu is not part of a host name", what(p, w, sizeof(w)),
					    (size_t)(p - list) + 1);
			} else {
				p++;
				name++;
			}
		}
		if (p == start)
			return dl_errf(err, errlen, "empty host name at byte %zu", (size_t)(p - list) + 1);
		if (name > DL_HOSTLIST_NAME_MAX)
			return dl_errf(err, errlen, "the host names at byte %zu are longer than %d bytes",
				    (size_t)(start - list) + 1, DL_HOSTLIST_NAME_MAX);
		if (!*p)
			break;
		p++;
	}
	element_at(h, list);
	return 0;
}

int dl_hostlist_next(struct dl_hostlist *h, char *out, size_t outlen, char *err, size_t errlen)
{
	char buf[DL_HOSTLIST_NAME_MAX + 1];
	size_t o = 0;
	int k = 0;

	if (!h->elem)
		return 0;
	/* the current host: the element's text, each group's number */
	for (const char *p = h->elem; p < h->end && o < sizeof(buf);) {
		if (*p == '[') {
			const struct dl_hostlist_group *g = &h->g[k++];
			int n = snprintf(buf + o, sizeof(buf) - o, "%0*llu", g->width, g->cur);

			o += n > 0 ? (size_t)n : 0;
			p = g->close + 1;
		} else {
			buf[o++] = *p++;
		}
	}
	/* o < sizeof(buf): init bounded the element's names by DL_HOSTLIST_NAME_MAX */
	if (o >= sizeof(buf))
		o = sizeof(buf) - 1;
	buf[o] = '\0';
	/* then h at the next one: the last group fastest, an exhausted group
	 * back to its first item and the one before it moved on */
	for (k = h->ngroups - 1; k >= 0; k--) {
		struct dl_hostlist_group *g = &h->g[k];
		const char *e = g->item + strcspn(g->item, ",]");

		if (g->cur < g->hi) {
			g->cur++;
			break;
		}
		if (*e == ',') {
			group_at(g, e + 1);
			break;
		}
		group_at(g, g->open + 1);
	}
	if (k < 0) {
		if (*h->end == ',')
			element_at(h, h->end + 1);
		else
			h->elem = NULL;
	}
	if (o >= outlen)
		return dl_errf(err, errlen, "the host name %s is longer than %zu bytes", buf,
			       outlen ? outlen - 1 : 0);
	memcpy(out, buf, o + 1);
	return 1;
}

int dl_hostlist_first(const char *list, char *out, size_t outlen, char *err, size_t errlen)
{
	struct dl_hostlist h;

	if (dl_hostlist_init(&h, list, err, errlen) < 0)
		return -1;
	return dl_hostlist_next(&h, out, outlen, err, errlen) == 1 ? 0 : -1;
}
