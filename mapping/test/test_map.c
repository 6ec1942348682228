/* GPU -> NIC -> NUMA/CPU mapping on real and hand-made hwloc topologies.
 *
 * Real topologies are in mapping/test/topologies/real (where each one comes
 * from, and its licence, is in its SOURCES.md); hand-made ones are in
 * mapping/test/topologies.
 * The expected answers were worked out by reading each tree
 * (lstopo-no-graphics --input FILE) against the rules in mapping/mapping.h.
 * Every *.xml of both directories must have expectations here, so a new
 * fixture cannot go untested; mapping/test/topologies/bad holds files that
 * kill hwloc itself, which must fail cleanly (check_errors). */
#include "config.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "mapping/mapping.h"

/* Under AddressSanitizer the mapping sets no address-space cap (mapping/load.c):
 * memory is not checked there. */
#if defined(__SANITIZE_ADDRESS__)
#define MAP_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MAP_ASAN 1
#endif
#endif
#ifndef MAP_ASAN
#define MAP_ASAN 0
#endif

struct expect {
	const char *file;    /* "real:NAME" or "local:NAME" */
	const char *gpus;    /* step GPUs (SLURM_STEP_GPUS syntax), "" for none */
	int ntasks;
	const char *within;  /* list of the CPUs to plan in (the step's), NULL: all */
	const char *allowed; /* hwloc list of allowed CPUs, NULL: all */
	/* one row per task: "BUSID HCAS IFNAMES NUMA CPUS[ shared]", "-" for
	 * empty; CPUS are the bound ones (within allowed) */
	const char *rows[16];
	const char *why;     /* NULL, or a part of task 0's rules line */
};

/* Reasoning, from each tree (lstopo-no-graphics --input FILE) and the
 * rules in mapping/mapping.h.  "Old" notes what the rules before the
 * locality split gave, where it differs. */
