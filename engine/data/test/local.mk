# engine/data/test/: the data pipeline's unit tests (datasets, loader,
# decoders, shards), C and Python (torchvision is the oracle there).
# C tests
check_PROGRAMS += engine/data/test/test_loader engine/data/test/test_fmnist
TESTS += engine/data/test/test_loader engine/data/test/test_fmnist
engine_data_test_test_loader_SOURCES = engine/data/test/test_loader.c tests/check.h
engine_data_test_test_loader_LDADD = engine/data/libdldata.la
engine_data_test_test_fmnist_SOURCES = engine/data/test/test_fmnist.c tests/check.h
engine_data_test_test_fmnist_LDADD = engine/data/libdldata.la
# uint8 NHWC batches vs float32 NCHW, the ring allocator hook, bad combinations
check_PROGRAMS += engine/data/test/test_u8
TESTS += engine/data/test/test_u8
engine_data_test_test_u8_SOURCES = engine/data/test/test_u8.c tests/check.h
engine_data_test_test_u8_LDADD = engine/data/libdldata.la -lm

# helpers the Python tests drive (torchvision is the oracle there)
check_PROGRAMS += engine/data/test/dump_sample engine/data/test/dataset_tool engine/data/test/pack_tool
engine_data_test_dump_sample_SOURCES = engine/data/test/dump_sample.c
engine_data_test_dump_sample_LDADD = engine/data/libdldata.la
engine_data_test_dataset_tool_SOURCES = engine/data/test/dataset_tool.c
engine_data_test_dataset_tool_LDADD = engine/data/libdldata.la
engine_data_test_pack_tool_SOURCES = engine/data/test/pack_tool.c runtime/pack.h runtime/pack.c runtime/opttab.h runtime/opttab.c \
	common/optval.h common/optval.c
engine_data_test_pack_tool_LDADD = engine/data/libdldata.la

# Python tests
EXTRA_DIST += engine/data/test/fixtures.py
dist_check_SCRIPTS += engine/data/test/test_imagefolder.py engine/data/test/test_bad_inputs.py engine/data/test/test_pack.py \
	engine/data/test/test_hostile_files.py engine/data/test/test_decode_memory.py
TESTS += engine/data/test/test_imagefolder.py engine/data/test/test_bad_inputs.py engine/data/test/test_pack.py \
	engine/data/test/test_hostile_files.py engine/data/test/test_decode_memory.py
# Resuming on another rank count: the samples of each global step do not
# depend on ranks x per-rank batch (what dl_checkpoint_check relies on).
check_PROGRAMS += engine/data/test/test_resume_shard
TESTS += engine/data/test/test_resume_shard
engine_data_test_test_resume_shard_SOURCES = engine/data/test/test_resume_shard.c tests/check.h
engine_data_test_test_resume_shard_LDADD = engine/data/libdldata.la
