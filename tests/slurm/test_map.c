/* GPU -> NIC -> NUMA/CPU mapping on real and hand-made hwloc topologies.
 *
 * Real topologies are in tests/slurm/topologies/real (where each one comes
 * from, and its licence, is in its SOURCES.md); hand-made ones are in
 * tests/slurm/topologies.
 * The expected answers were worked out by reading each tree
 * (lstopo-no-graphics --input FILE) against the rules in spank/mapping.h.
 * Every *.xml in the fixtures directory must have expectations here, so a new
 * fixture cannot go untested. */
#include "config.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spank/mapping.h"

struct expect {
	const char *file;    /* "real:NAME" or "local:NAME" */
	const char *gpus;    /* step GPUs (SLURM_STEP_GPUS syntax), "" for none */
	int ntasks;
	const char *allowed; /* hwloc list of allowed CPUs, NULL: all */
	/* one row per task: "BUSID HCAS IFNAMES NUMA CPUS", "-" for empty */
	const char *rows[8];
};

static const struct expect cases[] = {
	/* JUWELS Booster: each A100 shares a PEX switch with one HDR HCA (1:1);
	 * NPS4, so each GPU's NUMA node holds 6 cores. */
	{ "real:topo.jwb0004.xml", "0-3", 4, NULL, {
		"0000:03:00.0 mlx5_0 ib0 3 18-23,66-71",
		"0000:44:00.0 mlx5_1 ib1 1 6-11,54-59",
		"0000:84:00.0 mlx5_2 ib2 7 42-47,90-95",
		"0000:c4:00.0 mlx5_3 ib3 5 30-35,78-83" } },
	/* Same node, what Slurm allowed restricts the CPUs; a disjoint allowed
	 * set is kept as it is rather than binding to nothing. */
	{ "real:topo.jwb0004.xml", "0,1", 2, "0-20", {
		"0000:03:00.0 mlx5_0 ib0 3 18-20",
		"0000:44:00.0 mlx5_1 ib1 1 6-11" } },
	{ "real:topo.jwb0004.xml", "2", 1, "0-1", {
		"0000:84:00.0 mlx5_2 ib2 7 0-1" } },
	/* XE8640, SNC4: each H100 has its own switch; 4e shares it with the
	 * dual-port CX-6 (both ports), 5f with a CX-7, db with a CX-7; cb has
	 * no HCA in its switch, the nearest is db's in the same package, and
	 * one HCA for two GPUs is shared, not split. */
	{ "real:ipa20.xml", "0-3", 4, NULL, {
		"0000:4e:00.0 mlx5_0,mlx5_1 hsi0,ibs2f1 3 42-55,154-167",
		"0000:5f:00.0 mlx5_2 ibp94s0 1 14-27,126-139",
		"0000:cb:00.0 mlx5_3 ibp218s0 7 98-111,210-223",
		"0000:db:00.0 mlx5_3 ibp218s0 5 70-83,182-195" } },
	/* More tasks than GPUs: round-robin over the step's GPUs. */
	{ "real:ipa20.xml", "1,2", 4, NULL, {
		"0000:5f:00.0 mlx5_2 ibp94s0 1 14-27,126-139",
		"0000:cb:00.0 mlx5_3 ibp218s0 7 98-111,210-223",
		"0000:5f:00.0 mlx5_2 ibp94s0 1 14-27,126-139",
		"0000:cb:00.0 mlx5_3 ibp218s0 7 98-111,210-223" } },
	/* Tioga: 8 MI250X GCDs (AMD class 0x0380), I/O on L3 caches, 2 GCDs and
	 * one Slingshot NIC per NUMA node, no OpenFabrics device.  The slow
	 * management NIC ens2 ties with hsi2 at the NUMA level for d1 but is
	 * more hops away. */
	{ "real:eas-tioga.xml", "0-7", 8, NULL, {
		"0000:c1:00.0 - hsi0 3 48-63,112-127",
		"0000:c6:00.0 - hsi0 3 48-63,112-127",
		"0000:c9:00.0 - hsi1 1 16-31,80-95",
		"0000:ce:00.0 - hsi1 1 16-31,80-95",
		"0000:d1:00.0 - hsi2 0 0-15,64-79",
		"0000:d6:00.0 - hsi2 0 0-15,64-79",
		"0000:d9:00.0 - hsi3 2 32-47,96-111",
		"0000:de:00.0 - hsi3 2 32-47,96-111" } },
	/* Tuolumne, MI300A in CPX mode: one GPU per PCI function (class 0x1200)
	 * although each carries 6 rsmi devices; one Slingshot NIC per APU. */
	{ "real:tuo.CPX.xml", "0-3", 4, NULL, {
		"0000:02:00.0 - hsi0 0 0-23,96-119",
		"0001:02:00.0 - hsi1 1 24-47,120-143",
		"0002:02:00.0 - hsi2 2 48-71,144-167",
		"0003:02:00.0 - hsi3 3 72-95,168-191" } },
	/* Lassen, hwloc 1.x XML: the ASPEED VGA is not a GPU; the 2 ports of
	 * the socket's ConnectX-5 are split between its 2 V100s; the
	 * CPU-less GPU-memory NUMA nodes 252-255 are not the GPUs' memory. */
	{ "real:coral-lassen-hwloc1.xml", "0-3", 4, NULL, {
		"0004:04:00.0 mlx5_0 hsi0,hsi1 0 8-87",
		"0004:05:00.0 mlx5_1 enP5p1s0f0,enP5p1s0f1 0 8-87",
		"0035:03:00.0 mlx5_2 hsi2 8 96-175",
		"0035:04:00.0 mlx5_3 hsi3 8 96-175" } },
	/* p5en (trimmed, no PUs: CPUs come from the NUMA cpusets): two H200 per
	 * Nitro switch with 4 EFA and 4 ENA, so 2 of each per GPU. */
	{ "real:p5en.48xl-topo.xml", "0-7", 8, NULL, {
		"0000:59:00.0 rdmap85s0,rdmap86s0 enp71s0,enp72s0 0 0-47,96-143",
		"0000:5a:00.0 rdmap87s0,rdmap88s0 enp73s0,enp74s0 0 0-47,96-143",
		"0000:72:00.0 rdmap110s0,rdmap111s0 enp96s0,enp97s0 0 0-47,96-143",
		"0000:73:00.0 rdmap112s0,rdmap113s0 enp98s0,enp99s0 0 0-47,96-143",
		"0000:8b:00.0 rdmap135s0,rdmap136s0 enp122s0,enp123s0 1 48-95,144-191",
		"0000:8c:00.0 rdmap137s0,rdmap138s0 enp124s0,enp125s0 1 48-95,144-191",
		"0000:a4:00.0 rdmap160s0,rdmap161s0 enp146s0,enp147s0 1 48-95,144-191",
		"0000:a5:00.0 rdmap162s0,rdmap163s0 enp148s0,enp149s0 1 48-95,144-191" } },
	/* A step with one GPU of a pair gets all 4 EFA of the switch. */
	{ "real:p5en.48xl-topo.xml", "5", 1, NULL, {
		"0000:8c:00.0 rdmap135s0,rdmap136s0,rdmap137s0,rdmap138s0 enp122s0,enp123s0,enp124s0,enp125s0 1 48-95,144-191" } },

	/* Hand-made: 2 sockets x 2 switches x (2 GPUs + 1 HCA). */
	{ "local:2s-8gpu-4hca.xml", "0-7", 8, NULL, {
		"0000:12:00.0 mlx5_0 ib0 0 0-3",
		"0000:13:00.0 mlx5_0 ib0 0 0-3",
		"0000:22:00.0 mlx5_1 ib1 0 0-3",
		"0000:23:00.0 mlx5_1 ib1 0 0-3",
		"0000:82:00.0 mlx5_2 ib2 1 4-7",
		"0000:83:00.0 mlx5_2 ib2 1 4-7",
		"0000:92:00.0 mlx5_3 ib3 1 4-7",
		"0000:93:00.0 mlx5_3 ib3 1 4-7" } },
	/* Slurm's indexes are bus-id order whatever order the step lists. */
	{ "local:2s-8gpu-4hca.xml", "6,1", 2, NULL, {
		"0000:92:00.0 mlx5_3 ib3 1 4-7",
		"0000:13:00.0 mlx5_0 ib0 0 0-3" } },
	/* No GPU in the step: NUMA nodes split between tasks, NICs nearest to
	 * the task's NUMA node, balanced between the tasks that share them. */
	{ "local:2s-8gpu-4hca.xml", "", 3, NULL, {
		"- mlx5_0 ib0 0 0-3",
		"- mlx5_1 ib1 0 0-3",
		"- mlx5_2,mlx5_3 ib2,ib3 1 4-7" } },
	/* Hand-made: 4 GPUs share one switch with 2 HCAs and 1 Ethernet NIC:
	 * 4 GPUs over 2 HCAs -> 0,0,1,1; over 3 interfaces -> 0,0,1,2. */
	{ "local:shared-nic.xml", "0-3", 4, NULL, {
		"0000:12:00.0 mlx5_0 ib0 0 0-3",
		"0000:13:00.0 mlx5_0 ib0 0 0-3",
		"0000:14:00.0 mlx5_1 ib1 0 0-3",
		"0000:15:00.0 mlx5_1 eth0 0 0-3" } },
	/* Only the step's GPUs split the set: 2 GPUs over 3 interfaces. */
	{ "local:shared-nic.xml", "1,3", 2, NULL, {
		"0000:13:00.0 mlx5_0 ib0 0 0-3",
		"0000:15:00.0 mlx5_1 ib1,eth0 0 0-3" } },
	{ "local:shared-nic.xml", "2", 1, NULL, {
		"0000:14:00.0 mlx5_0,mlx5_1 ib0,ib1,eth0 0 0-3" } },
	/* Hand-made: no NIC at all. */
	{ "local:no-nic.xml", "0,1", 2, NULL, {
		"0000:12:00.0 - - 0 0-1",
		"0000:82:00.0 - - 1 2-3" } },
	{ "local:no-nic.xml", "", 4, NULL, {
		"- - - 0 0-1",
		"- - - 0 0-1",
		"- - - 1 2-3",
		"- - - 1 2-3" } },
};