static const struct expect cases[] = {
	/* JUWELS Booster: each A100 shares a PEX switch with one HDR HCA (1:1)
	 * whose port netdev is ibN.  NPS4: each GPU's non-I/O ancestor is a
	 * Group equal to its NUMA node (6 cores), so there is no smaller
	 * locality and one task per NUMA node gets all of it.  The two i350
	 * 1 GbE ports (link 0.5 GB/s) are management and never chosen. */
	{ "real:topo.jwb0004.xml", "0-3", 4, NULL, NULL, {
		"0000:03:00.0 mlx5_0 ib0 3 18-23,66-71",
		"0000:44:00.0 mlx5_1 ib1 1 6-11,54-59",
		"0000:84:00.0 mlx5_2 ib2 7 42-47,90-95",
		"0000:c4:00.0 mlx5_3 ib3 5 30-35,78-83" }, "ifname: the netdev of its HCA port" },
	/* Same node, what Slurm allowed restricts the CPUs; a disjoint allowed
	 * set is kept as it is rather than binding to nothing. */
	{ "real:topo.jwb0004.xml", "0,1", 2, NULL, "0-20", {
		"0000:03:00.0 mlx5_0 ib0 3 18-20",
		"0000:44:00.0 mlx5_1 ib1 1 6-11" }, NULL },
	{ "real:topo.jwb0004.xml", "2", 1, NULL, "0-1", {
		"0000:84:00.0 mlx5_2 ib2 7 0-1" }, NULL },
	/* XE8640, SNC4: each H100 has its own switch and a Group = its NUMA
	 * node (14 cores); 4e shares its switch with the dual-port CX-6 (both
	 * ports: both port netdevs), 5f with a CX-7, db with a CX-7; cb has no
	 * HCA in its switch, the nearest is db's in the same L3 (package), and
	 * one HCA for two GPUs is shared.  The BCM5720 ports (0.6 GB/s) are
	 * management. */
	{ "real:ipa20.xml", "0-3", 4, NULL, NULL, {
		"0000:4e:00.0 mlx5_0,mlx5_1 hsi0,ibs2f1 3 42-55,154-167",
		"0000:5f:00.0 mlx5_2 ibp94s0 1 14-27,126-139",
		"0000:cb:00.0 mlx5_3 ibp218s0 7 98-111,210-223",
		"0000:db:00.0 mlx5_3 ibp218s0 5 70-83,182-195" }, "ifname: the netdevs of its HCA ports" },
	/* More tasks than GPUs: round-robin; the 2 tasks of a GPU split its
	 * NUMA node's 14 cores 7/7 (old: both got all 14). */
	{ "real:ipa20.xml", "1,2", 4, NULL, NULL, {
		"0000:5f:00.0 mlx5_2 ibp94s0 1 14-20,126-132",
		"0000:cb:00.0 mlx5_3 ibp218s0 7 98-104,210-216",
		"0000:5f:00.0 mlx5_2 ibp94s0 1 21-27,133-139",
		"0000:cb:00.0 mlx5_3 ibp218s0 7 105-111,217-223" }, "cpus: NUMA 1 split 2 ways: 7 cores" },
	/* Tioga: 8 MI250X GCDs (AMD class 0x0380), I/O on L3 caches (8 cores
	 * each, 2 per NUMA node), 2 GCDs per NUMA node, one Slingshot NIC per
	 * NUMA node in one of the two L3s, no OpenFabrics device.  Each GCD's
	 * task gets its own L3 (old: both GCDs of a NUMA node got all 16
	 * cores).  Interfaces: the Cassini NICs are high-speed (HPE vendor,
	 * 31.5 GB/s link); the i210 ens2 (0.25 GB/s) is management, so d1,
	 * which meets hsi2 and ens2 both at the NUMA node's Group, gets hsi2
	 * by class, not by hop count; the two GCDs of a NUMA node share its
	 * one NIC. */
	{ "real:eas-tioga.xml", "0-7", 8, NULL, NULL, {
		"0000:c1:00.0 - hsi0 3 48-55,112-119",
		"0000:c6:00.0 - hsi0 3 56-63,120-127",
		"0000:c9:00.0 - hsi1 1 16-23,80-87",
		"0000:ce:00.0 - hsi1 1 24-31,88-95",
		"0000:d1:00.0 - hsi2 0 0-7,64-71",
		"0000:d6:00.0 - hsi2 0 8-15,72-79",
		"0000:d9:00.0 - hsi3 2 32-39,96-103",
		"0000:de:00.0 - hsi3 2 40-47,104-111" }, "cpus: L3Cache P#6: 8 cores" },
	/* Two tasks on one GCD: its L3 P#6 is split 4/4, then the rest of NUMA
	 * 3 (L3 P#7, where no task's GPU is) is split 4/4. */
	{ "real:eas-tioga.xml", "0", 2, NULL, NULL, {
		"0000:c1:00.0 - hsi0 3 48-51,56-59,112-115,120-123",
		"0000:c1:00.0 - hsi0 3 52-55,60-63,116-119,124-127" },
		"cpus: L3Cache P#6 split 2 ways: 4 cores + rest of NUMA 3 split 2 ways: 4 cores" },
	/* Planned within the step's CPUs (a shared node): half of L3 P#6 and
	 * half of L3 P#7, both threads.  The GPU's L3 part (4 cores) is split
	 * 2/2 first, then the rest of NUMA 3 that the step owns (4 cores of
	 * L3 P#7) 2/2 (old: the plan split the whole NUMA node as above and
	 * Slurm's set cut task 0 to 52-55,116-119, task 1 to nothing: it was
	 * given all of the set, on task 0's CPUs). */
	{ "real:eas-tioga.xml", "0", 2, "52-59,116-123", "52-59,116-123", {
		"0000:c1:00.0 - hsi0 3 52-53,56-57,116-117,120-121",
		"0000:c1:00.0 - hsi0 3 54-55,58-59,118-119,122-123" },
		"cpus: L3Cache P#6 split 2 ways: 2 cores + rest of NUMA 3 split 2 ways: 2 cores" },
	/* Only the first hardware thread of 4 cores: each core counts by the
	 * part of it the step owns (old: no core lay wholly inside the set,
	 * so no task got any CPU). */
	{ "real:eas-tioga.xml", "0", 2, "48-51", NULL, {
		"0000:c1:00.0 - hsi0 3 48-49",
		"0000:c1:00.0 - hsi0 3 50-51" }, "cpus: NUMA 3 split 2 ways: 2 cores" },
	/* Tuolumne, MI300A in CPX mode: one GPU per PCI function (class 0x1200)
	 * although each carries 6 rsmi devices; one Slingshot NIC per APU on
	 * the GPU's host bridge; the APU's package is its NUMA node (24
	 * cores).  The i210 enp129s0 in package 0 is management. */
	{ "real:tuo.CPX.xml", "0-3", 4, NULL, NULL, {
		"0000:02:00.0 - hsi0 0 0-23,96-119",
		"0001:02:00.0 - hsi1 1 24-47,120-143",
		"0002:02:00.0 - hsi2 2 48-71,144-167",
		"0003:02:00.0 - hsi3 3 72-95,168-191" }, "ifname: nearest high-speed: same host bridge" },
	/* Lassen, hwloc 1.x XML: the ASPEED VGA is not a GPU; the socket's
	 * ConnectX-5 has 2 PCI functions (mlx5_0/hsi0, mlx5_1/hsi1), split
	 * between the socket's 2 V100s, and each GPU's interface is its own
	 * port's IPoIB netdev (old: hsi0,hsi1 for the first GPU and the
	 * BCM5719 1 GbE enP5p1s0f0,enP5p1s0f1 for the second).  The 2 GPUs of
	 * a socket split its 20 cores 10/10 (old: both got 8-87); the CPU-less
	 * GPU-memory NUMA nodes 252-255 are not the GPUs' memory. */
	{ "real:coral-lassen-hwloc1.xml", "0-3", 4, NULL, NULL, {
		"0004:04:00.0 mlx5_0 hsi0 0 8-47",
		"0004:05:00.0 mlx5_1 hsi1 0 48-87",
		"0035:03:00.0 mlx5_2 hsi2 8 96-135",
		"0035:04:00.0 mlx5_3 hsi3 8 136-175" }, "hca: nearest: same Group, split: 2 GPUs over 2" },
	/* p5en (trimmed, no Core/PU objects: CPUs come from the NUMA cpusets):
	 * two H200 per Nitro switch with 4 EFA and 4 ENA, so 2 of each per
	 * GPU; EFA devices have no netdev, so the ENA (Amazon, high-speed) are
	 * chosen by nearness.  4 GPUs per package = NUMA node: its 96 CPUs in
	 * two runs (0-47, 96-143, thread i+96 beside i) are split 4 ways, the
	 * i-th CPU of each run together (old: all 4 got 0-47,96-143). */
	{ "real:p5en.48xl-topo.xml", "0-7", 8, NULL, NULL, {
		"0000:59:00.0 rdmap85s0,rdmap86s0 enp71s0,enp72s0 0 0-11,96-107",
		"0000:5a:00.0 rdmap87s0,rdmap88s0 enp73s0,enp74s0 0 12-23,108-119",
		"0000:72:00.0 rdmap110s0,rdmap111s0 enp96s0,enp97s0 0 24-35,120-131",
		"0000:73:00.0 rdmap112s0,rdmap113s0 enp98s0,enp99s0 0 36-47,132-143",
		"0000:8b:00.0 rdmap135s0,rdmap136s0 enp122s0,enp123s0 1 48-59,144-155",
		"0000:8c:00.0 rdmap137s0,rdmap138s0 enp124s0,enp125s0 1 60-71,156-167",
		"0000:a4:00.0 rdmap160s0,rdmap161s0 enp146s0,enp147s0 1 72-83,168-179",
		"0000:a5:00.0 rdmap162s0,rdmap163s0 enp148s0,enp149s0 1 84-95,180-191" },
		"cpus: NUMA 0 split 4 ways: 12 CPUs" },
	/* A step with one GPU of a pair gets all 4 EFA of the switch, and the
	 * whole NUMA node. */
	{ "real:p5en.48xl-topo.xml", "5", 1, NULL, NULL, {
		"0000:8c:00.0 rdmap135s0,rdmap136s0,rdmap137s0,rdmap138s0 enp122s0,enp123s0,enp124s0,enp125s0 1 48-95,144-191" },
		NULL },

	/* Hand-made: 2 sockets x 2 switches x (2 GPUs + 1 HCA), 4 cores per
	 * socket: 4 GPUs per NUMA node, 1 core each (old: 0-3 for all 4). */
	{ "local:2s-8gpu-4hca.xml", "0-7", 8, NULL, NULL, {
		"0000:12:00.0 mlx5_0 ib0 0 0",
		"0000:13:00.0 mlx5_0 ib0 0 1",
		"0000:22:00.0 mlx5_1 ib1 0 2",
		"0000:23:00.0 mlx5_1 ib1 0 3",
		"0000:82:00.0 mlx5_2 ib2 1 4",
		"0000:83:00.0 mlx5_2 ib2 1 5",
		"0000:92:00.0 mlx5_3 ib3 1 6",
		"0000:93:00.0 mlx5_3 ib3 1 7" }, "cpus: NUMA 0 split 4 ways: 1 core" },
	/* Within half of socket 0 (a job beside the step has cores 0-1): GPUs
	 * 0 and 1 get one of the step's cores each (old: the whole socket
	 * split 0-1 / 2-3, and Slurm's 2-3 left task 0 nothing: both tasks
	 * ran on 2-3). */
	{ "local:2s-8gpu-4hca.xml", "0,1", 2, "2-3", "2-3", {
		"0000:12:00.0 mlx5_0 ib0 0 2",
		"0000:13:00.0 mlx5_0 ib0 0 3" }, "cpus: NUMA 0 split 2 ways: 1 core" },
	/* The step owns only the far socket: the GPUs keep their own NUMA
	 * node for memory and NIC, and split the step's cores there. */
	{ "local:2s-8gpu-4hca.xml", "0-3", 4, "4-7", "4-7", {
		"0000:12:00.0 mlx5_0 ib0 0 4",
		"0000:13:00.0 mlx5_0 ib0 0 5",
		"0000:22:00.0 mlx5_1 ib1 0 6",
		"0000:23:00.0 mlx5_1 ib1 0 7" }, "cpus: CPUs left outside its NUMA node split 4 ways: 1 core" },
	/* Fewer cores than tasks: one core of each socket for 8 tasks, the 4
	 * tasks of a socket share its core, and say so. */
	{ "local:2s-8gpu-4hca.xml", "0-7", 8, "1,5", "1,5", {
		"0000:12:00.0 mlx5_0 ib0 0 1 shared",
		"0000:13:00.0 mlx5_0 ib0 0 1 shared",
		"0000:22:00.0 mlx5_1 ib1 0 1 shared",
		"0000:23:00.0 mlx5_1 ib1 0 1 shared",
		"0000:82:00.0 mlx5_2 ib2 1 5 shared",
		"0000:83:00.0 mlx5_2 ib2 1 5 shared",
		"0000:92:00.0 mlx5_3 ib3 1 5 shared",
		"0000:93:00.0 mlx5_3 ib3 1 5 shared" }, "cpus: NUMA 0: 4 tasks on 1 core, shared" },
	/* 5 tasks on GPU 0 with only far cores 4-7: the 4 cores are shared by
	 * 5 tasks, task j on core j*4/5. */
	{ "local:2s-8gpu-4hca.xml", "0", 5, "4-7", NULL, {
		"0000:12:00.0 mlx5_0 ib0 0 4 shared",
		"0000:12:00.0 mlx5_0 ib0 0 4 shared",
		"0000:12:00.0 mlx5_0 ib0 0 5",
		"0000:12:00.0 mlx5_0 ib0 0 6",
		"0000:12:00.0 mlx5_0 ib0 0 7" }, "cpus: CPUs left outside its NUMA node: 5 tasks on 4 cores, shared" },
	/* Slurm's indexes are bus-id order whatever order the step lists; one
	 * task per socket gets the whole socket. */
	{ "local:2s-8gpu-4hca.xml", "6,1", 2, NULL, NULL, {
		"0000:92:00.0 mlx5_3 ib3 1 4-7",
		"0000:13:00.0 mlx5_0 ib0 0 0-3" }, NULL },
	/* No GPU in the step: NUMA nodes split between tasks (0 and 1 on
	 * socket 0, which they split 2/2; old: both 0-3), NICs nearest to the
	 * task's NUMA node, balanced between the tasks that share them. */
	{ "local:2s-8gpu-4hca.xml", "", 3, NULL, NULL, {
		"- mlx5_0 ib0 0 0-1",
		"- mlx5_1 ib1 0 2-3",
		"- mlx5_2,mlx5_3 ib2,ib3 1 4-7" }, "numa: NUMA nodes split between 3 tasks without GPU" },
	/* More tasks than cores: 6 tasks on GPU 0's 4-core NUMA node share,
	 * task j on core j*4/6, and the table says so. */
	{ "local:2s-8gpu-4hca.xml", "0", 6, NULL, NULL, {
		"0000:12:00.0 mlx5_0 ib0 0 0 shared",
		"0000:12:00.0 mlx5_0 ib0 0 0 shared",
		"0000:12:00.0 mlx5_0 ib0 0 1",
		"0000:12:00.0 mlx5_0 ib0 0 2 shared",
		"0000:12:00.0 mlx5_0 ib0 0 2 shared",
		"0000:12:00.0 mlx5_0 ib0 0 3" }, "cpus: NUMA 0: 6 tasks on 4 cores, shared" },
	/* Hand-made: 4 GPUs share one switch with 2 HCAs (ib0, ib1 their port
	 * netdevs) and a 40 GbE X710 eth0 (high-speed by its link): 4 GPUs
	 * over 2 HCAs -> 0,0,1,1, and each GPU's interface is its HCA's port
	 * (old: GPU 3 got eth0, the split of the 3 interfaces). */
	{ "local:shared-nic.xml", "0-3", 4, NULL, NULL, {
		"0000:12:00.0 mlx5_0 ib0 0 0",
		"0000:13:00.0 mlx5_0 ib0 0 1",
		"0000:14:00.0 mlx5_1 ib1 0 2",
		"0000:15:00.0 mlx5_1 ib1 0 3" }, "hca: nearest: same PCIe switch, split: 4 GPUs over 2" },
	/* A split HCA: 2 GPUs over 2 ports, each GPU its own port's netdev
	 * (old: the second GPU got "ib1,eth0", whatever was left). */
	{ "local:shared-nic.xml", "1,3", 2, NULL, NULL, {
		"0000:13:00.0 mlx5_0 ib0 0 0-1",
		"0000:15:00.0 mlx5_1 ib1 0 2-3" }, NULL },
	{ "local:shared-nic.xml", "2", 1, NULL, NULL, {
		"0000:14:00.0 mlx5_0,mlx5_1 ib0,ib1 0 0-3" }, NULL },
	/* Hand-made: a 1 GbE i350 (eno1, link 0.5 GB/s) in GPU 0's own switch,
	 * Slingshot hsn0 on its own host bridge and hsn1 in GPU 1's switch.
	 * GPU 0 gets the nearest high-speed interface, hsn0 (same package,
	 * fewer hops than hsn1), never eno1 (old: eno1, same switch). */
	{ "local:mgmt-near.xml", "0,1", 2, NULL, NULL, {
		"0000:12:00.0 - hsn0 0 0-1",
		"0000:32:00.0 - hsn1 0 2-3" }, "ifname: nearest high-speed: same Package P#0" },
	/* The same with InfiniBand: mlx5_0/ib0 on its own host bridge,
	 * mlx5_1/ib1 in GPU 1's switch.  GPU 0's HCA is mlx5_0 (same package,
	 * fewer hops) and its interface that HCA port's IPoIB ib0, never eno1
	 * (old: mlx5_0 and eno1). */
	{ "local:mgmt-near-ib.xml", "0,1", 2, NULL, NULL, {
		"0000:12:00.0 mlx5_0 ib0 0 0-1",
		"0000:32:00.0 mlx5_1 ib1 0 2-3" }, "hca: nearest: same Package P#0; ifname: the netdev of its HCA port" },
	/* No high-speed interface at all: an ASPEED BMC function (bmc0, link
	 * unknown) in GPU 0's switch, BCM5719 ports (link unknown: neither
	 * class) eth0 on its own host bridge and eth1 in GPU 1's switch.  The
	 * ordinary ports beat the BMC: GPU 0 gets eth0 (same package, fewer
	 * hops than eth1), never bmc0 (old: bmc0, same switch). */
	{ "local:bmc-near.xml", "0,1", 2, NULL, NULL, {
		"0000:12:00.0 - eth0 0 0-1",
		"0000:32:00.0 - eth1 0 2-3" }, "ifname: nearest (no high-speed interface on the node): same Package P#0" },
	/* Hand-made: no NIC at all. */
	{ "local:no-nic.xml", "0,1", 2, NULL, NULL, {
		"0000:12:00.0 - - 0 0-1",
		"0000:82:00.0 - - 1 2-3" }, NULL },
	/* 4 tasks without GPU on 2 sockets of 2 cores: one core each (old:
	 * 0-1 for the first two, 2-3 for the others). */
	{ "local:no-nic.xml", "", 4, NULL, NULL, {
		"- - - 0 0",
		"- - - 0 1",
		"- - - 1 2",
		"- - - 1 3" }, NULL },
	/* Tasks without GPU within socket 1 only: they split the NUMA nodes
	 * that hold the step's CPUs (old: NUMA 0 for task 0, on CPUs Slurm
	 * did not give). */
	{ "local:no-nic.xml", "", 2, "2-3", "2-3", {
		"- - - 1 2",
		"- - - 1 3" }, "numa: NUMA nodes split between 2 tasks without GPU; cpus: NUMA 1 split 2 ways: 1 core" },
	/* 8 tasks on 4 cores: two per core, said so. */
	{ "local:no-nic.xml", "", 8, NULL, NULL, {
		"- - - 0 0 shared", "- - - 0 0 shared", "- - - 0 1 shared", "- - - 0 1 shared",
		"- - - 1 2 shared", "- - - 1 2 shared", "- - - 1 3 shared", "- - - 1 3 shared" },
		"cpus: NUMA 0: 4 tasks on 2 cores, shared" },
};

