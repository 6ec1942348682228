#!/bin/bash
# Log forgery: a --dl-* value with a control character, whether given to
# srun or planted in the job environment as _SLURM_SPANK_OPTION_dljob_*
# (which reaches slurmstepd without srun's checks), is refused with one
# clear line; the step fails cleanly, the node stays up, and no forged
# line reaches the root-owned slurmd log (user bytes are escaped there).
. "${DLJOB_SRCDIR:?run under make check}/tests/slurm/test_spank_lib.bash" || exit 1
spank_cluster_up
cd "$WORK" || fail "cd $WORK"
forged='error: FORGED-BY-USER slurmd shutting down'
nl=$'\n'

# Through the job environment, past srun: every value the plugin reads.
for opt in dl_job dl_data dl_epochs dl_lr dl_out dl_bind; do
	val="resnet20${nl}${forged}"
	[ $opt = dl_job ] || val="x${nl}${forged}"
	out=$(env "_SLURM_SPANK_OPTION_dljob_$opt=$val" srun -N1 -n1 true 2>&1) &&
		fail "slurmstepd accepted a newline in --${opt//_/-}: $out"
	grep -qF "dljob: --${opt//_/-}: the value '" <<<"$out" && grep -qF "holds a control character" <<<"$out" ||
		fail "no clear error for a newline in --${opt//_/-}: $out"
	echo "ok   --${opt//_/-} with a newline via the environment: refused"
done
# Through srun itself.
out=$(srun -N1 -n1 --dl-job="env${nl}${forged}" true 2>&1) && fail "srun accepted a newline in --dl-job: $out"
grep -qF "dljob: --dl-job: the value 'env\\n$forged' holds a control character" <<<"$out" ||
	fail "srun: no clear error for a newline: $out"
echo "ok   srun --dl-job with a newline: refused before launch"
# A message that quotes a path from the file system escapes it too.
mkdir -p "data/evil${nl}${forged}" || fail mkdir
ln -sfn "$WORK/data/evil${nl}${forged}" "$WORK/data/link" || fail ln
cluster_plugstack "data_allow=$WORK/other"
out=$(srun -N1 -n1 --dl-job=env --dl-data=data/link true 2>&1) && fail "data outside data_allow accepted: $out"
grep -qF 'is outside the allowed data directories' <<<"$out" || fail "no error for data outside data_allow: $out"
cluster_plugstack ""

# The refused values reach the logs once slurmd/slurmstepd have written
# them: wait for that (a fixed 1 s raced a loaded machine), then look.
for _ in $(seq 600); do grep -rqF 'FORGED-BY-USER' "$CLUSTER_DIR/log" && break; sleep 0.1; done
sleep 1
if grep -rn "FORGED-BY-USER" "$CLUSTER_DIR/log" | grep -v '\\n' | grep -q .; then
	fail "a forged line reached a Slurm log:
$(grep -rn "FORGED-BY-USER" "$CLUSTER_DIR/log" | grep -v '\\n')"
fi
grep -rqF 'FORGED-BY-USER' "$CLUSTER_DIR/log" || fail "the refused values were not logged at all"
echo "ok   no forged line in the slurmd/slurmctld logs (values are escaped: $(grep -rhoF "\\n$forged" "$CLUSTER_DIR/log" | head -1))"
nodes_idle
