/* The mapping library's topology: an hwloc XML file checked in a child
 * process, or this machine's, with its GPUs, NICs and NUMA nodes found and
 * sorted (rules in mapping/mapping.h). */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/err.h"
#include "mapping/internal.h"

static int is_gpu(hwloc_obj_t o)
{
	unsigned v = o->attr->pcidev.vendor_id, c = o->attr->pcidev.class_id;

	if (v == 0x10de)
		return c == 0x0300 || c == 0x0302;
	if (v == 0x1002)
		return c == 0x0380 || c == 0x1200;
	return 0;
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