static const char *dash(const char *s) { return s[0] ? s : "-"; }

static int run_case(const struct expect *c, const char *real, const char *local)
{
	char path[8192], err[256], got[5 * DL_MAP_LIST];
	int gpus[DL_MAP_MAX_GPUS], ng = 0, rv = -1;
	struct dl_map *m = NULL;
	struct dl_map_plan *plan = NULL;
	hwloc_bitmap_t allowed = NULL, bound = NULL, within = NULL;
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
	if (c->within && (!(within = hwloc_bitmap_alloc()) || dl_map_parse_cpu_list(c->within, within) <= 0)) {
		fprintf(stderr, "FAIL %s: bad within list %s\n", name, c->within);
		goto out;
	}
	if (!(plan = dl_map_plan(m, gpus, ng, NULL, c->ntasks, within, 1, err, sizeof(err)))) {
		fprintf(stderr, "FAIL %s gpus=%s: %s\n", name, c->gpus, err);
		goto out;
	}
	if (!(bound = hwloc_bitmap_alloc()))
		goto out;
	rv = 0;
	for (int r = 0; r < c->ntasks; r++) {
		const struct dl_map_task *t = dl_map_plan_task(plan, r);
		char cpus[DL_MAP_LIST];

		if (dl_map_bound(t, allowed, bound) < 0) {
			rv = -1;
			break;
		}
		hwloc_bitmap_list_snprintf(cpus, sizeof(cpus), bound);
		snprintf(got, sizeof(got), "%s %s %s %s %s%s", dash(t->busid), dash(t->hca), dash(t->ifname),
			 dash(t->numa), dash(cpus), t->shared ? " shared" : "");
		if (strcmp(got, c->rows[r]) != 0) {
			fprintf(stderr, "FAIL %s gpus=%s task %d/%d:\n  expected %s\n  got      %s\n",
				name, c->gpus, r, c->ntasks, c->rows[r], got);
			rv = -1;
		}
	}
	/* The table dljob topo and --dl-bind=verbose print: task 0's line of
	 * rules says what decided it. */
	if (c->why) {
		char *text = NULL, *line, *end;
		size_t len = 0;
		FILE *f = open_memstream(&text, &len);

		if (!f) {
			rv = -1;
			goto out;
		}
		dl_map_plan_print(f, plan, name);
		fclose(f);
		line = text ? strstr(text, " why: ") : NULL;
		if (line && (end = strchr(line, '\n')))
			*end = '\0';
		if (!line || !strstr(line, c->why)) {
			fprintf(stderr, "FAIL %s gpus=%s: task 0's rules line\n  %s\n  has no \"%s\"\n", name, c->gpus,
				line ? line : "(none)", c->why);
			rv = -1;
		}
		free(text);
	}
	if (getenv("DLJOB_MAP_PRINT"))
		dl_map_plan_print(stdout, plan, name);
	/* Planned within a set: every task's CPUs lie in it, and are its own
	 * unless the table says they are shared. */
	for (int r = 0; within && rv == 0 && r < c->ntasks; r++) {
		const struct dl_map_task *t = dl_map_plan_task(plan, r);

		if (hwloc_bitmap_iszero(t->cpuset) || !hwloc_bitmap_isincluded(t->cpuset, within)) {
			fprintf(stderr, "FAIL %s: task %d's CPUs %s are not within %s\n", name, r, t->cpus, c->within);
			rv = -1;
		}
		for (int s = 0; s < c->ntasks; s++)
			if (s != r && !t->shared && hwloc_bitmap_intersects(t->cpuset, dl_map_plan_task(plan, s)->cpuset)) {
				fprintf(stderr, "FAIL %s: tasks %d and %d overlap without saying so\n", name, r, s);
				rv = -1;
			}
	}
	if (rv == 0)
		printf("ok   %s gpus=%s tasks=%d%s%s%s%s\n", name, c->gpus, c->ntasks,
		       c->allowed ? " allowed=" : "", c->allowed ? c->allowed : "",
		       c->within ? " within=" : "", c->within ? c->within : "");
out:
	hwloc_bitmap_free(within);
	hwloc_bitmap_free(allowed);
	hwloc_bitmap_free(bound);
	dl_map_plan_free(plan);
	dl_map_close(m);
	return rv;
}

