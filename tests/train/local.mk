# tests/train/train.mk: the training loop, checkpoints/preemption and the
# dljob command line, end to end through the built dljob.
TRAIN_TESTS = \
	tests/train/test_cli.sh \
	tests/train/test_plan.sh \
	tests/train/test_precision_auto.sh \
	tests/train/test_index_cache.sh \
	tests/train/test_fmnist_cache.sh \
	tests/train/test_resume.sh \
	tests/train/test_resume_change.sh \
	tests/train/test_out_full.sh \
	tests/train/test_out_eio.sh \
	tests/train/test_ckpt_kill.sh \
	tests/train/test_report.sh \
	tests/train/test_resume_slurm.sh \
	tests/train/test_tfevents.sh \
	tests/train/test_train_ddp.sh \
	tests/train/test_train_fmnist.sh \
	tests/train/test_train_u8.sh \
	tests/train/test_train_imagefolder.sh
TESTS += $(TRAIN_TESTS)
dist_check_SCRIPTS += $(TRAIN_TESTS)
# An LD_PRELOAD shim for test_cli.sh: another user's move on the output
# directory's path, between dljob's check of it and its making.
check_LTLIBRARIES += tests/train/libout_swap.la
tests_train_libout_swap_la_SOURCES = tests/train/out_swap.c
tests_train_libout_swap_la_LDFLAGS = -module -avoid-version -shared -rpath /nowhere
# --precision bf16 trains resnet20 on Fashion-MNIST like fp32 does.
TESTS += tests/train/test_bf16_fmnist.sh
dist_check_SCRIPTS += tests/train/test_bf16_fmnist.sh
# Interop (issue 16): dljob eval against torchvision's evaluation of a
# torchvision-trained resnet18, --init and fine-tuning with --init-head new,
# on the photos in tests/data/photos (where they come from: SOURCES.md there)
dist_check_SCRIPTS += tests/train/test_interop.py
TESTS += tests/train/test_interop.py
EXTRA_DIST += tests/data/photos
