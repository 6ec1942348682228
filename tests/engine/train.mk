# tests/engine/train.mk: the training loop, checkpoints/preemption and the
# dljob command line, end to end through the built dljob.
TRAIN_TESTS = \
	tests/engine/test_cli.sh \
	tests/engine/test_index_cache.sh \
	tests/engine/test_fmnist_cache.sh \
	tests/engine/test_resume.sh \
	tests/engine/test_report.sh \
	tests/engine/test_resume_slurm.sh \
	tests/engine/test_tfevents.sh \
	tests/engine/test_train_ddp.sh \
	tests/engine/test_train_fmnist.sh \
	tests/engine/test_train_u8.sh
TESTS += $(TRAIN_TESTS)
dist_check_SCRIPTS += $(TRAIN_TESTS)
