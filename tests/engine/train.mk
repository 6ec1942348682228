# tests/engine/train.mk: the training loop, checkpoints/preemption and the
# dljob command line, end to end through the built dljob.
TRAIN_TESTS = \
	tests/engine/test_cli.sh \
	tests/engine/test_plan.sh \
	tests/engine/test_index_cache.sh \
	tests/engine/test_fmnist_cache.sh \
	tests/engine/test_resume.sh \
	tests/engine/test_resume_change.sh \
	tests/engine/test_out_full.sh \
	tests/engine/test_out_eio.sh \
	tests/engine/test_ckpt_kill.sh \
	tests/engine/test_report.sh \
	tests/engine/test_resume_slurm.sh \
	tests/engine/test_tfevents.sh \
	tests/engine/test_train_ddp.sh \
	tests/engine/test_train_fmnist.sh \
	tests/engine/test_train_u8.sh
TESTS += $(TRAIN_TESTS)
dist_check_SCRIPTS += $(TRAIN_TESTS)
# An LD_PRELOAD shim for test_cli.sh: another user's move on the output
# directory's path, between dljob's check of it and its making.
check_LTLIBRARIES += tests/engine/libout_swap.la
tests_engine_libout_swap_la_SOURCES = tests/engine/out_swap.c
tests_engine_libout_swap_la_LDFLAGS = -module -avoid-version -shared -rpath /nowhere
# Resuming on another rank count: the samples of each global step do not
# depend on ranks x per-rank batch (what dl_checkpoint_check relies on).
check_PROGRAMS += tests/engine/test_resume_shard
TESTS += tests/engine/test_resume_shard
tests_engine_test_resume_shard_SOURCES = tests/engine/test_resume_shard.c tests/data/check.h
tests_engine_test_resume_shard_LDADD = engine/data/libdldata.la
