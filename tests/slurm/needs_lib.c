/* A program for the tests only: it needs the shared library
 * libdljob_testdep (tests/slurm/testdep.c), found through its RUNPATH in the
 * build tree, and prints what that library returns.  test_spank_container.sh
 * uses it as runtime= and hides the library from the "container", to see
 * dljob name the missing library before anything runs. */
#include <stdio.h>

int dljob_testdep(void);

int main(void)
{
	printf("testdep=%d\n", dljob_testdep());
	return 0;
}
