/* The plan as a table (dl_map_plan_print). */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "mapping/internal.h"

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
