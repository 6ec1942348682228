#!/bin/bash
# Relative --dl-data and --dl-out (and the default ./dljob-<jobid>) mean the
# path under the step's working directory on the host (srun's, its --chdir,
# a batch script's), made absolute by slurmstepd before any container
# plugin moves the task: the runtime gets absolute --data and --out, in
# both plugstack.conf orders, even when the "container" starts the task
# elsewhere (--container-workdir of tests/slurm/container_spank.c, a
# stand-in for pyxis, NOT pyxis).  The real runtime then refuses, before
# reading any data, an output directory that would not reach the host: the
# working directory not mounted in the container (another directory at its
# path), or a read-only one, each with a message naming --dl-out and the
# mount to add.  dljob listed first needs Slurm 23.11+ (prepend_argv).
. "${DLJOB_SRCDIR:?run under make check}/tests/slurm/test_spank_lib.bash" || exit 1
so=$DLJOB_BUILDDIR/tests/slurm/.libs/container_spank.so
[ -f "$so" ] || fail "$so is not built"
[ -x "${DLJOB_BIN:-}" ] || fail "DLJOB_BIN=${DLJOB_BIN:-} is not built"
spank_cluster_up
cd "$WORK" || fail "cd $WORK"
read -r maj min < <(srun --version | sed -n 's/^slurm[^ ]* \([0-9]*\)\.\([0-9]*\).*/\1 \2/p')
[ -n "$maj" ] || fail "cannot read srun --version"
orders=container-first
[ $((maj * 100 + min)) -ge 2311 ] && orders="container-first dljob-first"
fake=$DLJOB_SRCDIR/tests/slurm/test_spank_fake_runtime.sh
export FAKE_RUNTIME_LOG=$WORK/log
mkdir -p log sub/data/x cwork img data/x empty ro || fail mkdir
order() {
	case $1 in
	dljob-first) printf 'required %s %s\nrequired %s\n' "$DLJOB_SPANK" "$2" "$so" ;;
	container-first) printf 'required %s\nrequired %s %s\n' "$so" "$DLJOB_SPANK" "$2" ;;
	esac >"$CLUSTER_DIR/plugstack.conf.new" && mv -f "$CLUSTER_DIR/plugstack.conf.new" "$CLUSTER_DIR/plugstack.conf" ||
		fail "plugstack.conf"
}
ctr=(--container-image="$WORK/img" --container-workdir="$WORK/cwork")
runarg() { sed -n "s/^arg$1=//p" log/rank0.0; }

runtime_on_path "$fake"
for o in $orders; do
	order $o "runtime=$fake data_allow=$WORK"
	# srun --chdir, the task started elsewhere by the container plugin.
	rm -f log/*
	srun -w n1 -n1 --chdir="$WORK/sub" "${ctr[@]}" --dl-job=resnet20 --dl-data=data/x --dl-out=run dljob \
		>out.txt 2>err.txt || fail "$o: relative paths with --chdir: $(cat err.txt)"
	[ "$(runarg 4)" = "$WORK/sub/data/x" ] && [ "$(runarg 6)" = "$WORK/sub/run" ] ||
		fail "$o: --chdir: --data $(runarg 4) --out $(runarg 6)"
	# The default --dl-out from srun's own directory.
	rm -f log/*
	(cd sub && srun -w n1 -n1 "${ctr[@]}" --dl-job=resnet20 --dl-data=data/x dljob) >out.txt 2>err.txt ||
		fail "$o: the default --dl-out: $(cat err.txt)"
	job=$(sed -n 's/^SLURM_JOB_ID=//p' log/rank0.0)
	[ -n "$job" ] && [ "$(runarg 6)" = "$WORK/sub/dljob-$job" ] || fail "$o: the default --out is $(runarg 6)"
	echo "ok   $o, Slurm $maj.$min: relative --dl-data/--dl-out (and the default) from the step's directory on the host"
done
# sbatch --chdir: the batch script (on the host) runs srun with the
# container options.
order container-first "runtime=$fake data_allow=$WORK"
rm -f log/*
jid=$(sbatch --parsable -N1 -n1 --chdir="$WORK/sub" --dl-job=resnet20 --dl-data=data/x --dl-out=run \
	-o "$WORK/sb.out" --wrap "srun ${ctr[*]} dljob") || fail "sbatch"
for _ in $(seq 1 300); do [ -f log/rank0.0 ] && ! squeue -h -j "$jid" | grep -q . && break; sleep 0.2; done
[ "$(runarg 4)" = "$WORK/sub/data/x" ] && [ "$(runarg 6)" = "$WORK/sub/run" ] ||
	fail "sbatch --chdir: --data $(runarg 4) --out $(runarg 6): $(cat sb.out)"
echo "ok   sbatch --chdir: relative paths from the batch script's directory, in a container"

# The real runtime: an output directory that would not reach the host is
# refused before the (here empty) data is read.
runtime_on_path "$DLJOB_BIN"
for o in $orders; do
	order $o "runtime=$DLJOB_BIN"
	# Another directory at the working directory's path in the container.
	(cd sub && srun -w n1 -n1 --container-image="$WORK/img" --container-mounts="$WORK/empty:$WORK/sub" \
		--container-workdir="$WORK/sub" --dl-job=resnet20 --dl-data="$WORK/data/x" dljob) >out.txt 2>err.txt &&
		fail "$o: ran with the output directory off the host"
	grep -qF "dljob: --dl-out $WORK/sub/dljob-" err.txt &&
		grep -qF "is under the step's working directory $WORK/sub, which is not the host's here" err.txt &&
		grep -qF -- "--container-mounts=$WORK/sub:$WORK/sub" err.txt || fail "$o: no clear refusal: $(cat err.txt)"
	[ -z "$(ls empty)" ] || fail "$o: wrote into the container's directory: $(ls empty)"
	# A read-only output directory.
	srun -w n1 -n1 --container-image="$WORK/img" --container-mounts="$WORK/ro:$WORK/ro:ro" \
		--dl-job=resnet20 --dl-data="$WORK/data/x" --dl-out="$WORK/ro" dljob >out.txt 2>err.txt &&
		fail "$o: ran with a read-only --dl-out"
	grep -qF "dljob: --dl-out $WORK/ro: not writable here: Read-only file system" err.txt ||
		fail "$o: no clear refusal of a read-only --dl-out: $(cat err.txt)"
	# The working directory mounted at its path: the data is reached.
	(cd sub && srun -w n1 -n1 --container-image="$WORK/img" --container-mounts="$WORK/sub:$WORK/sub" \
		--container-workdir="$WORK/cwork" --dl-job=resnet20 --dl-data="$WORK/data/x" dljob) >out.txt 2>err.txt
	grep -q "not the host's\|not writable" err.txt && fail "$o: a mounted working directory was refused: $(cat err.txt)"
	grep -qF "dljob: --data $WORK/data/x:" err.txt || fail "$o: the runtime did not reach the data: $(cat err.txt)"
	echo "ok   $o, Slurm $maj.$min: --dl-out off the host or read-only in the container is refused, naming the mount"
done
nodes_idle
