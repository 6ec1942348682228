/* mpi_hang: an LD_PRELOAD shim that makes one rank hang inside
 * MPI_Init_thread or MPI_Finalize, for tests/slurm/test_world_fail.sh (the
 * PMIx world's watchdog must name the stage and end the process within the
 * timeout).  MPIHANG_STAGE=init|finalize and MPIHANG_RANK=R pick where and
 * who (R is compared with PMIX_RANK); everybody else gets the real call. */
#define _GNU_SOURCE
#include "config.h"
#include <dlfcn.h>
#include <mpi.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void maybe_hang(const char *stage)
{
	const char *s = getenv("MPIHANG_STAGE"), *r = getenv("MPIHANG_RANK");
	const char *me = getenv("PMIX_RANK");
	if (s && r && me && strcmp(s, stage) == 0 && strcmp(r, me) == 0)
		for (;;)
			pause();
}

int MPI_Init_thread(int *argc, char ***argv, int required, int *provided)
{
	int (*real)(int *, char ***, int, int *);
	maybe_hang("init");
	*(void **)&real = dlsym(RTLD_NEXT, "MPI_Init_thread");
	return real ? real(argc, argv, required, provided) : MPI_ERR_OTHER;
}

int MPI_Finalize(void)
{
	int (*real)(void);
	maybe_hang("finalize");
	*(void **)&real = dlsym(RTLD_NEXT, "MPI_Finalize");
	return real ? real() : MPI_ERR_OTHER;
}