/* Errors are one line naming what is wrong, and never a crash. */
static int check_errors(const char *local)
{
	char path[8192], err[256] = "";
	int idx[8], gpus[1] = { 7 }, rv = 0;
	struct dl_map *m;
	struct dl_map_plan *plan;
	hwloc_bitmap_t set = NULL;
	static const struct {
		const char *file, *cores, *want, *err;
	} cores[] = {
		{ "real/eas-tioga.xml", "1,8", "1,8,65,72", "" },
		{ "real/eas-tioga.xml", "62-63", "62-63,126-127", "" },
		{ "real/eas-tioga.xml", "64", "", "Slurm's core 64 is not among the topology's 64 cores" },
		{ "real/eas-tioga.xml", "1-x", "", "Slurm's core list is not a list of core numbers" },
		{ "2s-8gpu-4hca.xml", "4-7", "4-7", "" },
		{ "real/p5en.48xl-topo.xml", "0", "", "the topology has no Core objects" },
	};

	if (dl_map_open("/nonexistent/topo.xml", err, sizeof(err)) || !strstr(err, "/nonexistent/topo.xml")) {
		fprintf(stderr, "FAIL missing XML: error \"%s\" does not name the file\n", err);
		rv = -1;
	}
	/* A topology= mistake is one line naming the file, never a crash:
	 * empty, a directory, a FIFO (not waited on), not XML, cut short. */
	{
		char dir[] = "/tmp/dljob-test-map-XXXXXX", f[4096];
		static const char *const bad[] = { "", "not xml at all", "<?xml version=\"1.0\"?>\n<topology version=\"2.0\">\n  <object type=\"Machine\" os_index=\"0\" cpuset=\"0x1\"",
			"<topology version=\"2.0\"><object type=\"Bogus\"/></topology>" };

		if (!mkdtemp(dir)) {
			fprintf(stderr, "FAIL mkdtemp\n");
			return -1;
		}
		snprintf(f, sizeof(f), "%s/fifo", dir);
		if (mkfifo(f, 0600) < 0 || dl_map_open(f, err, sizeof(err)) || !strstr(err, "not a regular file")) {
			fprintf(stderr, "FAIL a FIFO as topology: \"%s\"\n", err);
			rv = -1;
		}
		unlink(f);
		if (dl_map_open(dir, err, sizeof(err)) || !strstr(err, dir)) {
			fprintf(stderr, "FAIL a directory as topology: \"%s\"\n", err);
			rv = -1;
		}
		for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
			FILE *o;

			snprintf(f, sizeof(f), "%s/bad%zu.xml", dir, i);
			if (!(o = fopen(f, "w")) || fputs(bad[i], o) < 0 || fclose(o) != 0) {
				fprintf(stderr, "FAIL cannot write %s\n", f);
				return -1;
			}
			if ((m = dl_map_open(f, err, sizeof(err))) || !strstr(err, f)) {
				fprintf(stderr, "FAIL bad XML %zu: \"%s\"\n", i, err);
				dl_map_close(m);
				rv = -1;
			}
			unlink(f);
		}
		rmdir(dir);
	}
	/* Files that kill hwloc 2.9 itself (mapping/test/topologies/bad), under
	 * its libxml2 import and its own minimal parser: one line, no crash. */
	for (int parser = 0; parser < 2; parser++) {
		static const char *const killers[] = { "cut-attribute.xml", "no-complete-cpuset.xml" };

		setenv("HWLOC_LIBXML_IMPORT", parser ? "0" : "1", 1);
		for (size_t i = 0; i < sizeof(killers) / sizeof(killers[0]); i++) {
			snprintf(path, sizeof(path), "%s/bad/%s", local, killers[i]);
			if ((m = dl_map_open(path, err, sizeof(err))) || !strstr(err, path) ||
			    !strstr(err, "not a valid hwloc XML topology")) {
				fprintf(stderr, "FAIL %s (HWLOC_LIBXML_IMPORT=%d): \"%s\"\n", path, !parser, err);
				dl_map_close(m);
				rv = -1;
			}
		}
	}
	unsetenv("HWLOC_LIBXML_IMPORT");
	/* Files that make hwloc allocate gigabytes (bad/README.md): the child
	 * loads them under its cap, and this process only the child's export,
	 * so it never grows by the gigabyte (it did: 1 GB). */
	{
		static const char *const bombs[] = { "pu-bomb-refused.xml", "pu-bomb-loads.xml" };
		struct rusage ru;

		for (size_t i = 0; i < sizeof(bombs) / sizeof(bombs[0]); i++) {
			snprintf(path, sizeof(path), "%s/bad/%s", local, bombs[i]);
			m = dl_map_open(path, err, sizeof(err));
			if (i == 0 && (m || !strstr(err, path) || !strstr(err, "more than 256 MB"))) {
				fprintf(stderr, "FAIL %s: \"%s\"\n", path, m ? "loaded" : err);
				rv = -1;
			}
			dl_map_close(m);
		}
#if !MAP_ASAN
		if (getrusage(RUSAGE_SELF, &ru) == 0 && ru.ru_maxrss > 200 * 1024) {
			fprintf(stderr, "FAIL loading the bombs grew this process to %ld MB\n", ru.ru_maxrss / 1024);
			rv = -1;
		}
#else
		(void)ru;
#endif
	}
	snprintf(path, sizeof(path), "%s/no-nic.xml", local);
	if (!(m = dl_map_open(path, err, sizeof(err)))) {
		fprintf(stderr, "FAIL %s\n", err);
		return -1;
	}
	if ((plan = dl_map_plan(m, gpus, 1, NULL, 1, NULL, 1, err, sizeof(err))) || !strstr(err, "GPU 7")) {
		dl_map_plan_free(plan);
		fprintf(stderr, "FAIL GPU 7 of a 2-GPU topology: \"%s\"\n", err);
		rv = -1;
	}
	/* A step whose CPUs are none of the topology's. */
	if (!(set = hwloc_bitmap_alloc()) || dl_map_parse_cpu_list("100-101", set) != 2 ||
	    (plan = dl_map_plan(m, gpus, 0, NULL, 1, set, 1, err, sizeof(err))) ||
	    strcmp(err, "none of the CPUs 100-101 is in the topology (its CPUs: 0-3)") != 0) {
		dl_map_plan_free(plan);
		fprintf(stderr, "FAIL a plan within CPUs outside the topology: \"%s\"\n", err);
		rv = -1;
	}
	dl_map_close(m);
	/* Slurm's abstract cores: the i-th core of the machine, every thread. */
	for (size_t i = 0; set && i < sizeof(cores) / sizeof(cores[0]); i++) {
		char got[DL_MAP_LIST] = "";

		snprintf(path, sizeof(path), "%s/%s", local, cores[i].file);
		err[0] = '\0';
		if (!(m = dl_map_open(path, err, sizeof(err)))) {
			fprintf(stderr, "FAIL %s\n", err);
			rv = -1;
			continue;
		}
		if (dl_map_slurm_cores(m, cores[i].cores, set, err, sizeof(err)) == 0)
			hwloc_bitmap_list_snprintf(got, sizeof(got), set);
		if (strcmp(cores[i].want[0] ? got : err, cores[i].want[0] ? cores[i].want : cores[i].err) != 0) {
			fprintf(stderr, "FAIL Slurm's cores %s on %s: got \"%s\" / \"%s\"\n", cores[i].cores,
				cores[i].file, got, err);
			rv = -1;
		}
		dl_map_close(m);
	}
	if (!set || dl_map_parse_cpu_list("0-3,8", set) != 5 || dl_map_parse_cpu_list("", set) != -1 ||
	    dl_map_parse_cpu_list("3-1", set) != -1 || dl_map_parse_cpu_list(" 1", set) != -1 ||
	    dl_map_parse_cpu_list("1,,2", set) != -1 || dl_map_parse_cpu_list("65536", set) != -1) {
		fprintf(stderr, "FAIL dl_map_parse_cpu_list\n");
		rv = -1;
	}
	hwloc_bitmap_free(set);
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