static const char *dash(const char *s) { return s[0] ? s : "-"; }

static int run_case(const struct expect *c, const char *real, const char *local)
{
	char path[8192], err[256], got[5 * DL_MAP_LIST];
	int gpus[DL_MAP_MAX_GPUS], ng = 0, rv = -1;
	struct dl_map *m = NULL;
	hwloc_bitmap_t allowed = NULL;
	const char *name = strchr(c->file, ':') + 1;

	snprintf(path, sizeof(path), "%s/%s", strncmp(c->file, "real:", 5) ? local : real, name);
	if (c->gpus[0] && (ng = dl_map_parse_index_list(c->gpus, gpus, DL_MAP_MAX_GPUS)) < 0) {
		fprintf(stderr, "FAIL %s: bad GPU list %s in the test\n", name, c->gpus);
		return -1;
	}
	if (!(m = dl_map_open(path, err, sizeof(err)))) {
		fprintf(stderr, "FAIL %s: %s\n", name, err);
		return -1;
	}
	if (c->allowed) {
		allowed = hwloc_bitmap_alloc();
		if (!allowed || hwloc_bitmap_list_sscanf(allowed, c->allowed) < 0) {
			fprintf(stderr, "FAIL %s: bad allowed list %s\n", name, c->allowed);
			goto out;
		}
	}
	rv = 0;
	for (int r = 0; r < c->ntasks; r++) {
		struct dl_map_task t;

		if (dl_map_task(m, gpus, ng, -1, r, c->ntasks, allowed, 1, &t, err, sizeof(err)) < 0) {
			fprintf(stderr, "FAIL %s gpus=%s task %d: %s\n", name, c->gpus, r, err);
			rv = -1;
			continue;
		}
		snprintf(got, sizeof(got), "%s %s %s %s %s", dash(t.busid), dash(t.hca), dash(t.ifname),
			 dash(t.numa), dash(t.cpus));
		dl_map_task_clear(&t);
		if (strcmp(got, c->rows[r]) != 0) {
			fprintf(stderr, "FAIL %s gpus=%s task %d/%d:\n  expected %s\n  got      %s\n",
				name, c->gpus, r, c->ntasks, c->rows[r], got);
			rv = -1;
		}
	}
	if (rv == 0)
		printf("ok   %s gpus=%s tasks=%d%s%s\n", name, c->gpus, c->ntasks,
		       c->allowed ? " allowed=" : "", c->allowed ? c->allowed : "");
out:
	hwloc_bitmap_free(allowed);
	dl_map_close(m);
	return rv;
}

