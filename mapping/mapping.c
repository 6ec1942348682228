/* The GPU -> NIC -> NUMA/CPU plan of a node (rules in mapping/mapping.h). */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/err.h"
#include "mapping/mapping.h"

#define DL_MAP_MAX_NICS 256

enum { NIC_HCA, NIC_NET, NIC_KINDS };
/* Classes of network interfaces, best last (see mapping.h). */
enum { TIER_MGMT, TIER_OTHER, TIER_FAST };

struct dl_map {
	hwloc_topology_t topo;
	int ngpus;
	hwloc_obj_t gpu[DL_MAP_MAX_GPUS];   /* PCI functions, bus-id order */
	char busid[DL_MAP_MAX_GPUS][16];
	int nnics[NIC_KINDS];
	hwloc_obj_t nic[NIC_KINDS][DL_MAP_MAX_NICS]; /* OS devices, bus-id then name order */
	int tier[DL_MAP_MAX_NICS];          /* class of each NIC_NET device */
	int top_tier;                       /* the best class on the node */
	int nnuma;                          /* NUMA nodes with CPUs, OS index order */
	hwloc_obj_t numa[DL_MAP_MAX_NICS];
	int has_cores;                      /* the topology has Core objects */
};

struct dl_map_plan {
	int ntasks;
	struct dl_map_task task[];
};

static int is_gpu(hwloc_obj_t o)
{
	unsigned v = o->attr->pcidev.vendor_id, c = o->attr->pcidev.class_id;

	if (v == 0x10de)
		return c == 0x0300 || c == 0x0302;
	if (v == 0x1002)
		return c == 0x0380 || c == 0x1200;
	return 0;
}

static hwloc_obj_t pci_ancestor(hwloc_obj_t o)
{
	for (o = o->parent; o; o = o->parent)
		if (o->type == HWLOC_OBJ_PCI_DEVICE)
			return o;
	return NULL;
}

static int pci_cmp(hwloc_obj_t a, hwloc_obj_t b)
{
	const struct hwloc_pcidev_attr_s *x = &a->attr->pcidev, *y = &b->attr->pcidev;

	if (x->domain != y->domain)
		return x->domain < y->domain ? -1 : 1;
	if (x->bus != y->bus)
		return x->bus < y->bus ? -1 : 1;
	if (x->dev != y->dev)
		return x->dev < y->dev ? -1 : 1;
	if (x->func != y->func)
		return x->func < y->func ? -1 : 1;
	return 0;
}

static int gpu_qcmp(const void *a, const void *b)
{
	return pci_cmp(*(hwloc_obj_t const *)a, *(hwloc_obj_t const *)b);
}

static int nic_qcmp(const void *a, const void *b)
{
	hwloc_obj_t x = *(hwloc_obj_t const *)a, y = *(hwloc_obj_t const *)b;
	int c = pci_cmp(pci_ancestor(x), pci_ancestor(y));

	return c ? c : strcmp(x->name ? x->name : "", y->name ? y->name : "");
}

static int numa_qcmp(const void *a, const void *b)
{
	unsigned x = (*(hwloc_obj_t const *)a)->os_index, y = (*(hwloc_obj_t const *)b)->os_index;

	return x < y ? -1 : x > y;
}

/* The class of network interface o (on PCI function p), from what an hwloc
 * XML file keeps: the devices beside it on the same function, the PCI
 * class and vendor, and the PCIe link (GB/s, 0 when unknown). */
static int net_tier(const struct dl_map *m, hwloc_obj_t o)
{
	hwloc_obj_t p = pci_ancestor(o);
	const struct hwloc_pcidev_attr_s *a = &p->attr->pcidev;

	/* IPoIB or RoCE: the netdev of an OpenFabrics port. */
	for (int i = 0; i < m->nnics[NIC_HCA]; i++)
		if (pci_ancestor(m->nic[NIC_HCA][i]) == p)
			return TIER_FAST;
	if (a->class_id == 0x0207 || a->class_id == 0x0208)   /* InfiniBand, Fabric */
		return TIER_FAST;
	/* Mellanox/NVIDIA, HPE Cray (Slingshot Cassini), Amazon (EFA, ENA), Cornelis (Omni-Path). */
	if (a->vendor_id == 0x15b3 || a->vendor_id == 0x17db || a->vendor_id == 0x1d0f || a->vendor_id == 0x434e)
		return TIER_FAST;
	/* At least PCIe Gen3 x4: 25 Gb/s and up. */
	if (a->linkspeed >= 3.9f)
		return TIER_FAST;
	/* A BMC (ASPEED), or a link of 1 GB/s or less: a 1 GbE part. */
	if (a->vendor_id == 0x1a03 || (a->linkspeed > 0.0f && a->linkspeed < 1.0f))
		return TIER_MGMT;
	return TIER_OTHER;
}

/* hwloc discovery components that open a display, a socket or a GPU
 * driver (hwloc 2.9's list; see dl_map_open). */
static const char *const no_components[] = { "gl", "opencl", "cuda", "nvml", "rsmi", "levelzero" };

static struct dl_map *map_load(const char *buf, size_t len, const char *name, char *err, size_t errlen)
{
	struct dl_map *m = calloc(1, sizeof(*m));
	hwloc_obj_t o;
	int ok = 0;

	if (!m) {
		dl_errf(err, errlen, "out of memory");
		return NULL;
	}
	if (hwloc_topology_init(&m->topo) < 0) {
		dl_errf(err, errlen, "hwloc_topology_init: %s", strerror(errno));
		free(m);
		return NULL;
	}
	/* Inside slurmstepd (root, every job) hwloc may only read /proc, /sys
	 * and PCI config space.  Its gl component connects to X displays
	 * (:0-:9, abstract and file sockets, TCP 6000+: any local user can
	 * answer and never reply, hanging every step), opencl/cuda/nvml/rsmi/
	 * levelzero initialise GPU drivers.  GPUs are found from PCI data
	 * (vendor and class), NICs from sysfs; none of these components adds
	 * anything the mapping uses.  Blacklisted by name (hwloc >= 2.1),
	 * also for an XML topology, where they are not used anyway. */
	for (size_t i = 0; i < sizeof(no_components) / sizeof(no_components[0]); i++)
		/* EINVAL: no such component in this hwloc (its plugin is not
		 * installed), so there is nothing to keep out. */
		if (hwloc_topology_set_components(m->topo, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST,
						  no_components[i]) < 0 && errno != EINVAL) {
			dl_errf(err, errlen, "hwloc_topology_set_components(-%s): %s", no_components[i],
				 strerror(errno));
			goto out;
		}
	/* This machine's topology is the whole machine, with the CPUs and
	 * NUMA nodes a cgroup disallows, as Slurm's own (its core numbers
	 * count them, dl_map_slurm_cores): what the plan may use is said by
	 * dl_map_plan's within, not by where the caller happens to run. */
	if (!buf && hwloc_topology_set_flags(m->topo, HWLOC_TOPOLOGY_FLAG_INCLUDE_DISALLOWED) < 0) {
		dl_errf(err, errlen, "hwloc_topology_set_flags: %s", strerror(errno));
		goto out;
	}
	/* Without this filter hwloc drops every PCI and OS device. */
	if (hwloc_topology_set_io_types_filter(m->topo, HWLOC_TYPE_FILTER_KEEP_IMPORTANT) < 0) {
		dl_errf(err, errlen, "hwloc_topology_set_io_types_filter: %s", strerror(errno));
		goto out;
	}
	/* hwloc takes the size of an XML buffer with its ending 0 (as
	 * hwloc_topology_export_xmlbuffer makes it). */
	if (buf && hwloc_topology_set_xmlbuffer(m->topo, buf, (int)len + 1) < 0) {
		dl_errf(err, errlen, "%s: not an hwloc XML topology", name);
		goto out;
	}
	if (hwloc_topology_load(m->topo) < 0) {
		if (buf)
			dl_errf(err, errlen, "%s: not a valid hwloc XML topology", name);
		else
			dl_errf(err, errlen, "cannot load the topology of this machine: %s", strerror(errno));
		goto out;
	}

