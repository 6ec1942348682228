# tests/fuzz/local.mk: libFuzzer targets and the sanitizer run (make check-asan).
#
# Conventions (adding a fuzz target, e.g. fuzz_star):
#  - tests/fuzz/fuzz_star.c defines LLVMFuzzerTestOneInput (no main) and says
#    in its header comment what the input is; tests/fuzz/fuzz_util.h has a
#    private scratch dir for parsers that read files by path.
#  - tests/fuzz/corpus/fuzz_star/: a few small seed inputs (valid and almost
#    valid ones), committed.  make check-asan never writes there.
#  - here: one line `FUZZ_TARGETS += tests/fuzz/fuzz_star`, plus its
#    LDFLAGS line (always $(FUZZ_LINKFLAGS)) and what it links: a library
#    (_LDADD) or the parser's own sources (_SOURCES = tests/fuzz/fuzz_star.c
#    runtime/x.c ..., with _CFLAGS/_LDADD as the unit test of that code has).
#  - Unit tests that should also run under ASan+UBSan: add them to
#    ASAN_TESTS (anything in TESTS that needs no Slurm cluster), and the
#    programs they run besides themselves to ASAN_TOOLS.  Only those are
#    built in _asan/: libdlengine (oneDNN, AVX-512 kernels under GCC pragmas)
#    and so the dljob binary are not built with clang.
# The targets are EXTRA_PROGRAMS: a normal build never makes them; make
# check-asan builds them in _asan/ with clang.  By hand, after a check-asan:
#   cd _build/_asan && tests/fuzz/fuzz_star -max_total_time=600 \
#       fuzz-work/fuzz_star ../../tests/fuzz/corpus/fuzz_star
FUZZ_LINKFLAGS = -fsanitize=fuzzer
FUZZ_TARGETS =
include tests/fuzz/spank.mk
EXTRA_DIST += tests/fuzz/fuzz_util.h tests/fuzz/corpus tests/fuzz/gen_corpus.py tests/fuzz/lsan.supp

FUZZ_TARGETS += tests/fuzz/fuzz_idx
tests_fuzz_fuzz_idx_LDFLAGS = $(FUZZ_LINKFLAGS)
tests_fuzz_fuzz_idx_LDADD = engine/data/libdldata.la

FUZZ_TARGETS += tests/fuzz/fuzz_shards
tests_fuzz_fuzz_shards_LDFLAGS = $(FUZZ_LINKFLAGS)
tests_fuzz_fuzz_shards_LDADD = engine/data/libdldata.la

FUZZ_TARGETS += tests/fuzz/fuzz_imagefolder
tests_fuzz_fuzz_imagefolder_LDFLAGS = $(FUZZ_LINKFLAGS)
tests_fuzz_fuzz_imagefolder_LDADD = engine/data/libdldata.la

FUZZ_TARGETS += tests/fuzz/fuzz_image
tests_fuzz_fuzz_image_LDFLAGS = $(FUZZ_LINKFLAGS)
tests_fuzz_fuzz_image_LDADD = engine/data/libdldata.la

FUZZ_TARGETS += tests/fuzz/fuzz_checkpoint
# from its sources: the rest of libdlengine (oneDNN, the AVX-512 kernels) is
# not built under clang
tests_fuzz_fuzz_checkpoint_SOURCES = tests/fuzz/fuzz_checkpoint.c \
	engine/checkpoint.c engine/safetensors.c engine/optim.c
tests_fuzz_fuzz_checkpoint_CFLAGS = $(AM_CFLAGS) $(OPENMP_CFLAGS) $(JANSSON_CFLAGS)
tests_fuzz_fuzz_checkpoint_LDFLAGS = $(FUZZ_LINKFLAGS) $(OPENMP_CFLAGS)
tests_fuzz_fuzz_checkpoint_LDADD = $(JANSSON_LIBS) -lm

FUZZ_TARGETS += tests/fuzz/fuzz_star
# the rendezvous messages from rank 0's and the members' side
tests_fuzz_fuzz_star_SOURCES = tests/fuzz/fuzz_star.c world/world_star.c world/world_net.c \
	world/world_auth.c
tests_fuzz_fuzz_star_CFLAGS = $(AM_CFLAGS) $(SODIUM_CFLAGS)
tests_fuzz_fuzz_star_LDFLAGS = $(FUZZ_LINKFLAGS)
tests_fuzz_fuzz_star_LDADD = $(SODIUM_LIBS)

FUZZ_TARGETS += tests/fuzz/fuzz_metrics
# dljob report's reading of metrics.jsonl, its numbers and the plot
tests_fuzz_fuzz_metrics_SOURCES = tests/fuzz/fuzz_metrics.c engine/metrics_read.c runtime/report.c \
	runtime/plot.c runtime/opttab.c common/optval.c
tests_fuzz_fuzz_metrics_CFLAGS = $(AM_CFLAGS) $(JANSSON_CFLAGS) $(CAIRO_CFLAGS)
tests_fuzz_fuzz_metrics_LDFLAGS = $(FUZZ_LINKFLAGS)
tests_fuzz_fuzz_metrics_LDADD = $(JANSSON_LIBS) $(CAIRO_LIBS) -lfontconfig -lm

FUZZ_TARGETS += tests/fuzz/fuzz_env
# the runtime's environment: the process group's variables and the plugin's
tests_fuzz_fuzz_env_SOURCES = tests/fuzz/fuzz_env.c world/world_env.c world/env.c common/optval.c \
	common/master.c common/hostlist.c
tests_fuzz_fuzz_env_LDFLAGS = $(FUZZ_LINKFLAGS)

FUZZ_TARGETS += tests/fuzz/fuzz_mca
# Open MPI's parameter files, scanned for btl_tcp_if_include (world/world_ompi.c)
tests_fuzz_fuzz_mca_SOURCES = tests/fuzz/fuzz_mca.c world/world_ompi.c world/world_net.c common/optval.c
tests_fuzz_fuzz_mca_LDFLAGS = $(FUZZ_LINKFLAGS)

EXTRA_PROGRAMS = $(FUZZ_TARGETS)

# The unit tests make check-asan runs under the sanitizers: every C unit
# test in TESTS but the CUDA ones (the sanitizer build is --without-cuda),
# and the Python tests that drive ASAN_TOOLS, except test_decode_memory.py
# (it measures peak RSS, which ASan's shadow memory changes).
ASAN_TESTS = engine/data/test/test_loader engine/data/test/test_fmnist engine/data/test/test_u8 \
	engine/data/test/test_hostile_files.py engine/test/test_checkpoint_parse engine/test/test_ops \
	engine/test/test_memplan engine/test/test_model engine/test/test_gradcheck engine/test/test_net \
	engine/test/test_net_blk engine/test/test_bf16_ops engine/test/test_bf16_net \
	engine/test/test_overlap engine/data/test/test_resume_shard \
	engine/data/test/test_bad_inputs.py engine/data/test/test_pack.py engine/data/test/test_imagefolder.py \
	spank/test/test_spank_units world/test/test_world_env world/test/test_run_env mapping/test/test_map \
	world/test/test_world_star common/test/test_hostlist world/test/test_world_ompi
ASAN_TOOLS = engine/data/test/dataset_tool engine/data/test/pack_tool engine/data/test/dump_sample
