/* Test helper: dljob pack without the dljob executable (argv as for
 * "dljob pack ...": argv[0] is the sub-command). */
#include "config.h"
#include "runtime/pack.h"

int main(int argc, char **argv)
{
	return dl_pack_main(argc, argv);
}