	/* A PU or NUMA node is a bit of the sets at its os_index: one without
	 * (a missing or misspelt os_index, which hwloc takes as 2^32-1) or
	 * with an absurd one makes hwloc allocate a set of 512 MB for it, and
	 * more such sets as it goes (mapping/test/topologies/bad).  In the
	 * child of xml_export_in_child those allocations fail under its cap
	 * and hwloc goes on without them; where such an object is left with
	 * its index, it is refused here, so no set of it is ever exported. */
	for (int t = 0; t < 2; t++) {
		hwloc_obj_type_t type = t ? HWLOC_OBJ_NUMANODE : HWLOC_OBJ_PU;
		for (o = NULL; (o = hwloc_get_next_obj_by_type(m->topo, type, o));)
			if (o->os_index >= DL_MAP_MAX_OS_INDEX) {
				if (o->os_index == HWLOC_UNKNOWN_INDEX)
					dl_errf(err, errlen, "%s: a %s without an os_index", name, t ? "NUMA node" : "PU");
				else
					dl_errf(err, errlen, "%s: a %s with os_index %u (at most %u)", name,
						 t ? "NUMA node" : "PU", o->os_index, DL_MAP_MAX_OS_INDEX - 1);
				goto out;
			}
	}

	for (o = NULL; (o = hwloc_get_next_pcidev(m->topo, o));) {
		if (!is_gpu(o))
			continue;
		if (m->ngpus == DL_MAP_MAX_GPUS) {
			dl_errf(err, errlen, "%s has more than %d GPUs", name, DL_MAP_MAX_GPUS);
			goto out;
		}
		m->gpu[m->ngpus++] = o;
	}
	qsort(m->gpu, m->ngpus, sizeof(m->gpu[0]), gpu_qcmp);
	for (int i = 0; i < m->ngpus; i++) {
		const struct hwloc_pcidev_attr_s *p = &m->gpu[i]->attr->pcidev;
		snprintf(m->busid[i], sizeof(m->busid[i]), "%04x:%02x:%02x.%01x",
			 p->domain, p->bus, p->dev, p->func);
	}

	for (o = NULL; (o = hwloc_get_next_osdev(m->topo, o));) {
		int k;

		if (o->attr->osdev.type == HWLOC_OBJ_OSDEV_OPENFABRICS)
			k = NIC_HCA;
		else if (o->attr->osdev.type == HWLOC_OBJ_OSDEV_NETWORK)
			k = NIC_NET;
		else
			continue;
		/* Only devices on a PCI function have a place in the PCI tree. */
		if (!o->name || !pci_ancestor(o))
			continue;
		if (m->nnics[k] == DL_MAP_MAX_NICS)
			continue;
		m->nic[k][m->nnics[k]++] = o;
	}
	for (int k = 0; k < NIC_KINDS; k++)
		qsort(m->nic[k], m->nnics[k], sizeof(m->nic[k][0]), nic_qcmp);
	m->top_tier = TIER_MGMT;
	for (int i = 0; i < m->nnics[NIC_NET]; i++) {
		m->tier[i] = net_tier(m, m->nic[NIC_NET][i]);
		if (m->tier[i] > m->top_tier)
			m->top_tier = m->tier[i];
	}

	for (o = NULL; (o = hwloc_get_next_obj_by_type(m->topo, HWLOC_OBJ_NUMANODE, o));) {
		if (!o->cpuset || hwloc_bitmap_iszero(o->cpuset) || m->nnuma == DL_MAP_MAX_NICS)
			continue;
		m->numa[m->nnuma++] = o;
	}
	qsort(m->numa, m->nnuma, sizeof(m->numa[0]), numa_qcmp);
	m->has_cores = hwloc_get_nbobjs_by_type(m->topo, HWLOC_OBJ_CORE) > 0;
	ok = 1;
out:
	if (!ok) {
		hwloc_topology_destroy(m->topo);
		free(m);
		return NULL;
	}
	return m;
}

/* hwloc 2.9's XML import dies on some malformed files (an object without
 * complete_cpuset, a cut attribute: found by tests/fuzz/fuzz_topology), and
 * a topology= file is read inside every step's slurmstepd.  So a file is
 * first loaded in a child process, with the default action for the crash
 * signals, at most DL_MAP_XML_SECONDS and at most DL_MAP_XML_MB more address
 * space than the child started with; the child sends back hwloc's own XML
 * export of what it loaded, and only that is loaded here.  The memory cap
 * and the export: a 3 KB file (found by fuzz_topology) made hwloc allocate
 * 3 GB (sets sized for a PU numbered 2^32-1), 1 GB of it touched, which
 * slurmstepd would then take too, in every step.  Under the cap those
 * allocations fail and hwloc goes on without them, so loading the file
 * itself here again would take it all; its export holds only what fit.
 * The largest real topologies of mapping/test/topologies load in 15 MB and
 * export to the same topology. */
#define DL_MAP_XML_SECONDS 20
#define DL_MAP_XML_MB 256
/* Under AddressSanitizer (check-asan, the fuzz targets) the address space
 * holds terabytes of shadow and its allocator aborts where malloc would
 * return NULL: no cap there. */
#if defined(__SANITIZE_ADDRESS__)
#define DL_MAP_CAP_AS 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define DL_MAP_CAP_AS 0
#endif
#endif
#ifndef DL_MAP_CAP_AS
#define DL_MAP_CAP_AS 1
#endif

/* The child's address space capped at DL_MAP_XML_MB more than it has now
 * (RLIMIT_AS is on the whole address space, inherited mappings included;
 * statm's first field is its size in pages). */
static void cap_address_space(void)
{
	struct rlimit rl;
	unsigned long long now = 0;
	char b[128];
	ssize_t r;
	int fd;

	if (!DL_MAP_CAP_AS || getrlimit(RLIMIT_AS, &rl) != 0 ||
	    (fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC)) < 0)
		return;
	r = read(fd, b, sizeof(b) - 1);
	close(fd);
	if (r <= 0)
		return;
	b[r] = '\0';
	now = strtoull(b, NULL, 10) * (unsigned long long)sysconf(_SC_PAGESIZE);
	if (!now)
		return;
	rl.rlim_cur = (rlim_t)(now + ((unsigned long long)DL_MAP_XML_MB << 20));
	if (rl.rlim_max != RLIM_INFINITY && rl.rlim_cur > rl.rlim_max)
		rl.rlim_cur = rl.rlim_max;
	setrlimit(RLIMIT_AS, &rl);
}

/* The child's side: load, export, write; its exit status says how it went. */
static void child_export(const char *buf, size_t len, const char *name, int wfd)
{
	static const int crash[] = { SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGSYS, SIGALRM };
	struct sigaction sa;
	sigset_t set;
	struct dl_map *m;
	char e[8], *xml = NULL;
	int xlen = 0;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = SIG_DFL;
	sigemptyset(&set);
	for (size_t i = 0; i < sizeof(crash) / sizeof(crash[0]); i++) {
		sigaction(crash[i], &sa, NULL);
		sigaddset(&set, crash[i]);
	}
	sigprocmask(SIG_UNBLOCK, &set, NULL);
	alarm(DL_MAP_XML_SECONDS);
	cap_address_space();
	if (!(m = map_load(buf, len, name, e, sizeof(e))))
		_exit(1);
	if (hwloc_topology_export_xmlbuffer(m->topo, &xml, &xlen, 0) < 0 || xlen < 1 ||
	    (size_t)xlen > (size_t)DL_MAP_MAX_XML + 1)
		_exit(2);
	for (size_t done = 0; done < (size_t)xlen;) {
		ssize_t w = write(wfd, xml + done, (size_t)xlen - done);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			_exit(2);
		done += (size_t)w;
	}
	_exit(0);
}

