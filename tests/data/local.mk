# tests/data/: the data pipeline (datasets, loader, decoders, shards).
EXTRA_DIST += tests/data/check.h
check_PROGRAMS += tests/data/test_loader tests/data/test_fmnist
TESTS += tests/data/test_loader tests/data/test_fmnist
tests_data_test_loader_SOURCES = tests/data/test_loader.c
tests_data_test_loader_LDADD = engine/data/libdldata.la
tests_data_test_fmnist_SOURCES = tests/data/test_fmnist.c
tests_data_test_fmnist_LDADD = engine/data/libdldata.la
check_PROGRAMS += tests/data/dump_sample
tests_data_dump_sample_SOURCES = tests/data/dump_sample.c
tests_data_dump_sample_LDADD = engine/data/libdldata.la
check_PROGRAMS += tests/data/dataset_tool
tests_data_dataset_tool_SOURCES = tests/data/dataset_tool.c
tests_data_dataset_tool_LDADD = engine/data/libdldata.la
EXTRA_DIST += tests/data/fixtures.py
dist_check_SCRIPTS += tests/data/test_imagefolder.py tests/data/test_bad_inputs.py
TESTS += tests/data/test_imagefolder.py tests/data/test_bad_inputs.py
