#include "config.h"
#include <ctype.h>

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/optval.h"

/* Values quoted in messages are escaped and cut to this many bytes. */
#define QUOTE_LEN 96

static int is_digit(char c) { return c >= '0' && c <= '9'; }

int dl_optval_long(const char *opt, const char *s, long min, long max, long *out,
		   char *err, size_t errlen)
{
	char q[QUOTE_LEN], *end;
	long v;

	/* strtol skips blanks and takes a sign: only digits may start it. */
	if (!is_digit(s[0]) && !(min < 0 && s[0] == '-' && is_digit(s[1])))
		return dl_errf(err, errlen, "--%s: '%s' is not an integer", opt, dl_optval_escape(s, q, sizeof(q)));
	errno = 0;
	v = strtol(s, &end, 10);
	if (*end != '\0' || errno == ERANGE)
		return dl_errf(err, errlen, "--%s: '%s' is not an integer", opt, dl_optval_escape(s, q, sizeof(q)));
	if (v < min || v > max)
		return dl_errf(err, errlen, "--%s: %ld is out of range [%ld, %ld]", opt, v, min, max);
	*out = v;
	return 0;
}

int dl_optval_int(const char *opt, const char *s, int min, int max, int *out,
		  char *err, size_t errlen)
{
	long v;

	if (dl_optval_long(opt, s, min, max, &v, err, errlen) < 0)
		return -1;
	*out = (int)v;
	return 0;
}

int dl_optval_double(const char *opt, const char *s, double min, int min_open, double max,
		     int max_open, double *out, char *err, size_t errlen)
{
	char q[QUOTE_LEN], *end;
	double v;
	const char *p = s;

	/* Decimal only: strtod also takes blanks, "0x1p3", "inf" and "nan". */
	if (*p == '-' || *p == '+')
		p++;
	if (!is_digit(*p) && !(*p == '.' && is_digit(p[1])))
		return dl_errf(err, errlen, "--%s: '%s' is not a number", opt, dl_optval_escape(s, q, sizeof(q)));
	for (const char *c = p; *c; c++)
		if (!is_digit(*c) && *c != '.' && *c != 'e' && *c != 'E' && *c != '-' && *c != '+')
			return dl_errf(err, errlen, "--%s: '%s' is not a number", opt, dl_optval_escape(s, q, sizeof(q)));
	errno = 0;
	v = strtod(s, &end);
	/* ERANGE also flags an underflow (1e-400): a value that small is out
	 * of range for every option here. */
	if (*end != '\0' || (errno == ERANGE && fabs(v) > 1) || !isfinite(v))
		return dl_errf(err, errlen, "--%s: '%s' is not a number", opt, dl_optval_escape(s, q, sizeof(q)));
	if (v < min || v > max || (min_open && v == min) || (max_open && v == max))
		return dl_errf(err, errlen, "--%s: %s is out of range %s%g, %g%s", opt, dl_optval_escape(s, q, sizeof(q)),
			    min_open ? "(" : "[", min, max, max_open ? ")" : "]");
	*out = v;
	return 0;
}

int dl_optval_u64(const char *opt, const char *s, uint64_t *out, char *err, size_t errlen)
{
	char q[QUOTE_LEN], *end;
	unsigned long long v;

	/* strtoull skips blanks and wraps "-1" (and " -1") to 2^64-1. */
	if (!is_digit(s[0]))
		return dl_errf(err, errlen, "--%s: '%s' is not a non-negative integer", opt,
			    dl_optval_escape(s, q, sizeof(q)));
	errno = 0;
	v = strtoull(s, &end, 10);
	if (*end != '\0' || errno == ERANGE)
		return dl_errf(err, errlen, "--%s: '%s' is not a non-negative integer", opt,
			    dl_optval_escape(s, q, sizeof(q)));
	*out = (uint64_t)v;
	return 0;
}

int dl_optval_has_ctl(const char *s)
{
	for (const unsigned char *p = (const unsigned char *)s; *p; p++)
		if (*p < 0x20 || *p == 0x7f)
			return 1;
	return 0;
}

static char *escape(const char *s, char *out, size_t outlen, int backslash);

char *dl_optval_escape(const char *s, char *out, size_t outlen)
{
	return escape(s, out, outlen, 1);
}

char *dl_optval_escape_msg(const char *s, char *out, size_t outlen)
{
	return escape(s, out, outlen, 0);
}

static char *escape(const char *s, char *out, size_t outlen, int backslash)
{
	size_t n = 0;

	if (outlen < 4) {
		if (outlen)
			out[0] = '\0';
		return out;
	}
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		char one[5];
		size_t k;

		if (*p == '\n')
			memcpy(one, "\\n", k = 2);
		else if (*p == '\t')
			memcpy(one, "\\t", k = 2);
		else if (*p == '\\' && backslash)
			memcpy(one, "\\\\", k = 2);
		else if (*p < 0x20 || *p >= 0x7f)
			k = (size_t)snprintf(one, sizeof(one), "\\x%02x", *p);
		else
			one[0] = (char)*p, k = 1;
		/* Keep room for "..." and the NUL unless this is the end. */
		if (n + k + (p[1] ? 4 : 1) > outlen) {
			if (n + 4 > outlen)
				n = outlen - 4;
			memcpy(out + n, "...", 4);
			return out;
		}
		memcpy(out + n, one, k);
		n += k;
	}
	out[n] = '\0';
	return out;
}

int dl_optval_path_abs(const char *base, const char *path, char *out, size_t outlen)
{
	size_t n;

	if (path[0] == '/' || !base[0]) {
		if (strlen(path) >= outlen)
			return -1;
		memcpy(out, path, strlen(path) + 1);
		return 0;
	}
	n = strlen(base);
	while (n > 1 && base[n - 1] == '/')
		n--;
	if (n >= outlen)
		return -1;
	memcpy(out, base, n);
	out[n] = '\0';
	for (const char *p = path; *p;) {
		size_t len = strcspn(p, "/");

		if (len && !(len == 1 && p[0] == '.')) {
			size_t used = strlen(out), sep = used > 1 || out[0] != '/';

			if (used + sep + len >= outlen)
				return -1;
			if (sep)
				out[used++] = '/';
			memcpy(out + used, p, len);
			out[used + len] = '\0';
		}
		p += len;
		p += *p == '/';
	}
	return 0;
}

const char *dl_optval_unknown(char *const *argv, int ind, int opt, char *buf, size_t len)
{
	if (opt > 0 && opt < 0x7f && isgraph(opt)) {
		snprintf(buf, len, "-%c", opt);
		return buf;
	}
	return argv[ind - 1];
}
