# tests/data/: the data pipeline (datasets, loader, decoders, shards).
# C tests
check_PROGRAMS += tests/data/test_loader tests/data/test_fmnist
TESTS += tests/data/test_loader tests/data/test_fmnist
tests_data_test_loader_SOURCES = tests/data/test_loader.c tests/data/check.h
tests_data_test_loader_LDADD = engine/data/libdldata.la
tests_data_test_fmnist_SOURCES = tests/data/test_fmnist.c tests/data/check.h
tests_data_test_fmnist_LDADD = engine/data/libdldata.la
# uint8 NHWC batches vs float32 NCHW, the ring allocator hook, bad combinations
check_PROGRAMS += tests/data/test_u8
TESTS += tests/data/test_u8
tests_data_test_u8_SOURCES = tests/data/test_u8.c tests/data/check.h
tests_data_test_u8_LDADD = engine/data/libdldata.la -lm

# helpers the Python tests drive (torchvision is the oracle there)
check_PROGRAMS += tests/data/dump_sample tests/data/dataset_tool tests/data/pack_tool
tests_data_dump_sample_SOURCES = tests/data/dump_sample.c
tests_data_dump_sample_LDADD = engine/data/libdldata.la
tests_data_dataset_tool_SOURCES = tests/data/dataset_tool.c
tests_data_dataset_tool_LDADD = engine/data/libdldata.la
tests_data_pack_tool_SOURCES = tests/data/pack_tool.c runtime/pack.h runtime/pack.c runtime/opttab.h runtime/opttab.c \
	common/optval.h common/optval.c
tests_data_pack_tool_LDADD = engine/data/libdldata.la

# Python tests
EXTRA_DIST += tests/data/fixtures.py
dist_check_SCRIPTS += tests/data/test_imagefolder.py tests/data/test_bad_inputs.py tests/data/test_pack.py \
	tests/data/test_hostile_files.py tests/data/test_decode_memory.py \
	tests/data/test_train_imagefolder.sh
TESTS += tests/data/test_imagefolder.py tests/data/test_bad_inputs.py tests/data/test_pack.py \
	tests/data/test_hostile_files.py tests/data/test_decode_memory.py \
	tests/data/test_train_imagefolder.sh

# the data benchmark, run by hand (tests/bench/bench_data.sh)
EXTRA_DIST += tests/bench/bench_data.sh tests/bench/bench_data_fixture.py tests/bench/bench_data_torch.py
