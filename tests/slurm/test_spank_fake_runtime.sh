#!/bin/bash
# A stand-in for the dljob runtime in the plugin tests (plugstack runtime=):
# records its argv as the real runtime sees it (the plugin's DLJOB_MODEL,
# DLJOB_DATA, DLJOB_EPOCHS, DLJOB_BATCH, DLJOB_LR, DLJOB_OUT as --model ...
# --out options first, then its own arguments, see dl_cli_plugin_argv), the
# rank variables, what Slurm's task set-up gave it (soft open-files limit,
# TMPDIR, a later test plugin's marker) and its CPU affinity in
# $FAKE_RUNTIME_LOG/rank$RANK, then exits with $FAKE_RUNTIME_RC_<RANK> (0).
# In the run whose SLURM_RESTART_COUNT (0 if unset) equals FAKE_RUNTIME_WAIT
# it waits for SIGUSR1 (a preemption warning), records it and exits 0, as
# the real runtime does after a checkpoint.
log=${FAKE_RUNTIME_LOG:?}/rank${RANK:-unset}.${SLURM_RESTART_COUNT:-0}
plugin=()
# Slurm 23.11+: the plugin prepended the runtime, and $1 is the user's word
# "dljob" (runtime/cli.c dl_cli_plugin_argv skips it the same way).
if [ -n "${DLJOB_MODEL-}" ] && [ "${DLJOB_PREPENDED-}" = 1 ] && [ $# -gt 0 ]; then
	shift
fi
if [ -n "${DLJOB_MODEL-}" ]; then
	for kv in MODEL:--model DATA:--data EPOCHS:--epochs BATCH:--batch LR:--lr OUT:--out; do
		v=DLJOB_${kv%%:*}
		[ -n "${!v+set}" ] && plugin+=("${kv#*:}" "${!v}")
	done
fi
set -- "${plugin[@]}" "$@"
{
	printf 'argv0=%s\n' "$0"
	i=1
	for a in "$@"; do printf 'arg%d=%s\n' $i "$a"; i=$((i + 1)); done
	for v in RANK LOCAL_RANK WORLD_SIZE LOCAL_WORLD_SIZE MASTER_ADDR MASTER_PORT DLJOB_GPU \
		DLJOB_GPU_BUSID CUDA_VISIBLE_DEVICES NCCL_IB_HCA SLURM_JOB_ID SLURM_RESTART_COUNT TMPDIR \
		DLJOB_TEST_MARKER DLJOB_JOB_SECRET; do
		printf '%s=%s\n' "$v" "${!v-}"
	done
	printf 'nofile=%s\n' "$(ulimit -Sn)"
	grep '^Cpus_allowed_list' /proc/self/status
} >"$log"
if [ "${FAKE_RUNTIME_WAIT-x}" = "${SLURM_RESTART_COUNT:-0}" ]; then
	trap 'echo usr1=1 >>"$log"; exit 0' USR1
	echo waiting >>"$log"
	# sleep in the background: USR1 reaches it too, and a foreground child
	# killed by it would make bash print "User defined signal 1".
	for _ in $(seq 1 600); do
		sleep 0.1 &
		wait $!
	done
	echo usr1=0 >>"$log"
	exit 0
fi
rcvar=FAKE_RUNTIME_RC_${RANK:-0}
exit "${!rcvar:-0}"