/* Returns the child's export (*n bytes, the last a 0; free it), or NULL
 * with one line in err. */
static char *xml_export_in_child(const char *buf, size_t len, const char *name, size_t *n, char *err, size_t errlen)
{
	int status = 0, fds[2], rerr = 0;
	size_t got = 0, cap = 1 << 16;
	char *out = NULL;
	pid_t pid;

	if (pipe2(fds, O_CLOEXEC) < 0) {
		dl_errf(err, errlen, "%s: cannot check it in a child process: pipe: %s", name, strerror(errno));
		return NULL;
	}
	if ((pid = fork()) < 0) {
		dl_errf(err, errlen, "%s: cannot check it in a child process: fork: %s", name, strerror(errno));
		close(fds[0]);
		close(fds[1]);
		return NULL;
	}
	if (pid == 0) {
		close(fds[0]);
		child_export(buf, len, name, fds[1]);
	}
	close(fds[1]);
	/* Read to the end before waiting: the export may not fit in the pipe.
	 * The child's alarm bounds this; more than DL_MAP_MAX_XML is refused. */
	out = malloc(cap);
	for (;;) {
		if (!out) {
			rerr = ENOMEM;
			break;
		}
		if (got == cap) {
			char *b = cap > (size_t)DL_MAP_MAX_XML ? NULL : realloc(out, cap * 2);
			if (!b) {
				rerr = cap > (size_t)DL_MAP_MAX_XML ? EFBIG : ENOMEM;
				break;
			}
			out = b;
			cap *= 2;
		}
		ssize_t r = read(fds[0], out + got, cap - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			rerr = errno;
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	close(fds[0]);
	if (rerr)
		kill(pid, SIGKILL);
	while (waitpid(pid, &status, 0) < 0) {
		if (errno != EINTR) {
			dl_errf(err, errlen, "%s: cannot check it in a child process: waitpid: %s", name, strerror(errno));
			free(out);
			return NULL;
		}
	}
	if (rerr) {
		dl_errf(err, errlen, "%s: reading hwloc's export of it: %s", name, strerror(rerr));
		free(out);
		return NULL;
	}
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0 && got > 0 && out[got - 1] == '\0') {
		*n = got;
		return out;
	}
	free(out);
	if (WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM)
		dl_errf(err, errlen, "%s: hwloc took more than %d s to read it", name, DL_MAP_XML_SECONDS);
	else if (WIFSIGNALED(status))
		dl_errf(err, errlen, "%s: not a valid hwloc XML topology (hwloc died of signal %d reading it)",
			 name, WTERMSIG(status));
	else
		dl_errf(err, errlen, "%s: not a valid hwloc XML topology (or one that hwloc needs more than %d MB "
			 "to read)", name, DL_MAP_XML_MB);
	return NULL;
}

/* buf (len bytes and a 0) through the child, then its export here. */
static struct dl_map *load_checked(const char *buf, size_t len, const char *name, char *err, size_t errlen)
{
	size_t n = 0;
	char *clean = xml_export_in_child(buf, len, name, &n, err, errlen);
	struct dl_map *m;

	if (!clean)
		return NULL;
	m = map_load(clean, n - 1, name, err, errlen);
	free(clean);
	return m;
}

struct dl_map *dl_map_open_buffer(const char *buf, size_t len, const char *name, char *err, size_t errlen)
{
	char *copy;
	struct dl_map *m;

	if (len > DL_MAP_MAX_XML) {
		dl_errf(err, errlen, "%s: larger than %d bytes", name, DL_MAP_MAX_XML);
		return NULL;
	}
	/* hwloc wants the ending 0 inside the buffer. */
	if (!(copy = malloc(len + 1))) {
		dl_errf(err, errlen, "out of memory");
		return NULL;
	}
	memcpy(copy, buf, len);
	copy[len] = '\0';
	m = load_checked(copy, len, name, err, errlen);
	free(copy);
	return m;
}

/* The file is read here rather than by hwloc, so that a missing,
 * unreadable, special or huge file gets an error that says so (a FIFO
 * would block: it is opened without waiting and refused). */
struct dl_map *dl_map_open(const char *xml, char *err, size_t errlen)
{
	struct dl_map *m = NULL;
	struct stat sb;
	char *buf = NULL;
	size_t got = 0;
	int fd;

	if (!xml)
		return map_load(NULL, 0, "", err, errlen);
	if ((fd = open(xml, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK)) < 0) {
		dl_errf(err, errlen, "%s: %s", xml, strerror(errno));
		return NULL;
	}
	if (fstat(fd, &sb) < 0) {
		dl_errf(err, errlen, "%s: %s", xml, strerror(errno));
		goto out;
	}
	if (!S_ISREG(sb.st_mode)) {
		dl_errf(err, errlen, "%s: not a regular file", xml);
		goto out;
	}
	if (sb.st_size > DL_MAP_MAX_XML) {
		dl_errf(err, errlen, "%s: larger than %d bytes", xml, DL_MAP_MAX_XML);
		goto out;
	}
	if (!(buf = malloc((size_t)sb.st_size + 1))) {
		dl_errf(err, errlen, "out of memory");
		goto out;
	}
	while (got < (size_t)sb.st_size) {
		ssize_t n = read(fd, buf + got, (size_t)sb.st_size - got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			dl_errf(err, errlen, "%s: %s", xml, strerror(errno));
			goto out;
		}
		if (n == 0)
			break;
		got += (size_t)n;
	}
	if (got == 0) {
		dl_errf(err, errlen, "%s: empty file", xml);
		goto out;
	}
	buf[got] = '\0';
	m = load_checked(buf, got, xml, err, errlen);
out:
	free(buf);
	close(fd);
	return m;
}

void dl_map_close(struct dl_map *m)
{
	if (!m)
		return;
	hwloc_topology_destroy(m->topo);
	free(m);
}

int dl_map_ngpus(const struct dl_map *m) { return m->ngpus; }
hwloc_topology_t dl_map_topology(const struct dl_map *m) { return m->topo; }

const char *dl_map_gpu_busid(const struct dl_map *m, int i)
{
	return i >= 0 && i < m->ngpus ? m->busid[i] : NULL;
}

static void cat(char *buf, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Append to a 0-terminated buffer, cutting what does not fit. */
static void cat(char *buf, size_t len, const char *fmt, ...)
{
	size_t used = strnlen(buf, len);
	va_list ap;

	if (used + 1 >= len)
		return;
	va_start(ap, fmt);
	vsnprintf(buf + used, len - used, fmt, ap);
	va_end(ap);
}

/* "L3Cache P#6", "Group", "Package P#0". */
static void obj_name(hwloc_obj_t o, char *buf, size_t len)
{
	if (o->os_index != HWLOC_UNKNOWN_INDEX && o->type != HWLOC_OBJ_GROUP)
		snprintf(buf, len, "%s P#%u", hwloc_obj_type_string(o->type), o->os_index);
	else
		snprintf(buf, len, "%s", hwloc_obj_type_string(o->type));
}

/* Where two objects meet, in words. */
static void meet_name(hwloc_obj_t c, char *buf, size_t len)
{
	char n[64];

	if (c->type == HWLOC_OBJ_BRIDGE)
		snprintf(buf, len, "%s", c->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_HOST ?
			 "same host bridge" : "same PCIe switch");
	else if (c->type == HWLOC_OBJ_PCI_DEVICE)
		snprintf(buf, len, "same PCI device");
	else {
		obj_name(c, n, sizeof(n));
		snprintf(buf, len, "same %s", n);
	}
}

/* Distance from the root, counting every parent (I/O objects have negative
 * hwloc depths, so obj->depth cannot be compared across kinds). */
static int tree_depth(hwloc_obj_t o)
{
	int d = 0;

	while ((o = o->parent))
		d++;
	return d;
}

static hwloc_obj_t common_ancestor(hwloc_obj_t a, hwloc_obj_t b)
{
	for (hwloc_obj_t x = a; x; x = x->parent)
		for (hwloc_obj_t y = b; y; y = y->parent)
			if (x == y)
				return x;
	return NULL;
}

/* A set of NICs of one kind: flags by index in dl_map.nic[k] (no
 * allocation, so nothing here can fail). */
struct nicset {
	char on[DL_MAP_MAX_NICS];
	int n;
};

/* The NICs nearest to anchor, among the network interfaces of the best
 * class on the node: deepest common ancestor first (same switch beats same
 * host bridge beats same package), then fewest hops between the two, so
 * that on a tie at the package a NIC on the GPU's own root port wins over
 * one behind another switch.  Returns where the nearest meet the anchor
 * (NULL: no NIC). */
static hwloc_obj_t nearest(const struct dl_map *m, int k, hwloc_obj_t anchor, struct nicset *near)
{
	int best = -1, best_hops = 0, da = tree_depth(anchor);
	hwloc_obj_t via = NULL;

	memset(near, 0, sizeof(*near));
	for (int i = 0; i < m->nnics[k]; i++) {
		hwloc_obj_t c;
		int d, hops;

		if (k == NIC_NET && m->tier[i] != m->top_tier)
			continue;
		c = common_ancestor(anchor, m->nic[k][i]);
		d = c ? tree_depth(c) : -1;
		hops = da + tree_depth(m->nic[k][i]) - 2 * d;
		if (d > best || (d == best && hops < best_hops)) {
			best = d;
			best_hops = hops;
			via = c;
			memset(near, 0, sizeof(*near));
		} else if (d != best || hops != best_hops) {
			continue;
		}
		near->on[i] = 1;
		near->n++;
	}
	return via;
}

static const char *const tier_words[] = {
	[TIER_MGMT] = " (only management interfaces on the node)",
	[TIER_OTHER] = " (no high-speed interface on the node)",
	[TIER_FAST] = " high-speed",
};

/* Choose unit u's share of its nearest NICs and say why.  near[0..n) are
 * the nearest NICs of kind k of every unit (GPUs, or tasks' NUMA nodes)
 * that split them, via[u] where unit u meets its own; unit names them in
 * the explanation. */
static void pick_nics(const struct dl_map *m, int k, const struct nicset *near, hwloc_obj_t via, int n, int u,
		      const char *unit, struct nicset *chosen, char *why, size_t whylen)
{
	const struct nicset *mine = &near[u];
	int grp = 0, pos = 0, lo, hi, j = 0;
	char w[96];

	memset(chosen, 0, sizeof(*chosen));
	if (mine->n == 0 || !via) {
		snprintf(why, whylen, "%s", k == NIC_HCA ? "no OpenFabrics device on the node" :
			 "no network interface on a PCI function");
		return;
	}
	for (int i = 0; i < n; i++) {
		if (memcmp(mine->on, near[i].on, sizeof(mine->on)) != 0)
			continue;
		if (i < u)
			pos++;
		grp++;
	}
	lo = pos * mine->n / grp;
	hi = grp <= mine->n ? (pos + 1) * mine->n / grp : lo + 1;
	for (int i = 0; i < m->nnics[k]; i++) {
		if (!mine->on[i])
			continue;
		if (j >= lo && j < hi) {
			chosen->on[i] = 1;
			chosen->n++;
		}
		j++;
	}
	meet_name(via, w, sizeof(w));
	snprintf(why, whylen, "nearest%s: %s", k == NIC_NET ? tier_words[m->top_tier] : "", w);
	if (grp > 1)
		cat(why, whylen, ", split: %d %s over %d", grp, unit, mine->n);
}

/* Names of the NICs of kind k in set, comma separated. */
static void nic_names(const struct dl_map *m, int k, const struct nicset *set, char *out, size_t len)
{
	out[0] = '\0';
	for (int i = 0; i < m->nnics[k]; i++)
		if (set->on[i])
			cat(out, len, "%s%s", out[0] ? "," : "", m->nic[k][i]->name);
}

/* NUMA nodes of CPU-only task r of n: the nodes numa[0..c) (those with
 * CPUs the plan may use) split evenly.  Returns 0 or -1 (out of memory). */
static int cpu_task_numa(hwloc_obj_t const *numa, int c, int r, int n, hwloc_bitmap_t ns)
{
	int lo, hi;

	hwloc_bitmap_zero(ns);
	if (c == 0)
		return 0;
	lo = r * c / n;
	hi = n >= c ? lo + 1 : (r + 1) * c / n;
	for (int i = lo; i < hi; i++)
		if (hwloc_bitmap_set(ns, numa[i]->os_index) < 0)
			return -1;
	return 0;
}

/* The CPU units of set in topology order: its cores (each core that has
 * CPUs in set, with only those: a step may own one hardware thread of a
 * core) or, in a topology without Core objects (a trimmed file), its CPUs,
 * the i-th CPU of each run
 * of consecutive indexes together when the runs are of one length (Linux
 * numbers the second hardware thread of core i as i + cores).  Returns
 * the count and *out (freed with free_units), or -1 (out of memory). */
static void free_units(hwloc_bitmap_t *u, int n)
{
	if (!u)
		return;
	for (int i = 0; i < n; i++)
		hwloc_bitmap_free(u[i]);
	free(u);
}

static int units(const struct dl_map *m, hwloc_const_bitmap_t set, hwloc_bitmap_t **out)
{
	int n = 0, i = 0, w = hwloc_bitmap_weight(set);
	hwloc_bitmap_t *u;

	*out = NULL;
	if (w <= 0)
		return 0;
	if (m->has_cores) {
		hwloc_obj_t o = NULL;

		while ((o = hwloc_get_next_obj_by_type(m->topo, HWLOC_OBJ_CORE, o)))
			n += o->cpuset && hwloc_bitmap_intersects(o->cpuset, set);
		if (n == 0)
			return 0;
		if (!(u = calloc((size_t)n, sizeof(*u))))
			return -1;
		for (o = NULL; i < n && (o = hwloc_get_next_obj_by_type(m->topo, HWLOC_OBJ_CORE, o));) {
			if (!o->cpuset || !hwloc_bitmap_intersects(o->cpuset, set))
				continue;
			if (!(u[i] = hwloc_bitmap_alloc()) || hwloc_bitmap_and(u[i], o->cpuset, set) < 0) {
				free_units(u, u[i] ? i + 1 : i);
				return -1;
			}
			i++;
		}
		*out = u;
		return n;
	}
	{
		int runs = 0, len = -1, same = 1, prev = -2, run_len = 0, b;

		hwloc_bitmap_foreach_begin(b, set)
			if (b != prev + 1) {
				if (runs && len >= 0 && run_len != len)
					same = 0;
				if (runs && len < 0)
					len = run_len;
				runs++;
				run_len = 0;
			}
			run_len++;
			prev = b;
		hwloc_bitmap_foreach_end();
		if (len < 0)
			len = run_len;
		else if (run_len != len)
			same = 0;
		n = runs > 1 && same ? len : w;
		if (!(u = calloc((size_t)n, sizeof(*u))))
			return -1;
		for (i = 0; i < n; i++)
			if (!(u[i] = hwloc_bitmap_alloc())) {
				free_units(u, i);
				return -1;
			}
		i = 0;
		hwloc_bitmap_foreach_begin(b, set)
			if (hwloc_bitmap_set(u[i % n], (unsigned)b) < 0) {
				free_units(u, n);
				return -1;
			}
			i++;
		hwloc_bitmap_foreach_end();
		*out = u;
		return n;
	}
}

/* Give tasks idx[0..k) their share of the units u[0..nu): contiguous
 * chunks in topology order, or, with more tasks than units, unit j*nu/k to
 * task j (shared).  got[j]: the units task idx[j] got. */
static int split(hwloc_bitmap_t *u, int nu, const int *idx, int k, struct dl_map_task *t, int *got)
{
	for (int j = 0; j < k; j++) {
		int lo = j * nu / k, hi = nu >= k ? (j + 1) * nu / k : lo + 1;

		got[j] = 0;
		for (int x = lo; x < hi && x < nu; x++) {
			if (hwloc_bitmap_or(t[idx[j]].cpuset, t[idx[j]].cpuset, u[x]) < 0)
				return -1;
			got[j]++;
		}
	}
	return 0;
}

static void split_why(char *why, size_t len, const char *what, int k, int nu, int got, const char *word)
{
	const char *s = got == 1 ? "" : "s";

	if (why[0])
		cat(why, len, " + ");
	if (k == 1)
		cat(why, len, "%s: %d %s%s", what, got, word, s);
	else if (k <= nu)
		cat(why, len, "%s split %d ways: %d %s%s", what, k, got, word, s);
	else
		cat(why, len, "%s: %d tasks on %d %s%s, shared", what, k, nu, word, nu == 1 ? "" : "s");
}

/* The next group of tasks with equal sets: the smallest set not yet done,
 * with every task that has it, in task order.  Returns its size. */
static int next_group(hwloc_bitmap_t *set, char *done, int n, int *idx)
{
	int best = -1, bw = 0, k = 0;

	for (int r = 0; r < n; r++)
		if (!done[r] && set[r]) {
			int w = hwloc_bitmap_weight(set[r]);

			if (best < 0 || w < bw) {
				best = r;
				bw = w;
			}
		}
	if (best < 0)
		return 0;
	for (int r = 0; r < n; r++)
		if (!done[r] && set[r] && hwloc_bitmap_isequal(set[r], set[best])) {
			idx[k++] = r;
			done[r] = 1;
		}
	return k;
}

void dl_map_plan_free(struct dl_map_plan *p)
{
	if (!p)
		return;
	for (int r = 0; r < p->ntasks; r++) {
		hwloc_bitmap_free(p->task[r].cpuset);
		hwloc_bitmap_free(p->task[r].nodeset);
	}
	free(p);
}

int dl_map_plan_ntasks(const struct dl_map_plan *p) { return p->ntasks; }

const struct dl_map_task *dl_map_plan_task(const struct dl_map_plan *p, int r)
{
	return r >= 0 && r < p->ntasks ? &p->task[r] : NULL;
}

static void free_sets(hwloc_bitmap_t *s, int n)
{
	if (!s)
		return;
	for (int i = 0; i < n; i++)
		hwloc_bitmap_free(s[i]);
	free(s);
}

/* One dl_map_plan call's working state: the arguments, what the stages
 * below fill in, and the scratch arrays they share (one slot per task). */
struct planner {
	const struct dl_map *m;
	const int *step_gpus;
	int ng, ntasks, nic;
	struct dl_map_plan *p;
	const char *word;           /* "core" or "CPU": what a unit is */
	hwloc_bitmap_t mine;        /* the CPUs the plan may use */
	hwloc_bitmap_t taken, avail;
	hwloc_bitmap_t *dom, *loc;  /* per task: its NUMA domain, its GPU's locality */
	hwloc_obj_t *lobj;          /* the object of loc[r] */
	hwloc_obj_t *cpu_anchor;    /* per task without GPU: where its NICs are measured from */
	hwloc_obj_t gpu_anchor[DL_MAP_MAX_GPUS];
	hwloc_obj_t numa[DL_MAP_MAX_NICS];
	int nnuma, ncpu;
	int *cpu_idx, *idx, *got;
	char *done;
	hwloc_bitmap_t *u;          /* units of the current split */
	int nu;
};

/* The arguments' bounds; 0 or -1 with err set. */
static int plan_check_args(const struct planner *pl, const int *task_gpu, char *err, size_t errlen)
{
	if (pl->ntasks <= 0 || pl->ntasks > DL_MAP_MAX_TASKS) {
		dl_errf(err, errlen, "%d tasks on the node: expected 1 to %d", pl->ntasks, DL_MAP_MAX_TASKS);
		return -1;
	}
	if (pl->ng < 0 || pl->ng > DL_MAP_MAX_GPUS) {
		dl_errf(err, errlen, "%d step GPUs is more than %d", pl->ng, DL_MAP_MAX_GPUS);
		return -1;
	}
	for (int i = 0; i < pl->ng; i++)
		if (pl->step_gpus[i] < 0 || pl->step_gpus[i] >= pl->m->ngpus) {
			dl_errf(err, errlen, "GPU %d of the step is not in the topology (it has %d GPUs)",
				 pl->step_gpus[i], pl->m->ngpus);
			return -1;
		}
	for (int r = 0; task_gpu && r < pl->ntasks; r++)
		if (task_gpu[r] < -1 || task_gpu[r] >= pl->ng) {
			dl_errf(err, errlen, "task %d's GPU %d is not one of the step's %d", r, task_gpu[r], pl->ng);
			return -1;
		}
	return 0;
}

/* mine: the CPUs the plan may use, the topology's within what the caller
 * allows (the step's CPUs on the node); the NUMA nodes that have some.
 * 0, or -1 with err set. */
static int plan_mine(struct planner *pl, hwloc_const_bitmap_t within, char *err, size_t errlen)
{
	const struct dl_map *m = pl->m;

	if (!(pl->mine = hwloc_bitmap_dup(hwloc_get_root_obj(m->topo)->cpuset)) ||
	    (within && hwloc_bitmap_and(pl->mine, pl->mine, within) < 0)) {
		dl_errf(err, errlen, "out of memory");
		return -1;
	}
	if (hwloc_bitmap_iszero(pl->mine)) {
		char w[DL_MAP_LIST], all[DL_MAP_LIST];

		hwloc_bitmap_list_snprintf(w, sizeof(w), within);
		hwloc_bitmap_list_snprintf(all, sizeof(all), hwloc_get_root_obj(m->topo)->cpuset);
		dl_errf(err, errlen, "none of the CPUs %s is in the topology (its CPUs: %s)", w, all);
		return -1;
	}
	for (int i = 0; i < m->nnuma; i++)
		if (hwloc_bitmap_intersects(m->numa[i]->cpuset, pl->mine))
			pl->numa[pl->nnuma++] = m->numa[i];
	return 0;
}

/* The plan and the scratch arrays; each task's GPU (Slurm's binding, or
 * task r mod the step's GPUs).  -1: out of memory. */
static int plan_alloc(struct planner *pl, const int *task_gpu)
{
	int ntasks = pl->ntasks;
	struct dl_map_plan *p;

	pl->p = p = calloc(1, sizeof(*p) + (size_t)ntasks * sizeof(p->task[0]));
	pl->dom = calloc((size_t)ntasks, sizeof(*pl->dom));
	pl->loc = calloc((size_t)ntasks, sizeof(*pl->loc));
	pl->lobj = calloc((size_t)ntasks, sizeof(*pl->lobj));
	pl->cpu_anchor = calloc((size_t)ntasks, sizeof(*pl->cpu_anchor));
	pl->cpu_idx = calloc((size_t)ntasks, sizeof(*pl->cpu_idx));
	pl->idx = calloc((size_t)ntasks, sizeof(*pl->idx));
	pl->got = calloc((size_t)ntasks, sizeof(*pl->got));
	pl->done = calloc((size_t)ntasks, 1);
	pl->taken = hwloc_bitmap_alloc();
	pl->avail = hwloc_bitmap_alloc();
	if (!p || !pl->dom || !pl->loc || !pl->lobj || !pl->cpu_anchor || !pl->cpu_idx || !pl->idx || !pl->got ||
	    !pl->done || !pl->taken || !pl->avail)
		return -1;
	p->ntasks = ntasks;
	for (int r = 0; r < ntasks; r++) {
		struct dl_map_task *t = &p->task[r];

		t->gpu = task_gpu ? task_gpu[r] : pl->ng > 0 ? r % pl->ng : -1;
		t->node_gpu = -1;
		if (!(t->cpuset = hwloc_bitmap_alloc()) || !(t->nodeset = hwloc_bitmap_alloc()) ||
		    !(pl->dom[r] = hwloc_bitmap_alloc()))
			return -1;
		if (t->gpu < 0)
			pl->cpu_idx[r] = pl->ncpu++;
	}
	for (int i = 0; i < pl->ng; i++)
		pl->gpu_anchor[i] = pl->m->gpu[pl->step_gpus[i]];
	return 0;
}

/* Task r with a GPU: the GPU's NUMA node(s), their CPUs within mine (the
 * domain), and the GPU's own smaller locality (an L3 or a Group inside
 * the NUMA node) where it is smaller than the domain.  -1: out of memory. */
static int plan_gpu_domain(struct planner *pl, int r)
{
	const struct dl_map *m = pl->m;
	struct dl_map_task *t = &pl->p->task[r];
	hwloc_bitmap_t *dom = pl->dom, *loc = pl->loc;
	int ng = pl->ng;
	hwloc_obj_t a;

	t->node_gpu = pl->step_gpus[t->gpu];
	snprintf(t->busid, sizeof(t->busid), "%s", m->busid[t->node_gpu]);
	if (t->gpu == r % ng)
		snprintf(t->why_gpu, sizeof(t->why_gpu), "task %d mod %d step GPU%s", r, ng, ng > 1 ? "s" : "");
	else
		snprintf(t->why_gpu, sizeof(t->why_gpu), "Slurm's binding of the task");
	a = hwloc_get_non_io_ancestor_obj(m->topo, m->gpu[t->node_gpu]);
	if (a && a->nodeset && hwloc_bitmap_copy(t->nodeset, a->nodeset) < 0)
		return -1;
	if (!hwloc_bitmap_iszero(t->nodeset) && hwloc_cpuset_from_nodeset(m->topo, dom[r], t->nodeset) < 0)
		return -1;
	if (hwloc_bitmap_iszero(dom[r]) && a && a->cpuset && hwloc_bitmap_copy(dom[r], a->cpuset) < 0)
		return -1;
	if (hwloc_bitmap_and(dom[r], dom[r], pl->mine) < 0)
		return -1;
	if (a) {
		char oname[64];

		obj_name(a, oname, sizeof(oname));
		snprintf(t->why_numa, sizeof(t->why_numa), "of the GPU's %s", oname);
	}
	/* The GPU's own smaller locality, within mine: a set of its own only
	 * when it is still smaller than the domain (and not empty). */
	if (a && a->cpuset && !hwloc_bitmap_iszero(dom[r])) {
		if (!(loc[r] = hwloc_bitmap_dup(a->cpuset)) || hwloc_bitmap_and(loc[r], loc[r], pl->mine) < 0)
			return -1;
		if (!hwloc_bitmap_iszero(loc[r]) && hwloc_bitmap_isincluded(loc[r], dom[r]) &&
		    !hwloc_bitmap_isequal(loc[r], dom[r])) {
			pl->lobj[r] = a;
		} else {
			hwloc_bitmap_free(loc[r]);
			loc[r] = NULL;
		}
	}
	return 0;
}

/* Task r without a GPU: its share of the NUMA nodes that have CPUs of
 * mine, their CPUs (the domain), and the anchor its NICs are measured
 * from.  -1: out of memory. */
static int plan_cpu_domain(struct planner *pl, int r)
{
	const struct dl_map *m = pl->m;
	struct dl_map_task *t = &pl->p->task[r];
	hwloc_bitmap_t d = pl->dom[r];
	int c = pl->cpu_idx[r], ncpu = pl->ncpu;

	if (cpu_task_numa(pl->numa, pl->nnuma, c, ncpu, t->nodeset) < 0)
		return -1;
	if (hwloc_bitmap_iszero(t->nodeset)) {
		if (hwloc_bitmap_copy(d, pl->mine) < 0)
			return -1;
	} else if (hwloc_cpuset_from_nodeset(m->topo, d, t->nodeset) < 0 || hwloc_bitmap_and(d, d, pl->mine) < 0)
		return -1;
	snprintf(t->why_gpu, sizeof(t->why_gpu), "%s", pl->ng == 0 ? "the step has no GPU here" :
		 "not known (Slurm confines the task's devices)");
	snprintf(t->why_numa, sizeof(t->why_numa), "NUMA nodes split between %d task%s without GPU",
		 ncpu, ncpu > 1 ? "s" : "");
	pl->cpu_anchor[c] = hwloc_bitmap_iszero(t->nodeset) ? hwloc_get_root_obj(m->topo) :
		hwloc_get_numanode_obj_by_os_index(m->topo, (unsigned)hwloc_bitmap_first(t->nodeset));
	if (!pl->cpu_anchor[c])
		pl->cpu_anchor[c] = hwloc_get_root_obj(m->topo);
	return 0;
}

/* units of set into pl->u (the previous split's freed first).  -1: out of
 * memory. */
static int plan_units(struct planner *pl, hwloc_const_bitmap_t set)
{
	free_units(pl->u, pl->nu > 0 ? pl->nu : 0);
	pl->u = NULL;
	pl->nu = units(pl->m, set, &pl->u);
	return pl->nu < 0 ? -1 : 0;
}

/* Split pl->u between the k tasks pl->idx[0..k), each told why with what. */
static int plan_split(struct planner *pl, int k, const char *what)
{
	if (split(pl->u, pl->nu, pl->idx, k, pl->p->task, pl->got) < 0)
		return -1;
	for (int j = 0; j < k; j++)
		split_why(pl->p->task[pl->idx[j]].why_cpus, DL_MAP_WHY, what, k, pl->nu, pl->got[j], pl->word);
	return 0;
}

/* CPUs, first pass: the GPU's own locality, split between the tasks that
 * share it when each can have a whole core.  -1: out of memory. */
static int plan_cpus_local(struct planner *pl)
{
	char name[DL_MAP_LIST + 32];
	int k;

	while ((k = next_group(pl->loc, pl->done, pl->ntasks, pl->idx)) > 0) {
		if (hwloc_bitmap_andnot(pl->avail, pl->loc[pl->idx[0]], pl->taken) < 0 || plan_units(pl, pl->avail) < 0)
			return -1;
		if (pl->nu >= k) {
			obj_name(pl->lobj[pl->idx[0]], name, sizeof(name));
			if (plan_split(pl, k, name) < 0 || hwloc_bitmap_or(pl->taken, pl->taken, pl->avail) < 0)
				return -1;
		}
	}
	return 0;
}

/* Second pass: the rest of each NUMA domain, split between all its tasks;
 * with fewer cores than tasks, only the tasks still without CPUs take
 * part, and share.  -1: out of memory. */
static int plan_cpus_domain(struct planner *pl)
{
	char name[DL_MAP_LIST + 32];
	int k;

	memset(pl->done, 0, (size_t)pl->ntasks);
	while ((k = next_group(pl->dom, pl->done, pl->ntasks, pl->idx)) > 0) {
		hwloc_const_bitmap_t d = pl->dom[pl->idx[0]];
		int rest, kk = k;

		if (hwloc_bitmap_andnot(pl->avail, d, pl->taken) < 0)
			return -1;
		rest = !hwloc_bitmap_isequal(pl->avail, d);
		if (plan_units(pl, pl->avail) < 0)
			return -1;
		if (pl->nu < k) {
			kk = 0;
			for (int j = 0; j < k; j++)
				if (hwloc_bitmap_iszero(pl->p->task[pl->idx[j]].cpuset))
					pl->idx[kk++] = pl->idx[j];
		}
		if (kk > 0 && pl->nu == 0) {
			/* Nothing is left: the tasks without CPUs share the domain. */
			if (plan_units(pl, d) < 0)
				return -1;
			rest = 0;
		}
		if (kk > 0 && pl->nu > 0) {
			snprintf(name, sizeof(name), "%sNUMA %s", rest ? "rest of " : "", pl->p->task[pl->idx[0]].numa);
			if (plan_split(pl, kk, name) < 0 || hwloc_bitmap_or(pl->taken, pl->taken, pl->avail) < 0)
				return -1;
		}
	}
	return 0;
}

/* Third pass: the tasks whose NUMA domain has none of mine (the step owns
 * no CPU near their GPU) split what is left of mine, or share all of it
 * when nothing is left.  Then who shares CPUs, and the lists.  -1: out of
 * memory. */
static int plan_cpus_rest(struct planner *pl)
{
	struct dl_map_plan *p = pl->p;
	int k = 0;

	for (int r = 0; r < pl->ntasks; r++)
		if (hwloc_bitmap_iszero(p->task[r].cpuset) && hwloc_bitmap_iszero(pl->dom[r]))
			pl->idx[k++] = r;
	if (k > 0) {
		const char *what = "CPUs left outside its NUMA node";

		if (hwloc_bitmap_andnot(pl->avail, pl->mine, pl->taken) < 0 || plan_units(pl, pl->avail) < 0)
			return -1;
		if (pl->nu == 0) {
			what = "all the allowed CPUs";
			if (plan_units(pl, pl->mine) < 0)
				return -1;
		}
		if (plan_split(pl, k, what) < 0)
			return -1;
	}
	for (int r = 0; r < pl->ntasks; r++) {
		struct dl_map_task *t = &p->task[r];
		int n = 0;

		for (int s = 0; s < pl->ntasks; s++)
			n += hwloc_bitmap_intersects(t->cpuset, p->task[s].cpuset);
		t->shared = n > 1 ? n : 0;
		hwloc_bitmap_list_snprintf(t->cpus, sizeof(t->cpus), t->cpuset);
		if (!t->why_cpus[0])
			snprintf(t->why_cpus, sizeof(t->why_cpus), "no CPU in the topology's NUMA node");
	}
	return 0;
}

/* NICs: a GPU's among the step's GPUs, a task without GPU's among the
 * tasks without GPU.  Each unit's nearest NICs, once; then each task's
 * HCAs and the netdevs of their own ports (IPoIB, RoCE), or its nearest
 * netdevs.  -1: out of memory. */
static int plan_nics(struct planner *pl)
{
	const struct dl_map *m = pl->m;
	struct nicset chosen, port, *near[2][NIC_KINDS] = { { NULL } }; /* [GPU or CPU units][kind] */
	hwloc_obj_t *via[2][NIC_KINDS] = { { NULL } };
	int ret = -1;

	for (int g = 0; pl->nic && g < 2; g++) {
		int n = g ? pl->ng : pl->ncpu;

		for (int kind = 0; kind < NIC_KINDS; kind++) {
			near[g][kind] = calloc((size_t)(n ? n : 1), sizeof(*near[g][kind]));
			via[g][kind] = calloc((size_t)(n ? n : 1), sizeof(*via[g][kind]));
			if (!near[g][kind] || !via[g][kind])
				goto out;
			for (int i = 0; i < n; i++)
				via[g][kind][i] = nearest(m, kind, g ? pl->gpu_anchor[i] : pl->cpu_anchor[i],
							  &near[g][kind][i]);
		}
	}
	for (int r = 0; r < pl->ntasks; r++) {
		struct dl_map_task *t = &pl->p->task[r];
		int g = t->gpu >= 0, n = g ? pl->ng : pl->ncpu, x = g ? t->gpu : pl->cpu_idx[r];

		if (!pl->nic) {
			snprintf(t->why_hca, sizeof(t->why_hca), "not chosen (nic=none)");
			snprintf(t->why_ifname, sizeof(t->why_ifname), "not chosen (nic=none)");
			continue;
		}
		pick_nics(m, NIC_HCA, near[g][NIC_HCA], via[g][NIC_HCA][x], n, x, g ? "GPUs" : "tasks", &chosen,
			  t->why_hca, sizeof(t->why_hca));
		nic_names(m, NIC_HCA, &chosen, t->hca, sizeof(t->hca));
		memset(&port, 0, sizeof(port));
		for (int i = 0; i < m->nnics[NIC_NET]; i++)
			for (int h = 0; h < m->nnics[NIC_HCA] && !port.on[i]; h++)
				if (chosen.on[h] && pci_ancestor(m->nic[NIC_HCA][h]) == pci_ancestor(m->nic[NIC_NET][i])) {
					port.on[i] = 1;
					port.n++;
				}
		if (port.n > 0) {
			nic_names(m, NIC_NET, &port, t->ifname, sizeof(t->ifname));
			snprintf(t->why_ifname, sizeof(t->why_ifname), "the netdev%s of its HCA port%s",
				 port.n > 1 ? "s" : "", chosen.n > 1 ? "s" : "");
			continue;
		}
		pick_nics(m, NIC_NET, near[g][NIC_NET], via[g][NIC_NET][x], n, x, g ? "GPUs" : "tasks", &chosen,
			  t->why_ifname, sizeof(t->why_ifname));
		nic_names(m, NIC_NET, &chosen, t->ifname, sizeof(t->ifname));
	}
	ret = 0;
out:
	for (int g = 0; g < 2; g++)
		for (int kind = 0; kind < NIC_KINDS; kind++) {
			free(near[g][kind]);
			free(via[g][kind]);
		}
	return ret;
}

static void planner_free(struct planner *pl)
{
	free_units(pl->u, pl->nu > 0 ? pl->nu : 0);
	free_sets(pl->dom, pl->ntasks);
	free_sets(pl->loc, pl->ntasks);
	free(pl->lobj);
	free(pl->cpu_anchor);
	free(pl->cpu_idx);
	free(pl->idx);
	free(pl->got);
	free(pl->done);
	hwloc_bitmap_free(pl->taken);
	hwloc_bitmap_free(pl->avail);
	hwloc_bitmap_free(pl->mine);
}

struct dl_map_plan *dl_map_plan(const struct dl_map *m, const int *step_gpus, int ng, const int *task_gpu,
				int ntasks, hwloc_const_bitmap_t within, int nic, char *err, size_t errlen)
{
	struct planner pl = { .m = m, .step_gpus = step_gpus, .ng = ng, .ntasks = ntasks, .nic = nic,
			      .word = m->has_cores ? "core" : "CPU" };
	struct dl_map_plan *p = NULL;
	int ok = 0;

	if (plan_check_args(&pl, task_gpu, err, errlen) < 0)
		return NULL;
	if (plan_mine(&pl, within, err, errlen) < 0) {
		hwloc_bitmap_free(pl.mine);
		return NULL;
	}
	if (plan_alloc(&pl, task_gpu) < 0)
		goto out;
	for (int r = 0; r < ntasks; r++) {
		struct dl_map_task *t = &pl.p->task[r];

		if ((t->gpu >= 0 ? plan_gpu_domain(&pl, r) : plan_cpu_domain(&pl, r)) < 0)
			goto out;
		hwloc_bitmap_list_snprintf(t->numa, sizeof(t->numa), t->nodeset);
	}
	if (plan_cpus_local(&pl) < 0 || plan_cpus_domain(&pl) < 0 || plan_cpus_rest(&pl) < 0 ||
	    plan_nics(&pl) < 0)
		goto out;
	ok = 1;
out:
	p = pl.p;
	planner_free(&pl);
	if (!ok) {
		dl_errf(err, errlen, "out of memory");
		dl_map_plan_free(p);
		return NULL;
	}
	return p;
}

int dl_map_bound(const struct dl_map_task *t, hwloc_const_bitmap_t allowed, hwloc_bitmap_t out)
{
	if (hwloc_bitmap_copy(out, t->cpuset) < 0)
		return -1;
	if (!allowed)
		return 0;
	if (hwloc_bitmap_and(out, out, allowed) < 0)
		return -1;
	/* The topology's CPUs are not this task's: keep what Slurm gave. */
	if (hwloc_bitmap_iszero(out) && hwloc_bitmap_copy(out, allowed) < 0)
		return -1;
	return 0;
}

enum { COL_TASK, COL_GPU, COL_BUSID, COL_HCA, COL_IF, COL_NUMA, COL_CPUS, NCOLS };

static void row_cells(const struct dl_map_plan *p, int r, char cell[NCOLS][DL_MAP_LIST + 32])
{
	static const char *const head[NCOLS] = { "task", "gpu", "busid", "hca", "ifname", "numa", "cpus" };
	const struct dl_map_task *t;

	if (r < 0) {
		for (int c = 0; c < NCOLS; c++)
			snprintf(cell[c], sizeof(cell[c]), "%s", head[c]);
		return;
	}
	t = &p->task[r];
	snprintf(cell[COL_TASK], sizeof(cell[0]), "%d", r);
	if (t->gpu >= 0)
		snprintf(cell[COL_GPU], sizeof(cell[0]), "%d", t->gpu);
	else
		snprintf(cell[COL_GPU], sizeof(cell[0]), "-");
	snprintf(cell[COL_BUSID], sizeof(cell[0]), "%s", t->busid[0] ? t->busid : "-");
	snprintf(cell[COL_HCA], sizeof(cell[0]), "%s", t->hca[0] ? t->hca : "-");
	snprintf(cell[COL_IF], sizeof(cell[0]), "%s", t->ifname[0] ? t->ifname : "-");
	snprintf(cell[COL_NUMA], sizeof(cell[0]), "%s", t->numa[0] ? t->numa : "-");
	if (t->shared)
		snprintf(cell[COL_CPUS], sizeof(cell[0]), "%s (shared by %d tasks)", t->cpus[0] ? t->cpus : "-", t->shared);
	else
		snprintf(cell[COL_CPUS], sizeof(cell[0]), "%s", t->cpus[0] ? t->cpus : "-");
}

void dl_map_plan_print(FILE *f, const struct dl_map_plan *p, const char *title)
{
	char cell[NCOLS][DL_MAP_LIST + 32];
	int w[NCOLS] = { 0 };

	for (int r = -1; r < p->ntasks; r++) {
		row_cells(p, r, cell);
		for (int c = 0; c < NCOLS; c++)
			if ((int)strlen(cell[c]) > w[c])
				w[c] = (int)strlen(cell[c]);
	}
	fprintf(f, "dljob: %s\n", title);
	for (int r = -1; r < p->ntasks; r++) {
		const struct dl_map_task *t = r >= 0 ? &p->task[r] : NULL;

		row_cells(p, r, cell);
		fprintf(f, "dljob: %-*s  %-*s  %-*s  %-*s  %-*s  %-*s  %s\n", w[0], cell[0], w[1], cell[1],
			w[2], cell[2], w[3], cell[3], w[4], cell[4], w[5], cell[5], cell[6]);
		if (t)
			fprintf(f, "dljob: %*s  why: gpu: %s; hca: %s; ifname: %s; numa: %s; cpus: %s\n", w[0], "",
				t->why_gpu, t->why_hca, t->why_ifname, t->why_numa[0] ? t->why_numa : "-", t->why_cpus);
	}
}

/* The next range of a list "0,1,3" or "0-3" (digits only: strtol alone
 * would take blanks and signs), moving *s past it and its comma.  Returns
 * 1 with [*lo, *hi], 0 at the end, -1 on a malformed range or an index
 * above DL_MAP_MAX_INDEX. */
static int next_range(const char **s, long *lo, long *hi)
{
	const char *c = *s;
	char *end;

	if (!*c)
		return 0;
	if (*c < '0' || *c > '9')
		return -1;
	errno = 0;
	*lo = strtol(c, &end, 10);
	if (errno || *lo > DL_MAP_MAX_INDEX)
		return -1;
	*hi = *lo;
	c = end;
	if (*c == '-') {
		c++;
		if (*c < '0' || *c > '9')
			return -1;
		*hi = strtol(c, &end, 10);
		if (errno || *hi < *lo || *hi > DL_MAP_MAX_INDEX)
			return -1;
		c = end;
	}
	if (*c == ',')
		c++;
	else if (*c)
		return -1;
	*s = c;
	return 1;
}

int dl_map_parse_index_list(const char *s, int *idx, int max)
{
	long lo, hi;
	int n = 0, r;

	if (!s)
		return -1;
	while ((r = next_range(&s, &lo, &hi)) > 0) {
		if (hi - lo >= (long)(max - n))
			return -1;
		for (long i = lo; i <= hi; i++)
			idx[n++] = (int)i;
	}
	return r < 0 ? -1 : n;
}

int dl_map_parse_cpu_list(const char *s, hwloc_bitmap_t out)
{
	long lo, hi;
	int r;

	hwloc_bitmap_zero(out);
	if (!s || !*s)
		return -1;
	while ((r = next_range(&s, &lo, &hi)) > 0)
		if (hwloc_bitmap_set_range(out, (unsigned)lo, (int)hi) < 0)
			return -1;
	return r < 0 ? -1 : hwloc_bitmap_weight(out);
}

int dl_map_slurm_cores(const struct dl_map *m, const char *cores, hwloc_bitmap_t out, char *err, size_t errlen)
{
	hwloc_obj_t root = hwloc_get_root_obj(m->topo);
	hwloc_bitmap_t abs = hwloc_bitmap_alloc();
	int n = hwloc_get_nbobjs_by_type(m->topo, HWLOC_OBJ_CORE), rv = -1, c;

	hwloc_bitmap_zero(out);
	if (!abs) {
		dl_errf(err, errlen, "out of memory");
		return -1;
	}
	if (dl_map_parse_cpu_list(cores, abs) <= 0) {
		dl_errf(err, errlen, "Slurm's core list is not a list of core numbers");
		goto out;
	}
	if (!m->has_cores) {
		dl_errf(err, errlen, "the topology has no Core objects");
		goto out;
	}
	/* Slurm counts the cores of the whole machine (its hwloc topology
	 * includes the CPUs a cgroup disallows); hwloc dropped some here. */
	if (root->complete_cpuset && !hwloc_bitmap_isequal(root->cpuset, root->complete_cpuset)) {
		dl_errf(err, errlen, "the topology lacks some of the machine's CPUs (disallowed or offline)");
		goto out;
	}
	if ((c = hwloc_bitmap_last(abs)) >= n) {
		dl_errf(err, errlen, "Slurm's core %d is not among the topology's %d cores", c, n);
		goto out;
	}
	hwloc_bitmap_foreach_begin(c, abs)
		hwloc_obj_t o = hwloc_get_obj_by_type(m->topo, HWLOC_OBJ_CORE, (unsigned)c);

		if (!o || !o->cpuset || hwloc_bitmap_or(out, out, o->cpuset) < 0) {
			dl_errf(err, errlen, o ? "out of memory" : "core %d is missing from the topology", c);
			goto out;
		}
	hwloc_bitmap_foreach_end();
	rv = 0;
out:
	hwloc_bitmap_free(abs);
	return rv;
}