/* Errors are one line naming what is wrong, and never a crash. */
static int check_errors(const char *local)
{
	char path[8192], err[256] = "";
	int idx[8], gpus[1] = { 7 }, rv = 0;
	struct dl_map *m;
	struct dl_map_task t;

	if (dl_map_open("/nonexistent/topo.xml", err, sizeof(err)) || !strstr(err, "/nonexistent/topo.xml")) {
		fprintf(stderr, "FAIL missing XML: error \"%s\" does not name the file\n", err);
		rv = -1;
	}
	snprintf(path, sizeof(path), "%s/no-nic.xml", local);
	if (!(m = dl_map_open(path, err, sizeof(err)))) {
		fprintf(stderr, "FAIL %s\n", err);
		return -1;
	}
	if (dl_map_task(m, gpus, 1, -1, 0, 1, NULL, 1, &t, err, sizeof(err)) == 0 || !strstr(err, "GPU 7")) {
		fprintf(stderr, "FAIL GPU 7 of a 2-GPU topology: \"%s\"\n", err);
		rv = -1;
	}
	dl_map_close(m);
	if (dl_map_parse_index_list("0-2,5", idx, 8) != 4 || idx[3] != 5 ||
	    dl_map_parse_index_list("1,x", idx, 8) != -1 || dl_map_parse_index_list("3-1", idx, 8) != -1 ||
	    dl_map_parse_index_list("0-9", idx, 8) != -1 ||
	    /* From the job environment: huge, signed, blank-led or wrapping
	     * indexes are refused (9223372036854775807 overflowed the loop). */
	    dl_map_parse_index_list("9223372036854775807", idx, 8) != -1 ||
	    dl_map_parse_index_list("0-9223372036854775807", idx, 8) != -1 ||
	    dl_map_parse_index_list("4294967296", idx, 8) != -1 || dl_map_parse_index_list(" 1", idx, 8) != -1 ||
	    dl_map_parse_index_list("-1", idx, 8) != -1 || dl_map_parse_index_list("1-+2", idx, 8) != -1 ||
	    dl_map_parse_index_list("65535", idx, 8) != 1 || idx[0] != 65535) {
		fprintf(stderr, "FAIL dl_map_parse_index_list\n");
		rv = -1;
	}
	if (rv == 0)
		printf("ok   errors\n");
	return rv;
}