/* Every *.xml of dir (cases named "PREFIX:NAME") has a case.  Returns the
 * number of files, or -1 when dir cannot be read or a file has no case. */
static int all_listed(const char *dir, const char *prefix)
{
	size_t pl = strlen(prefix);
	int nfix = 0, fail = 0;
	DIR *d;
	struct dirent *e;

	if (!(d = opendir(dir))) {
		fprintf(stderr, "FAIL fixtures directory %s is missing (set DLJOB_SRCDIR to the source tree)\n", dir);
		return -1;
	}
	while ((e = readdir(d))) {
		size_t n = strlen(e->d_name);
		int found = 0;

		if (n < 5 || strcmp(e->d_name + n - 4, ".xml") != 0)
			continue;
		nfix++;
		for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
			if (!strncmp(cases[i].file, prefix, pl) && !strcmp(cases[i].file + pl, e->d_name))
				found = 1;
		if (!found) {
			fprintf(stderr, "FAIL fixture %s/%s has no expected mapping in test_map.c\n", dir, e->d_name);
			fail = 1;
		}
	}
	closedir(d);
	if (nfix == 0)
		fprintf(stderr, "FAIL no *.xml in %s\n", dir);
	return fail || nfix == 0 ? -1 : nfix;
}

int main(void)
{
	const char *src = getenv("DLJOB_SRCDIR");
	char real[4096], local[4096];
	int fail = 0;

	if (!src)
		src = ".";
	snprintf(real, sizeof(real), "%s/mapping/test/topologies/real", src);
	snprintf(local, sizeof(local), "%s/mapping/test/topologies", src);
	if (all_listed(real, "real:") < 0 || all_listed(local, "local:") < 0)
		fail = 1;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		if (run_case(&cases[i], real, local) < 0)
			fail = 1;
	if (check_errors(local) < 0)
		fail = 1;
	printf("%s\n", fail ? "FAIL" : "PASS");
	return fail;
}
