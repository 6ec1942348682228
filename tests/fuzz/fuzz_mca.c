/* fuzz_mca: an Open MPI parameter file as the PMIx world scans it for
 * btl_tcp_if_include before choosing Open MPI's TCP interface itself
 * (dl_mca_file_names, runtime/world_ompi.c).  The file is the user's or the
 * site's: any bytes.  Input: the file's bytes.  Checks: no read outside the
 * input, and the answer equals a slow reference (split into lines, strip
 * leading blanks, cut the key at a blank, '=', '\r' or '#'). */
#include "config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/world_int.h"

static int slow(const char *t, size_t n, const char *name)
{
	char *line = malloc(n + 1);
	int found = 0;

	if (!line)
		abort();
	for (size_t i = 0; i <= n && !found;) {
		size_t j = i;
		while (j < n && t[j] != '\n')
			j++;
		memcpy(line, t + i, j - i);
		line[j - i] = '\0';
		char *k = line;
		size_t lead = 0;
		while (lead < j - i && (k[lead] == ' ' || k[lead] == '\t'))
			lead++;
		size_t klen = 0;
		while (lead + klen < j - i && !memchr(" \t=\r#", k[lead + klen], 5))
			klen++;
		found = klen == strlen(name) && memcmp(k + lead, name, klen) == 0;
		i = j + 1;
	}
	free(line);
	return found;
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
		if (dl_mca_file_names(t, size, names[i]) != slow(t, size, names[i]))
			abort();
	free(t);
	return 0;
}
