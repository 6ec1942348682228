/* fuzz_mca: an Open MPI parameter file as the PMIx world scans it for
 * btl_tcp_if_include before choosing Open MPI's TCP interface itself
 * (dl_mca_file_names, world/world_ompi.c: an emulation of Open MPI 4.1's
 * keyval scanner and parser).  The file is the user's or the site's: any
 * bytes.  Input: the file's bytes.  Checks: no read outside the input, and
 * a name is found only where the file holds it as a whole word (bytes
 * other than [A-Za-z0-9_.-] on each side, or the file's ends; or after
 * "--mca" glued to it, which "-mca --mcaNAME" sets). */
#include "config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "world/world_int.h"

static int word_char(char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
	       c == '-' || c == '.';
}

static int has_word(const char *t, size_t n, const char *name)
{
	size_t nl = strlen(name);

	for (size_t i = 0; i + nl <= n; i++)
		if (memcmp(t + i, name, nl) == 0 && (i + nl == n || !word_char(t[i + nl])) &&
		    (i == 0 || !word_char(t[i - 1]) || (i >= 5 && memcmp(t + i - 5, "--mca", 5) == 0)))
			return 1;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* An exact-size copy: ASan catches any read past the end. */
	char *t = malloc(size ? size : 1);
	static const char *const names[] = { "btl_tcp_if_include", "btl_tcp_if_exclude", "b" };

	if (!t)
		abort();
	memcpy(t, data, size);
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (dl_mca_file_names(t, size, names[i]) && !has_word(t, size, names[i]))
			abort();
	free(t);
	return 0;
}
