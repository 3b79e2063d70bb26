# tbon - plain Makefile. Everything is built into $(B) (default build/).
#   make              library, programs, tests
#   make check        install missing deps, build, run every test (also under ASan+UBSan
#                     and under ThreadSanitizer)
#   make tsan         build with ThreadSanitizer into $(B)/tsan, run the tests there
#   make check-cluster  root: the tests on an emulated cluster (tests/cluster/README.md)
#   make demo         run the main job on a local default topology
#   make demo-stat    tbon_stat on 64 stuck processes (stat/examples/stat_hang)
#   make bench        run the benchmarks, write bench/RESULTS.md
#   make fuzz-smoke   run each libFuzzer harness for a bounded time
#   make install PREFIX=/usr/local
#   make clean
# Variables: B=build dir, SAN=1 (address+undefined sanitizers), TSAN=1 (thread
# sanitizer), CI (adds -Werror).

B      ?= build
PREFIX ?= /usr/local
CC     ?= cc
SAN    ?=
TSAN   ?=

# libxml2's headers only: libtbon loads libxml2.so.2 itself the first time
# it parses an XML topology (libtbon/topo/topology_xml.c).
XML_CFLAGS := $(shell pkg-config --cflags libxml-2.0 2>/dev/null || echo -I/usr/include/libxml2)

WARN    := -Wall -Wextra -Wstrict-prototypes -Wshadow -Wformat=2 -Wno-format-nonliteral
# The sanitizer builds at -O1, as both sanitizers' documentation advises:
# they compile faster (AddressSanitizer's: 53 s against 71 s here), and
# their short tiers ran within 5% of the time they took at -O2.
ifneq ($(SAN)$(TSAN),)
CFLAGS  ?= -O1 -g
endif
CFLAGS  ?= -O2 -g
CFLAGS  += -std=c11 $(WARN) -fPIC -MMD -MP -pthread -D_GNU_SOURCE \
           -Iinclude -Ilibtbon $(XML_CFLAGS)
ifneq ($(CI),)
CFLAGS  += -Werror
endif
ifneq ($(SAN),)
CFLAGS  += -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
LDFLAGS += -fsanitize=address,undefined
endif
# ThreadSanitizer (its own build: it cannot be combined with ASan). Plug-ins
# are built with it too, so that the filters the node threads run are seen.
# Every test runs under it: libxml2 (dlopened, not instrumented) is called
# only by the thread that loads a topology file, and tbon_stat's ptrace of
# uninstrumented targets (stat/examples) works. tests/run.sh fails a test on
# any report.
ifneq ($(TSAN),)
CFLAGS  += -fsanitize=thread -fno-omit-frame-pointer
LDFLAGS += -fsanitize=thread
endif
# Link-time optimisation of the library for its programs, benchmarks and
# shared library (not the sanitizer builds). The library is many small files
# of one job each; optimised as one unit (libtbon-lto.o, once per build: about
# 7 s here), calls between its files are inlined again: a wave's round trip
# at 8x8 took 3-4% less, in every one of 5 alternating runs (bench/RESULTS.md,
# "the library optimised as one unit"). The objects are fat (IR and machine
# code): the tests link libtbon.a as before, member by member, without
# LTO. GCC only (these are its options); LTO= turns it off.
ifeq ($(SAN)$(TSAN),)
ifneq ($(findstring gcc version,$(shell $(CC) -v 2>&1)),)
LTO ?= -flto=auto
endif
endif
# Every other link uses the objects' machine code (a link that sees their IR
# would otherwise optimise the whole library again: 6 s per test program).
LDFLAGS += $(if $(LTO),-fno-lto)
# Where a front-end looks for tbon_commnode when $$TBON_COMMNODE is unset (after
# the directory of its own executable): this build's bin/, then PATH.
CFLAGS  += -DTBON_BUILD_BINDIR='"$(abspath $(B))/bin"'
LIBS    := -lsodium -lz -ldl -lpthread -lm

# The shared library is laid out as an installed one: libtbon.so.MAJOR.MINOR,
# the file; libtbon.so.MAJOR, its soname, a link to it (what programs load);
# libtbon.so, a link to that (what -ltbon finds). VERSION is tbon.pc's too.
VERSION  := 0.1.0
SO_MAJOR := $(word 1,$(subst ., ,$(VERSION)))
SO_MINOR := $(word 2,$(subst ., ,$(VERSION)))
SONAME   := libtbon.so.$(SO_MAJOR)
SO_FILE  := $(SONAME).$(SO_MINOR)

