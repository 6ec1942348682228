/* dljob topo [--xml FILE] --tasks N [--gpus LIST|none] [--cpus LIST] [--nic closest|none]
 *
 * The explain mode of the mapping: the same code as the SPANK plugin
 * (mapping/, linked into the runtime) computes the plan of N local
 * tasks on a node, from an hwloc XML file or this machine, and prints the
 * table that --dl-bind=...,verbose prints at launch.  Nothing is bound and
 * nothing is run. */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "runtime/cli.h"
#include "common/optval.h"
#include "runtime/topo.h"
#include "mapping/mapping.h"

/* What the command line sets, in the option table's types. */
struct topo_args {
	const char *xml, *gpus, *cpus;
	int ntasks, nic;
};

/* dljob topo's options (runtime/opttab.h says how to read a row). */
#define TOPO_OPTIONS(X, H) \
	X(XML, "xml", required_argument, "FILE", NONE, 0, 0, xml, \
	  "hwloc XML topology (e.g. the plugstack's topology=, or\nlstopo --of xml); default: this machine") \
	X(TASKS, "tasks", required_argument, "N", INT, 1, DL_MAP_MAX_TASKS, ntasks, "tasks on the node (%R)") \
	X(GPUS, "gpus", required_argument, "LIST", NONE, 0, 0, gpus, \
	  "the step's GPUs as Slurm indexes (SLURM_STEP_GPUS syntax,\n" \
	  "e.g. 0-3 or 1,5), or none; default: every GPU of the topology") \
	X(CPUS, "cpus", required_argument, "LIST", NONE, 0, 0, cpus, \
	  "plan within these CPUs (OS indexes, e.g. 0-15,64-79), as the\n" \
	  "plugin plans within the CPUs the step owns on a shared node;\n" \
	  "default: every CPU of the topology") \
	X(NIC, "nic", required_argument, "closest|none", NONE, 0, 0, nic, "as the plugstack's nic= (default closest)") \
	X(HELP, "help", no_argument, NULL, NONE, 0, 0, nic, "this text")

#define DL_OPT_STRUCT struct topo_args
DL_OPT_DEFINE(TOPO_OPTIONS, topo)
const struct dl_opt_table dl_topo_opttab = DL_OPT_TABLE(topo, "dljob topo");

static void usage(FILE *f)
{
	fprintf(f,
	"Usage: dljob topo [--xml FILE] --tasks N [--gpus LIST|none] [--cpus LIST] [--nic closest|none]\n"
	"Print the GPU, NIC, NUMA and CPU mapping that srun --dl-bind=closest gives N tasks\n"
	"on one node, with the rule that decided each column; runs nothing.\n");
	dl_opt_usage(f, &dl_topo_opttab);
}

int dl_topo_main(int argc, char **argv)
{
	struct topo_args a = {.nic = 1};
	const char *xml, *gpus, *cpus;
	char err[1024], q[256], title[1536], list[64], cpulist[DL_MAP_LIST];
	int ntasks, nic, c, step[DL_MAP_MAX_GPUS], ng = 0, rv = DL_EXIT_ERROR;
	struct dl_map *m = NULL;
	struct dl_map_plan *p = NULL;
	hwloc_bitmap_t within = NULL;

	optind = 1;
	while ((c = dl_opt_next(&dl_topo_opttab, ":", argc, argv, &a, err, sizeof(err))) != -1) {
		switch (c) {
		case OPT_XML:
			a.xml = optarg;
			break;
		case OPT_GPUS:
			a.gpus = optarg;
			break;
		case OPT_CPUS:
			a.cpus = optarg;
			break;
		case OPT_NIC:
			if (strcmp(optarg, "closest") && strcmp(optarg, "none")) {
				fprintf(stderr, "dljob topo: --nic=%s: expected closest or none\n",
					dl_optval_escape(optarg, q, sizeof(q)));
				return DL_EXIT_USAGE;
			}
			a.nic = !strcmp(optarg, "closest");
			break;
		case OPT_HELP:
			usage(stdout);
			return DL_EXIT_OK;
		case DL_OPT_ERROR:
			fprintf(stderr, "dljob topo: %s\n", err);
			return DL_EXIT_USAGE;
		default: /* a number, parsed by dl_opt_next */
			break;
		}
	}
	xml = a.xml;
	gpus = a.gpus;
	cpus = a.cpus;
	ntasks = a.ntasks;
	nic = a.nic;
	if (optind < argc) {
		fprintf(stderr, "dljob topo: unexpected argument '%s'\n", dl_optval_escape(argv[optind], q, sizeof(q)));
		return DL_EXIT_USAGE;
	}
	if (ntasks == 0) {
		fprintf(stderr, "dljob topo: --tasks N is required (see dljob topo --help)\n");
		return DL_EXIT_USAGE;
	}
	if (gpus && strcmp(gpus, "none") && (ng = dl_map_parse_index_list(gpus, step, DL_MAP_MAX_GPUS)) <= 0) {
		fprintf(stderr, "dljob topo: --gpus=%s: expected Slurm GPU indexes such as 0-3 or 1,5, or none\n",
			dl_optval_escape(gpus, q, sizeof(q)));
		return DL_EXIT_USAGE;
	}
	if (cpus) {
		if (!(within = hwloc_bitmap_alloc())) {
			fprintf(stderr, "dljob topo: out of memory\n");
			return DL_EXIT_ERROR;
		}
		if (dl_map_parse_cpu_list(cpus, within) <= 0) {
			fprintf(stderr, "dljob topo: --cpus=%s: expected CPU numbers such as 0-15,64-79\n",
				dl_optval_escape(cpus, q, sizeof(q)));
			hwloc_bitmap_free(within);
			return DL_EXIT_USAGE;
		}
	}
	if (!(m = dl_map_open(xml, err, sizeof(err)))) {
		hwloc_bitmap_free(within);
		fprintf(stderr, "dljob topo: %s\n", err);
		return DL_EXIT_ERROR;
	}
	if (!gpus) {
		ng = dl_map_ngpus(m);
		for (int i = 0; i < ng; i++)
			step[i] = i;
	}
	if (!(p = dl_map_plan(m, step, ng, NULL, ntasks, within, nic, err, sizeof(err)))) {
		fprintf(stderr, "dljob topo: %s\n", err);
		goto out;
	}
	if (ng == 0)
		snprintf(list, sizeof(list), "none");
	else if (gpus)
		snprintf(list, sizeof(list), "%.60s", gpus);
	else
		snprintf(list, sizeof(list), "0-%d", ng - 1);
	if (within)
		hwloc_bitmap_list_snprintf(cpulist, sizeof(cpulist), within);
	snprintf(title, sizeof(title), "mapping of %d task%s, step GPUs %s, topology %.900s%s%s", ntasks,
		 ntasks == 1 ? "" : "s", list, xml ? xml : "of this machine", within ? ", within CPUs " : "",
		 within ? cpulist : "");
	dl_map_plan_print(stdout, p, title);
	rv = fflush(stdout) == 0 ? DL_EXIT_OK : DL_EXIT_ERROR;
out:
	hwloc_bitmap_free(within);
	dl_map_plan_free(p);
	dl_map_close(m);
	return rv;
}
