/* The one error helper.  Every function that can fail and has no context
 * of its own takes (char *err, size_t errlen) and reports one line there:
 * what is wrong and its real cause.  dl_errf writes it (cut to errlen,
 * always terminated; nothing when err is NULL or errlen 0) and returns -1,
 * so that a function can end with `return dl_errf(err, errlen, ...)`.
 * Helpers that keep the line in a context of their own (a backend's
 * b->err with file:line, a builder that stops at the first failure) write
 * it through dl_verrf.  Header-only: the plugin, the runtime, the engine
 * and the dlopen'ed CUDA module use it without linking anything. */
#ifndef DLJOB_COMMON_ERR_H
#define DLJOB_COMMON_ERR_H

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

__attribute__((format(printf, 3, 0)))
static inline int dl_verrf(char *err, size_t errlen, const char *fmt, va_list ap)
{
	if (err && errlen > 0)
		vsnprintf(err, errlen, fmt, ap);
	return -1;
}

__attribute__((format(printf, 3, 4)))
static inline int dl_errf(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	dl_verrf(err, errlen, fmt, ap);
	va_end(ap);
	return -1;
}

#endif