# The library: every .c in libtbon/'s layer folders (docs/architecture.md;
# scripts/layers.sh checks that each includes only the layers below it).
LIB_SRC := $(wildcard libtbon/*/*.c)
LIB_OBJ := $(LIB_SRC:%.c=$(B)/obj/%.o)

# Programs: name -> sources (each program's main file, plus helpers if any).
PROGRAMS := tbon_topgen tbon_commnode tbon_frontend tbon_example_be
tbon_topgen_SRC     := topologies/tbon_topgen.c
tbon_commnode_SRC   := commnode/tbon_commnode.c
tbon_frontend_SRC   := frontend-api/tbon_frontend.c frontend-api/fe_cli.c frontend-api/fe_start.c \
                       frontend-api/fe_waves.c frontend-api/fe_values.c frontend-api/fe_ping.c \
                       frontend-api/fe_perf.c
tbon_example_be_SRC := backend-api/tbon_example_be.c
# Libraries a program needs beyond libtbon's: jansson writes --json.
tbon_frontend_LIBS  := -ljansson
BIN := $(PROGRAMS:%=$(B)/bin/%)

# Filter plug-ins: filters/*.c, each one shared object. They are not linked
# with libtbon: the tbon_* symbols they call come from the process that loads
# them (programs are linked with --export-dynamic and the whole library).
PLUGIN_SRC := $(wildcard filters/*.c)
PLUGIN_SO  := $(PLUGIN_SRC:filters/%.c=$(B)/filters/%.so)
# Plug-ins only the tests use (broken on purpose, slow, ...): tests/plugins/*.c.
TPLUGIN_SRC := $(wildcard tests/plugins/*.c)
TPLUGIN_SO  := $(TPLUGIN_SRC:tests/plugins/%.c=$(B)/tests/plugins/%.so)

# tbon_stat (stat/, docs/stat.md): the stack-trace tool. The program is
# STAT_PROG_SRC, main and its parts (stat/README.md); its library parts, the
# other stat/st_*.c (prefix trees, the stack walker, tasks and jobs), go
# into libtbonstat.a, which tests link too, and use elfutils' libdw; the
# merge filter is a plug-in with the prefix-tree code in it;
# stat/examples/*.c are targets to sample, built without sanitizers and
# without optimisation, so that their stacks are what the source says.
STAT_PROG_SRC := stat/tbon_stat.c stat/st_cli.c stat/st_plan.c stat/st_topo.c stat/st_procs.c \
                 stat/st_be.c stat/st_fe.c stat/st_out.c stat/st_draw.c stat/st_prog.c \
                 stat/st_session.c
STAT_LIB_SRC := $(filter-out $(STAT_PROG_SRC),$(wildcard stat/st_*.c))
STAT_LIB_OBJ := $(STAT_LIB_SRC:%.c=$(B)/obj/%.o)
STAT_LIBS    := -ldw -lelf -ljansson
STAT_BIN     := $(B)/bin/tbon_stat
STAT_SO      := $(B)/stat/stat_merge.so
STAT_EX_SRC  := $(wildcard stat/examples/*.c)
STAT_EX_BIN  := $(STAT_EX_SRC:stat/examples/%.c=$(B)/stat/examples/%)
# stat/examples/mpi/*.c are MPI programs, built with mpicc where there is one
# (scripts/deps.sh installs Open MPI; test_stat samples a real hung MPI job).
MPICC        := $(shell command -v mpicc 2>/dev/null)
STAT_MPI_SRC := $(wildcard stat/examples/mpi/*.c)
STAT_MPI_BIN := $(if $(MPICC),$(STAT_MPI_SRC:stat/examples/mpi/%.c=$(B)/stat/examples/%))
STAT_ALL     := $(if $(wildcard stat/tbon_stat.c),$(STAT_BIN)) \
                $(if $(wildcard stat/stat_merge.c),$(STAT_SO)) $(STAT_EX_BIN) $(STAT_MPI_BIN) \
                $(if $(STAT_LIB_SRC),$(B)/lib/libtbonstat.a)

# Integration tests: tests/integration/test_*.c (with the harness); the
# programs they start: tests/integration/tbon_*.c, into $(B)/tests/bin/.
ITEST_SRC := $(wildcard tests/integration/test_*.c)
ITEST_BIN := $(ITEST_SRC:tests/integration/%.c=$(B)/tests/integration/%)
IPROG_SRC := $(wildcard tests/integration/tbon_*.c)
IPROG_BIN := $(IPROG_SRC:tests/integration/%.c=$(B)/tests/bin/%)

# examples/*/: each a small FE, BE and filter a user can copy (see its README).
EX_DIRS := $(patsubst %/,%,$(dir $(wildcard examples/*/fe.c)))
# (filter.c is optional: an example of messages between processes needs none)
EX_BIN  := $(foreach d,$(EX_DIRS),$(B)/$(d)/fe $(B)/$(d)/be \
             $(if $(wildcard $(d)/filter.c),$(B)/$(d)/filter.so))

# Unit tests: tests/unit/test_*.c, each one binary with the harness.
TEST_SRC := $(wildcard tests/unit/test_*.c)
TEST_BIN := $(TEST_SRC:tests/unit/%.c=$(B)/tests/unit/%)

# In-process tests: tests/inproc/test_*.c, each one binary with the harness
# and the tier's fabric (tests/inproc/fabric.c): the nodes of a tree in one
# process, linked by socketpairs (libtbon/node/node.h, "Given links").
INPROC_SRC := $(wildcard tests/inproc/test_*.c)
INPROC_BIN := $(INPROC_SRC:tests/inproc/%.c=$(B)/tests/inproc/%)
INPROC_OBJ := $(B)/obj/tests/inproc/fabric.o

# A program linked against the shared library as a user would link it
# (-L $(B)/lib -ltbon, no rpath): test_solib starts it.
SOLIB_USER := $(B)/tests/bin/solib_user
FAULTSHIM  := $(B)/tests/lib/libtbon_faultshim.so

# What the tests and the benchmarks share (tests/lib/, included as
# "lib/NAME.h": tests/ is on their include path): header-only helpers, and
# the objects of tests/lib/*.c (the watchdog's thread and state, one per
# program), linked into the programs that use them.
TESTLIB_SRC := $(wildcard tests/lib/*.c)
TESTLIB_OBJ := $(TESTLIB_SRC:%.c=$(B)/obj/%.o)
WATCHDOG_OBJ := $(B)/obj/tests/lib/watchdog.o

# Benchmarks: bench/bench_*.c, each one binary; and bench_ft, bench/ft/*.c
# (one file per benchmark, bench/ft/ft.h).
BENCH_SRC := $(wildcard bench/bench_*.c)
BENCH_BIN := $(BENCH_SRC:bench/%.c=$(B)/bench/%)
BENCH_FT_SRC := $(wildcard bench/ft/*.c)
BENCH_FT_OBJ := $(BENCH_FT_SRC:%.c=$(B)/obj/%.o)
BENCH_BIN += $(B)/bench/bench_ft

ALL_OBJ := $(LIB_OBJ) $(foreach p,$(PROGRAMS),$($(p)_SRC:%.c=$(B)/obj/%.o)) \
           $(TEST_SRC:%.c=$(B)/obj/%.o) $(B)/obj/tests/harness.o $(B)/obj/tests/unit/solib_user.o $(BENCH_SRC:%.c=$(B)/obj/%.o) \
           $(BENCH_FT_OBJ) \
           $(INPROC_SRC:%.c=$(B)/obj/%.o) $(INPROC_OBJ) \
           $(ITEST_SRC:%.c=$(B)/obj/%.o) $(IPROG_SRC:%.c=$(B)/obj/%.o) \
           $(PLUGIN_SRC:%.c=$(B)/obj/%.o) $(TPLUGIN_SRC:%.c=$(B)/obj/%.o) \
           $(foreach d,$(EX_DIRS),$(B)/obj/$(d)/fe.o $(B)/obj/$(d)/be.o \
             $(if $(wildcard $(d)/filter.c),$(B)/obj/$(d)/filter.o)) \
           $(STAT_LIB_OBJ) $(wildcard $(B)/obj/stat/*.o) $(TESTLIB_OBJ)

# tbon_fims, the failure injection and management tool (tests/fims/, one file
# per part, fims.h; docs/fault-tolerance.md): a test program, built into bin/
# but not installed.
tbon_fims_SRC := $(wildcard tests/fims/*.c) tests/lib/watchdog.c
FIMS_BIN := $(B)/bin/tbon_fims
ALL_OBJ  += $(tbon_fims_SRC:%.c=$(B)/obj/%.o)

.PHONY: all lib programs plugins examples tests benches stat check check-cluster test san demo demo-stat bench \
        fuzz fuzz-smoke \
        install clean deps tsan
.DEFAULT_GOAL := all
# Keep objects make would otherwise treat as intermediate (and rebuild).
.SECONDARY:

all: lib programs plugins tests benches examples stat
lib: $(B)/lib/libtbon.a $(B)/lib/libtbon.so $(B)/lib/$(SONAME)
programs: $(BIN)
plugins: $(PLUGIN_SO) $(TPLUGIN_SO)
tests: $(TEST_BIN) $(INPROC_BIN) $(ITEST_BIN) $(IPROG_BIN) $(FIMS_BIN) $(SOLIB_USER) $(FAULTSHIM)
examples: $(EX_BIN)
benches: $(BENCH_BIN)
stat: $(STAT_ALL)

# Before the first compile in a build directory: are the -dev packages'
# headers there? If not, scripts/check-headers.sh names each missing package
# and how to install it, instead of the compiler's "No such file". Order-only
# and run from recipes, so that `make check` has run `deps` by then.
HEADERS_OK := $(B)/.headers-ok
$(HEADERS_OK): scripts/check-headers.sh
	@mkdir -p $(dir $@)
	@scripts/check-headers.sh "$(CC)" $(XML_CFLAGS)
	@touch $@

$(B)/obj/%.o: %.c | $(HEADERS_OK)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

# Tests and benchmarks include tests/lib/'s helpers as "lib/NAME.h".
$(B)/obj/tests/%.o: CFLAGS += -Itests
$(B)/obj/bench/%.o: CFLAGS += -Itests

# The shared library exports only the API (its version script), so only
# those functions could be interposed (LD_PRELOAD); with
# -fno-semantic-interposition the library's own calls to them may be
# inlined, and an LD_PRELOAD catches only the application's calls.
$(LIB_OBJ): CFLAGS += $(if $(LTO),$(LTO) -ffat-lto-objects -fno-semantic-interposition)

# The library as one relocatable object, optimised as a whole (LTO=: the
# objects as they are, linked together).
# Each function and datum in a section of its own, so that a program's link
# keeps only what it reaches (LINK_TBON_LTO).
$(B)/lib/libtbon-lto.o: $(LIB_OBJ)
	@mkdir -p $(dir $@)
	$(CC) -r $(if $(LTO),$(LTO) -flinker-output=nolto-rel) $(filter -O% -g%,$(CFLAGS)) \
	    -ffunction-sections -fdata-sections -nostdlib -o $@ $^

$(B)/lib/libtbon.a: $(LIB_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@
	ar rcs $@ $^

$(B)/lib/$(SO_FILE): $(B)/lib/libtbon-lto.o libtbon/libtbon.map
	@mkdir -p $(dir $@)
	$(CC) -shared $(LDFLAGS) -Wl,-soname,$(SONAME) -Wl,--version-script=libtbon/libtbon.map \
	    -o $@ $(B)/lib/libtbon-lto.o $(LIBS)

$(B)/lib/$(SONAME): $(B)/lib/$(SO_FILE)
	ln -sfn $(SO_FILE) $@

$(B)/lib/libtbon.so: $(B)/lib/$(SONAME)
	ln -sfn $(SONAME) $@

# Tests link the static library, so they run from the build tree, and export
# its symbols to the filter plug-ins they dlopen (programs and benchmarks link
# the library as one object, LINK_TBON_LTO below). --as-needed keeps
# libraries a program does not use (zlib in a program that never compresses)
# from being loaded at every start: process start-up is most of a tree's
# start-up time.
# (The pattern lives in prog_objs: a '%' written in the rule itself would be
# replaced by the stem before the second expansion.)
# libsodium goes in statically: loading it as a shared library cost every
# process about 0.2 ms at exec (500 starts of tbon_commnode: 0.48 s without
# it, 0.60 s with it), which made a 16x16 tree's start-up 12% slower.
LINK_TBON = -Wl,--export-dynamic -Wl,--as-needed $(B)/lib/libtbon.a \
            -Wl,-Bstatic -lsodium -Wl,-Bdynamic $(filter-out -lsodium,$(LIBS))
# The programs and benchmarks: the library optimised as one unit, named
# in LINK_TBON_LTO (so left out of a rule's own objects, PROG_OBJS). One
# object is linked whole, so the sections a program never reaches are
# dropped (--gc-sections), and only the public API is exported to plug-ins
# (libtbon/export.list, what libtbon.so exports too): with every library
# symbol exported, each process's dynamic loader had four times the dynamic
# symbols (1,074 in tbon_example_be, against 247) to set up at every start.
LTO_OBJ := $(B)/lib/libtbon-lto.o
# (The sanitizer builds, without LTO, export everything as the tests do.)
comma := ,
LTO_EXPORT = $(if $(LTO),-Wl$(comma)--dynamic-list=libtbon/export.list -Wl$(comma)--gc-sections,\
                         -Wl$(comma)--export-dynamic)
LINK_TBON_LTO = $(LTO_EXPORT) -Wl,--as-needed $(LTO_OBJ) \
                -Wl,-Bstatic -lsodium -Wl,-Bdynamic $(filter-out -lsodium,$(LIBS))
PROG_OBJS = $(filter-out $(LTO_OBJ),$(filter %.o,$^))
prog_objs = $(patsubst %.c,$(B)/obj/%.o,$($(1)_SRC))
.SECONDEXPANSION:
$(B)/bin/%: $$(call prog_objs,$$*) $(B)/lib/libtbon-lto.o
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $(PROG_OBJS) $(LINK_TBON_LTO) $($*_LIBS)

# Tests may use the tbon_stat library parts (libtbonstat.a, libdw): only
# what a test calls is linked, and --as-needed drops libdw from the others.
STAT_LINK = $(if $(STAT_LIB_SRC),$(B)/lib/libtbonstat.a) $(LINK_TBON) $(if $(STAT_LIB_SRC),$(STAT_LIBS))
STAT_DEP  = $(if $(STAT_LIB_SRC),$(B)/lib/libtbonstat.a)

$(B)/tests/unit/%: $(B)/obj/tests/unit/%.o $(B)/obj/tests/harness.o $(B)/lib/libtbon.a $(STAT_DEP)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $(filter %.o,$^) $(STAT_LINK)

$(B)/tests/inproc/%: $(B)/obj/tests/inproc/%.o $(INPROC_OBJ) $(B)/obj/tests/harness.o $(B)/lib/libtbon.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $(filter %.o,$^) $(LINK_TBON)

$(B)/tests/integration/%: $(B)/obj/tests/integration/%.o $(B)/obj/tests/harness.o $(B)/lib/libtbon.a $(STAT_DEP)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $(filter %.o,$^) $(STAT_LINK)

$(SOLIB_USER): $(B)/obj/tests/unit/solib_user.o $(B)/lib/libtbon.so
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $< -L$(B)/lib -ltbon

$(B)/lib/libtbonstat.a: $(STAT_LIB_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@
	ar rcs $@ $^

$(B)/bin/tbon_stat: $(STAT_PROG_SRC:%.c=$(B)/obj/%.o) $(B)/lib/libtbonstat.a $(B)/lib/libtbon.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $(filter %.o,$^) $(STAT_LINK)

# The viewer's page is built into the program (st_view.c, .incbin); its
# placeholder line must be there.
$(B)/obj/stat/st_view.o: stat/view/stat_view.html
$(B)/obj/stat/st_view.o: CFLAGS += -DST_VIEW_CHECKED=$(shell grep -cx '@STAT_DATA@' \
    stat/view/stat_view.html 2>/dev/null || echo 0) \
    -DST_VIEW_FILE='"$(abspath stat/view/stat_view.html)"'

# The merge filter carries its own copy of the prefix-tree code.
$(B)/stat/stat_merge.so: $(B)/obj/stat/stat_merge.o $(B)/obj/stat/st_ptree.o
	@mkdir -p $(dir $@)
	$(CC) -shared $(LDFLAGS) -o $@ $^

$(B)/stat/examples/%: stat/examples/mpi/%.c
	@mkdir -p $(dir $@)
	$(MPICC) -O0 -g -fno-omit-frame-pointer -fno-inline -std=c11 -D_GNU_SOURCE -Wall -Werror \
	    -o $@ $<

$(B)/stat/examples/%: stat/examples/%.c
	@mkdir -p $(dir $@)
	$(CC) -O0 -g -fno-omit-frame-pointer -fno-inline -std=c11 -D_GNU_SOURCE -Wall -Werror \
	    -pthread -o $@ $<

$(B)/tests/bin/%: $(B)/obj/tests/integration/%.o $(B)/lib/libtbon.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $(filter %.o,$^) $(LINK_TBON)

$(B)/filters/%.so: $(B)/obj/filters/%.o
	@mkdir -p $(dir $@)
	$(CC) -shared $(LDFLAGS) -o $@ $<

# The fault-injection shim (tests/faultshim/): an LD_PRELOAD library for
# tree processes, built without the sanitizers (it is preloaded before their
# runtimes; the tests set ASAN_OPTIONS=verify_asan_link_order=0).
$(FAULTSHIM): tests/faultshim/faultshim.c
	@mkdir -p $(dir $@)
	$(CC) -O2 -g -std=c11 -D_GNU_SOURCE -Wall -Wextra $(if $(CI),-Werror) -fPIC -shared \
	    -pthread -o $@ $< -ldl

$(B)/tests/plugins/%.so: $(B)/obj/tests/plugins/%.o
	@mkdir -p $(dir $@)
	$(CC) -shared $(LDFLAGS) -o $@ $<

# The poison filter faults on purpose (a NULL store, a division by zero):
# under SAN=1 the undefined-behaviour sanitizer would end the process first,
# before the real fault the test is about.
$(B)/obj/tests/plugins/filter_poison.o: CFLAGS += $(if $(SAN),-fno-sanitize=undefined)

$(B)/examples/%/fe: $(B)/obj/examples/%/fe.o $(B)/lib/libtbon.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $< $(LINK_TBON)

$(B)/examples/%/be: $(B)/obj/examples/%/be.o $(B)/lib/libtbon.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $< $(LINK_TBON)

$(B)/examples/%/filter.so: $(B)/obj/examples/%/filter.o
	@mkdir -p $(dir $@)
	$(CC) -shared $(LDFLAGS) -o $@ $<

$(B)/bench/%: $(B)/obj/bench/%.o $(B)/lib/libtbon-lto.o
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $(PROG_OBJS) $(LINK_TBON_LTO)

# The watchdog (tests/lib/watchdog.c) of the benchmarks that have one.
$(B)/bench/bench_tree: $(WATCHDOG_OBJ)
$(B)/bench/bench_session: $(WATCHDOG_OBJ)

$(B)/bench/bench_ft: $(BENCH_FT_OBJ) $(WATCHDOG_OBJ) $(B)/lib/libtbon-lto.o
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $(PROG_OBJS) $(LINK_TBON_LTO)

deps:
	@scripts/deps.sh

# The full gate: dependencies, a normal build, the two sanitizer builds, a
# short fuzz run, every test (the sanitizer builds leave out the long cases:
# tests/run.sh). The builds use every core (CHECK_JOBS, default nproc)
# whether or not make was given -j. tests/run.sh prints the final
# "N passed, N failed". Each build's tests run TEST_JOBS programs at once
# (default 2: much of their time is spent waiting on timers, pauses and
# peers, tests/run.sh -j).
CHECK_JOBS ?= $(shell nproc 2>/dev/null || echo 2)
TEST_JOBS ?= 2
# The sanitizer builds of `make check` build what their tests run (not the
# benchmarks and examples, which the plain build builds and checks).
SAN_GOALS := lib programs plugins tests stat
check: deps
	$(MAKE) -j$(CHECK_JOBS) all
	$(MAKE) -j$(CHECK_JOBS) B=$(B)/san SAN=1 $(SAN_GOALS)
	$(MAKE) -j$(CHECK_JOBS) B=$(B)/tsan TSAN=1 $(SAN_GOALS)
	$(MAKE) -j$(CHECK_JOBS) fuzz-build
	$(MAKE) fuzz-smoke FUZZ_SECONDS=$(CHECK_FUZZ_SECONDS)
	tests/run.sh -j $(TEST_JOBS) $(B) --short $(B)/san $(B)/tsan

test: all
	tests/run.sh -j $(TEST_JOBS) $(B)

# The cluster tests (root; skipped, and counted so, where namespaces cannot be
# made): head + 4 nodes with sshd and Slurm, each tests/cluster/cases/*.sh
# (CASES="a b" for some), the cluster taken down. tests/cluster/README.md.
check-cluster: all
	tests/cluster/run.sh $(B)

san:
	$(MAKE) B=$(B)/san SAN=1 all
	tests/run.sh $(B)/san

tsan:
	$(MAKE) B=$(B)/tsan TSAN=1 all
	tests/run.sh $(B)/tsan

# libFuzzer harnesses (clang): tests/fuzz/fuzz_*.c, linked with the library
# compiled once for them (fuzzer coverage, address and undefined-behaviour
# sanitizers) so that the whole decoder path is instrumented.
FUZZ_SRC := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_BIN := $(FUZZ_SRC:tests/fuzz/%.c=$(B)/fuzz/%)
FUZZ_OBJ := $(LIB_SRC:%.c=$(B)/fuzz/obj/%.o)
FUZZ_CC  ?= clang
FUZZ_SAN := address,undefined -fno-sanitize-recover=undefined
FUZZ_CFLAGS := -g -O1 -std=c11 -D_GNU_SOURCE -pthread -Iinclude -Ilibtbon $(XML_CFLAGS)
FUZZ_SECONDS ?= 20
CHECK_FUZZ_SECONDS ?= 5

.PHONY: fuzz-build
fuzz-build: $(FUZZ_BIN)

$(B)/fuzz/obj/%.o: %.c | $(HEADERS_OK)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link,$(FUZZ_SAN) -MMD -MP -c -o $@ $<

-include $(FUZZ_OBJ:.o=.d)

$(B)/fuzz/%: tests/fuzz/%.c $(FUZZ_OBJ) | $(HEADERS_OK)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer,$(FUZZ_SAN) -o $@ $< $(FUZZ_OBJ) $(LIBS) $(FUZZ_LIBS)

# fuzz_ptree includes tbon_stat's prefix-tree sources itself (their JSON
# output is jansson's).
$(B)/fuzz/fuzz_ptree: $(wildcard stat/st_ptree*.c stat/st_ptree*.h)
$(B)/fuzz/fuzz_ptree: FUZZ_LIBS := -ljansson

fuzz-smoke: $(FUZZ_BIN)
	FUZZ_SECONDS=$(FUZZ_SECONDS) tests/fuzz/smoke.sh $(B)/fuzz

demo: all
	@scripts/demo.sh $(B)

demo-stat: all
	@scripts/demo-stat.sh $(B)

bench: all
	bench/run.sh $(B)

# The installed archive holds the library as one optimised object (machine
# code only): the build tree's libtbon.a has GCC's LTO IR in each object too,
# which another compiler version could not read.
$(B)/lib/libtbon-install.a: $(B)/lib/libtbon-lto.o
	rm -f $@
	ar rcs $@ $<

install: lib programs plugins stat $(B)/lib/libtbon-install.a
	install -d $(DESTDIR)$(PREFIX)/include/tbon $(DESTDIR)$(PREFIX)/lib/pkgconfig $(DESTDIR)$(PREFIX)/bin \
	    $(DESTDIR)$(PREFIX)/lib/tbon/filters
	install -m 0755 $(PLUGIN_SO) $(STAT_SO) $(DESTDIR)$(PREFIX)/lib/tbon/filters/
	install -m 0644 include/tbon/*.h $(DESTDIR)$(PREFIX)/include/tbon/
	install -m 0644 $(B)/lib/libtbon-install.a $(DESTDIR)$(PREFIX)/lib/libtbon.a
	install -m 0755 $(B)/lib/$(SO_FILE) $(DESTDIR)$(PREFIX)/lib/
	ln -sfn $(SO_FILE) $(DESTDIR)$(PREFIX)/lib/$(SONAME)
	ln -sfn $(SONAME) $(DESTDIR)$(PREFIX)/lib/libtbon.so
	install -m 0755 $(BIN) $(STAT_BIN) $(DESTDIR)$(PREFIX)/bin/
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|$(VERSION)|' tbon.pc.in > $(DESTDIR)$(PREFIX)/lib/pkgconfig/tbon.pc

clean:
	rm -rf $(B)

-include $(ALL_OBJ:.o=.d)
