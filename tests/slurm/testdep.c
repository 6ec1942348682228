/* The shared library tests/slurm/needs_lib needs (tests only). */
int dljob_testdep(void);

int dljob_testdep(void)
{
	return 42;
}