int main(void)
{
	const char *src = getenv("DLJOB_SRCDIR");
	char real[4096], local[4096];
	int fail = 0, nfix = 0;
	DIR *d;
	struct dirent *e;

	if (!src)
		src = ".";
	snprintf(real, sizeof(real), "%s/tests/slurm/topologies/real", src);
	snprintf(local, sizeof(local), "%s/tests/slurm/topologies", src);

	if (!(d = opendir(real))) {
		fprintf(stderr, "FAIL fixtures directory %s is missing (set DLJOB_SRCDIR to the source tree)\n", real);
		return 1;
	}
	while ((e = readdir(d))) {
		size_t n = strlen(e->d_name);
		int found = 0;

		if (n < 5 || strcmp(e->d_name + n - 4, ".xml") != 0)
			continue;
		nfix++;
		for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
			if (!strncmp(cases[i].file, "real:", 5) && !strcmp(cases[i].file + 5, e->d_name))
				found = 1;
		if (!found) {
			fprintf(stderr, "FAIL fixture %s/%s has no expected mapping in test_map.c\n",
				real, e->d_name);
			fail = 1;
		}
	}
	closedir(d);
	if (nfix == 0) {
		fprintf(stderr, "FAIL no *.xml in %s\n", real);
		fail = 1;
	}

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		if (run_case(&cases[i], real, local) < 0)
			fail = 1;
	if (check_errors(local) < 0)
		fail = 1;
	printf("%s\n", fail ? "FAIL" : "PASS");
	return fail;
}
