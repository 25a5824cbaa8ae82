# minccl top-level build. `make help` lists the targets and variables.
.DEFAULT_GOAL := all
SHELL := /bin/bash
include mk/config.mk

# Modules in layer order: common, the labs in number order, final. sim/ is the backend, built
# only for BACKEND=sim. A lab links itself and every lab below it (see docs/architecture.md).
LAB_DIRS := $(sort $(wildcard labs/[0-9][0-9]_*))
LAYERS := common $(LAB_DIRS) $(wildcard final)
# LAB=NN (or its directory name, LAB=common, LAB=sim; several separated by spaces) narrows
# test/bench/gdb/demo; T=pattern narrows tests by name. A LAB that names no module is an error.
LAB ?=
T ?=
modid = $(if $(filter labs/%,$(1)),$(patsubst labs/%,%,$(1)),$(1))
labnum = $(firstword $(subst _, ,$(call modid,$(1))))
lab_matches = $(strip $(foreach m,$(2),$(if $(filter $(1),$(call modid,$(m)) $(call labnum,$(m))),$(m))))
selected = $(if $(LAB),$(foreach l,$(LAB),$(call lab_matches,$(l),$(1))),$(1))
# $(call need_lab,target,modules that have something for it): stop, naming them, if LAB selects none.
need_lab = $(foreach l,$(LAB),$(if $(call lab_matches,$(l),$(2)),,$(error make $(1): LAB=$(l) names no module \
  with $(1) entries. LAB is one of: $(foreach m,$(2),$(call modid,$(m))); a lab's number is enough, e.g. LAB=$(call \
  labnum,$(lastword $(2))))))

ALL_LIBS :=
ALL_BINS :=
TEST_ENTRIES :=
BENCH_ENTRIES :=
DEMO_ENTRIES :=

# ---- one module: library from src/, a binary per file in tests/, examples/, bench/ ---------
# mpi_*.c files (and those a module.mk adds to MPI_SRCS) are compiled with Open MPI and run under
# mpirun. Device code is .cu (CU_COMPILE in
# mk/config.mk): its objects (x.cu -> x.cu.o) join the module's library, and a .cu in tests/,
# examples/ or bench/ is a binary as a .c is; a link that contains any .cu object adds -lstdc++.
srcs = $(wildcard $(1)/$(2)/*.c) $(wildcard $(1)/$(2)/*.cu)
objof = $(patsubst $(1)/%.cu,$(OBJ)/$(1)/%.cu.o,$(patsubst $(1)/%.c,$(OBJ)/$(1)/%.o,$(2)))
define MODULE
$(1)_ID := $(call modid,$(1))
$(1)_SRCS := $(call srcs,$(1),src)
$(1)_LIB := $(if $$($(1)_SRCS),$(LIB)/libmccl_$$($(1)_ID).a)
$(1)_BENCH_SRCS := $(call srcs,$(1),benchlib)
$(1)_BENCH_LIB := $$(if $$($(1)_BENCH_SRCS),$(LIB)/libmccl_$$($(1)_ID)_bench.a)
-include $(1)/module.mk
endef

# Layers up to and including each module, to compute link lines.
$(foreach i,$(shell seq 1 $(words $(LAYERS))),$(eval LAYERS_UPTO_$(word $(i),$(LAYERS)) := $(wordlist 1,$(i),$(LAYERS))))
$(foreach m,$(LAYERS),$(eval $(call MODULE,$(m))))
reverse = $(if $(1),$(call reverse,$(wordlist 2,$(words $(1)),$(1))) $(firstword $(1)))
# Whether a source is an MPI program's (mpi_*.c, or listed in MPI_SRCS by a module.mk).
MPI_SRCS ?=
ismpi = $(or $(findstring /mpi_,/$(notdir $(1))),$(filter $(1),$(MPI_SRCS)))

# Link line of module m: its lib and every lower layer's lib, highest first.
linklibs = $(foreach l,$(call reverse,$(LAYERS_UPTO_$(1))),$($(l)_LIB))
# make exercises / make grade, and a learner tree's flags and USE_REF=1 link lines (docs/exercises.md).
include mk/exercises.mk

define OBJ_RULE
$(OBJ)/$(1)/%.o: $(1)/%.c | $(BACKEND_DEP)
	@mkdir -p $$(@D)
	$(CC) $(CPPFLAGS) $$(if $$(call ismpi,$$<),$$(MPI_CFLAGS)) $(CFLAGS) -c $$< -o $$@
$(OBJ)/$(1)/%.cu.o: $(1)/%.cu | $(BACKEND_DEP)
	@mkdir -p $$(@D)
	$(CU_COMPILE) -c $$< -o $$@
endef

# The test harness has its own archive, linked only into tests/ binaries (never into a module's
# library, so not into final/'s either). Its sources are in common/harness/.
TEST_LIB := $(LIB)/libmccl_test.a
TEST_LIB_SRCS := $(wildcard common/harness/*.c)
testlib = $(if $(findstring /tests/,/$(1)),$(TEST_LIB))
# Code that benchmarks share (a module's benchlib/, e.g. lab 07's allreduce driver) has an archive of
# its own, linked only into the bench/ binaries of that module and the modules above it.
benchlibs = $(if $(findstring /bench/,/$(2)),$(strip $(foreach l,$(call reverse,$(LAYERS_UPTO_$(1))),$($(l)_BENCH_LIB))))

define BIN_RULE
# $(1)=module $(2)=source file
$(BIN)/$($(1)_ID)/$(basename $(notdir $(2))): $(call objof,$(1),$(2)) $(call testlib,$(2)) $(call benchlibs,$(1),$(2)) $(call linklibs,$(1)) $(BACKEND_DEP)
	@mkdir -p $$(@D)
	$(CC) $(LDFLAGS) -o $$@ $$< $(call testlib,$(2)) $(call benchlibs,$(1),$(2)) $(call linklibs,$(1)) $$(if $$(call ismpi,$(2)),$$(MPI_LIBS)) $(BACKEND_LIBS) $(LDLIBS) \
	  $(if $(filter %.cu,$(2) $(foreach l,$(LAYERS_UPTO_$(1)),$($(l)_SRCS))),-lstdc++)
ALL_BINS += $(BIN)/$($(1)_ID)/$(basename $(notdir $(2)))
$(1)_BINS += $(BIN)/$($(1)_ID)/$(basename $(notdir $(2)))
endef

define LIB_RULE
$($(1)_LIB): $(call objof,$(1),$($(1)_SRCS))
	@mkdir -p $$(@D)
	rm -f $$@ && ar rcs $$@ $$^
ALL_LIBS += $($(1)_LIB)
endef

define BENCH_LIB_RULE
$($(1)_BENCH_LIB): $(call objof,$(1),$($(1)_BENCH_SRCS))
	@mkdir -p $$(@D)
	rm -f $$@ && ar rcs $$@ $$^
ALL_LIBS += $($(1)_BENCH_LIB)
endef

# An mpi_ test runs at the process counts of <module>_<binary>_MPI_NP, else <module>_MPI_NP, else 2 and 4.
# A sanitizer build (SANITIZE=1, TSAN=1) leaves out the odd counts between the smallest and the largest:
# what it finds (a bad access, a race) does not depend on the count, the plain build runs them all, and
# 3 ranks cost CI minutes under ThreadSanitizer.
mpinp = $(or $($(1)_$(basename $(notdir $(2)))_MPI_NP),$($(1)_MPI_NP),2 4)
mpinpRun = $(if $(filter 1,$(SANITIZE) $(TSAN)),$(firstword $(1)) $(filter-out $(firstword $(1)),$(lastword $(1))),$(1))
entry = $(if $(call ismpi,$(2)),mpi:$(subst $(eval) ,$(comma),$(strip $(call mpinpRun,$(call mpinp,$(1),$(2))))),plain):$(BIN)/$($(1)_ID)/$(basename $(notdir $(2)))
comma := ,

define MODULE_BINS
$(eval $(call OBJ_RULE,$(1)))
$(if $($(1)_LIB),$(eval $(call LIB_RULE,$(1))))
$(if $($(1)_BENCH_LIB),$(eval $(call BENCH_LIB_RULE,$(1))))
$(foreach s,$(call srcs,$(1),tests) $(call srcs,$(1),examples) $(call srcs,$(1),bench),$(eval $(call BIN_RULE,$(1),$(s))))
endef

# sim/ : libsimcuda.so, the CPU device backend, and its tests (which link only the harness).
ifeq ($(BACKEND),sim)
SIM_SRCS := $(wildcard sim/src/*.c)
$(LIB)/libsimcuda.so: $(patsubst sim/%.c,$(OBJ)/sim/%.o,$(SIM_SRCS))
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -shared -Wl,-soname,libsimcuda.so -o $@ $^ -lrt -ldl
$(OBJ)/sim/src/%.o: sim/src/%.c
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) -Isim/src $(CFLAGS) -c $< -o $@
endif
sim_ID := sim
LAYERS_UPTO_sim := common
-include sim/module.mk
$(eval $(call OBJ_RULE,sim))
$(foreach s,$(call srcs,sim,tests),$(eval $(call BIN_RULE,sim,$(s))))

$(foreach m,$(LAYERS),$(eval $(call MODULE_BINS,$(m))))

$(TEST_LIB): $(patsubst %.c,$(OBJ)/%.o,$(TEST_LIB_SRCS))
	@mkdir -p $(@D)
	rm -f $@ && ar rcs $@ $^
ALL_LIBS += $(TEST_LIB)

# ---- what test/bench/demo/gdb run --------------------------------------------------------
TEST_MODULES := $(call selected,common sim $(LAB_DIRS) $(wildcard final))
# A module.mk may add entries of its own (<module>_TEST_ENTRIES, e.g. final/nccl.mk's drop-in test).
TEST_ENTRIES := $(foreach m,$(TEST_MODULES),$(foreach s,$(sort $(call srcs,$(m),tests)),$(call entry,$(m),$(s))) \
                  $($(m)_TEST_ENTRIES) \
                  $(foreach s,$(sort $(wildcard $(m)/tests/test_*.sh)),sh:$(s)) \
                  $(if $(wildcard $(m)/lab.gdb),gdb:$(m):$(BIN)/$($(m)_ID)/demo) \
                  $(if $(wildcard $(m)/lab.cuda-gdb),cudagdb:$(m)) \
                  $(if $(wildcard $(m)/tests/kernel.gdb),gdb:$(m)/tests/kernel.gdb:$(BIN)/$($(m)_ID)/test_sim_kernel))
BENCH_ENTRIES := $(foreach m,$(TEST_MODULES),$(foreach s,$(sort $(call srcs,$(m),bench)),$(subst mpi:2$(comma)4,mpi:2,$(call entry,$(m),$(s)))))
DEMO_MODULES := $(call selected,$(LAB_DIRS) $(wildcard final))
# Modules that have something for each target (what LAB may name).
HAS_test := $(foreach m,common sim $(LAB_DIRS) $(wildcard final),$(if $(wildcard $(m)/tests/*.c $(m)/tests/*.cu $(m)/tests/test_*.sh $(m)/lab.gdb),$(m)))
HAS_bench := $(foreach m,common sim $(LAB_DIRS) $(wildcard final),$(if $(wildcard $(m)/bench/*.c $(m)/bench/*.cu),$(m)))
HAS_demo := $(foreach m,$(LAB_DIRS) $(wildcard final),$(if $(wildcard $(m)/examples/demo.c $(m)/examples/mpi_demo.c),$(m)))
HAS_gdb := $(foreach m,$(LAB_DIRS) $(wildcard final),$(if $(wildcard $(m)/lab.gdb),$(m)))
# The decoders' fuzz targets: their replay tests join `make all`/`make test`, and `make fuzz` runs them.
include common/fuzz/fuzz.mk
# Checked when the goal is read, before anything is built (and by make -n too).
$(foreach g,test bench demo gdb,$(if $(filter $(g),$(MAKECMDGOALS)),$(call need_lab,$(g),$(HAS_$(g)))))

export MPIRUN MPIRUN_FLAGS BACKEND CUDA_HOME MPICC NCCL_INCLUDE
ifeq ($(SANITIZE),1)
  export LSAN_OPTIONS := suppressions=$(abspath mk/lsan.supp):print_suppressions=0
  export ASAN_OPTIONS := detect_leaks=1:abort_on_error=0
  export UBSAN_OPTIONS := print_stacktrace=1:halt_on_error=1
  export MCCL_SANITIZED := 1
endif
ifeq ($(TSAN),1)
  # Every report is printed and makes the binary exit 66 (a FAIL in runtests.sh); mk/tsan.supp
  # holds suppressions for third-party code only.
  export TSAN_OPTIONS := suppressions=$(abspath mk/tsan.supp):second_deadlock_stack=1:exitcode=66
  export MCCL_TSAN := 1
  export MCCL_SANITIZED := 1
endif
export MCCL_TEST_FILTER := $(T)
# What the shell tests pass to the make they run, so that it builds and runs this same variant.
export MCCL_MAKE_VARS := BACKEND=$(BACKEND) DEBUG=$(DEBUG) SANITIZE=$(SANITIZE) TSAN=$(TSAN) BUILD_ROOT=$(BUILD_ROOT)
export MCCL_BIN_DIR := $(BIN)

# What `make test` builds first: everything, unless LAB names only labs (or sim); then just those modules'
# archives, binaries and the extras their module.mk lists in <module>_TARGETS, the layers below coming in
# through the link lines. So `make grade LAB=01` in a fresh learner tree builds lab 01, not lab 07's
# kernels. common's and final's tests read the whole tree (docs, headers, the drop-in): they get `all`.
module_targets = $($(1)_LIB) $($(1)_BENCH_LIB) $($(1)_BINS) $($(1)_TARGETS)
TEST_BUILD = $(if $(and $(LAB),$(TEST_MODULES)),$(if $(filter-out $(LAB_DIRS) sim,$(TEST_MODULES)),all,$(BACKEND_DEP) \
  $(TEST_LIB) $(foreach m,$(TEST_MODULES),$(call module_targets,$(m)))),all)

.PHONY: all test bench demo docs linkcheck format-check compdb gdb deps clean help params-doc plot
all: $(BACKEND_DEP) $(ALL_LIBS) $(ALL_BINS)

# The phony step keeps make quiet about each listed file that is up to date.
.PHONY: test-build
test-build: $(TEST_BUILD)
	@:

test:
	@mk/deps.sh ensure test && $(MAKE) --no-print-directory test-build && mk/runtests.sh $(TEST_ENTRIES)

bench:
	@mk/deps.sh ensure bench && $(MAKE) --no-print-directory all && mk/runbench.sh $(BENCH_ENTRIES)

demo:
	@mk/deps.sh ensure demo && mk/quietbuild.sh $(BUILD)/demo-build.log $(MAKE) --no-print-directory all
	@set -e; for m in $(DEMO_MODULES); do \
	  id=$${m#labs/}; \
	  printf '\n======== %s (%s backend) ========\n' "$$id" "$(BACKEND)"; \
	  run=; [ -z "$$MCCL_DRY_RUN" ] || run=echo; \
	  if [ -x $(BIN)/$$id/mpi_demo ]; then $$run $(MPIRUN) $(MPIRUN_FLAGS) -np 2 $(BIN)/$$id/mpi_demo; \
	  elif [ -x $(BIN)/$$id/demo ]; then $$run $(BIN)/$$id/demo; fi; \
	done; [ -n "$$MCCL_DRY_RUN" ] || printf '\nDemo finished: every lab example above ran on the %s backend.\n' "$(BACKEND)"

# Under `make gdb` a person may sit at a breakpoint for minutes: every MCCL_*_TIMEOUT of
# mccl_params.def is 0 (wait forever) unless set in the environment. A peer that fails or dies
# still ends the wait (mccl_fork.h). The batch check in `make test` keeps the timeouts.
GDB_UNTIMED := $(shell sed -nE 's/^MCCL_PARAM_INT.[A-Za-z]+Timeout, "([A-Z_]+)".*/MCCL_\1/p' common/include/mccl_params.def)
gdb: all
	@m="$(firstword $(call selected,$(HAS_gdb)))"; \
	if [ -z "$(LAB)" ] || [ -z "$$m" ]; then echo "usage: make gdb LAB=NN (one of: $(notdir $(HAS_gdb)))"; exit 2; fi; \
	dbg=$$(command -v gdb || command -v cuda-gdb); script=$$m/lab.gdb; \
	if [ "$(BACKEND)" = cuda ] && [ -f $$m/lab.cuda-gdb ] && command -v cuda-gdb >/dev/null; then \
	  dbg=$$(command -v cuda-gdb); script=$$m/lab.cuda-gdb; \
	  [ "$(CUDA_DEBUG)" = 1 ] || echo "note: kernels built without -G; add CUDA_DEBUG=1 to stop inside them"; \
	  export CUDA_VISIBLE_DEVICES=$${CUDA_VISIBLE_DEVICES:-0,1}; \
	  if grep -q '^# cudagdbcheck: eager' $$script; then export CUDA_MODULE_LOADING=$${CUDA_MODULE_LOADING:-EAGER}; fi; \
	fi; \
	[ -n "$$dbg" ] || { echo "no gdb found: run 'make deps'"; exit 2; }; \
	exec $$dbg -q -ex 'set breakpoint pending on' $(foreach v,$(GDB_UNTIMED),$(if $(filter environment,$(origin $(v))),,-ex 'set environment $(v) 0')) \
	  $(if $(filter 1,$(BATCH)),-batch -ex 'set pagination off' -ex 'set $$mccl_autorun = 1') \
	  -x $$script --args $(BIN)/$${m#labs/}/demo

docs:
	@mk/deps.sh ensure docs && mk/docs.sh

# PNG charts of benchmark results (mk/plot.py: time vs size up to 256 KiB, busbw vs size from it):
# RESULTS names CSV or JSON files written by a benchmark's --csv/--json; the PNGs go beside each file,
# or to PLOT_DIR.
RESULTS ?=
PLOT_DIR ?=
plot:
	@[ -n "$(strip $(RESULTS))" ] || { echo "usage: make plot RESULTS='file.csv|file.json ...' [PLOT_DIR=dir]" >&2; exit 2; }
	@mk/deps.sh ensure plot && mk/plot.sh $(if $(PLOT_DIR),--out-dir $(PLOT_DIR)) $(RESULTS)

# C sources follow .clang-format (mk/format-check.sh says how far); CI runs it.
format-check:
	@mk/deps.sh ensure format-check && mk/format-check.sh

# compile_commands.json for clangd: every C file with the flags this Makefile gives it, for
# BACKEND=$(BACKEND) first, then what only the other backend compiles (sim/src).
compdb:
	@mk/compdb.sh $(BACKEND) > compile_commands.json.tmp && mv compile_commands.json.tmp compile_commands.json && \
	  echo "wrote compile_commands.json ($$(grep -c '"file"' compile_commands.json) files)"

# Every internal link of the built site (docs/html) resolves; CI runs it after make docs.
linkcheck:
	@mk/deps.sh ensure linkcheck && mk/linkcheck.sh

params-doc:
	@mk/params-doc.sh > docs/parameters.md && echo "wrote docs/parameters.md"

deps:
	@mk/deps.sh install

clean:
	rm -rf build docs/html

help:
	@echo "minccl: make [target] [VAR=value]"
	@echo "targets:"
	@echo "  all      build every module (default)        test   build and run the tests (aggregate line last)"
	@echo "  demo     run each lab's example in order (V=1: build lines) bench  run the benchmarks"
	@echo "  docs     Doxygen site in docs/html (warnings are errors)   linkcheck  its internal links resolve"
	@echo "  gdb      LAB=NN: the lab's demo under gdb with its lab.gdb (cuda-gdb and lab.cuda-gdb where a lab has one, on cuda);"
	@echo "           BATCH=1: unattended, each stop prints what lab.gdb prints and the walk continues"
	@echo "  deps     install what is missing (apt-get as root; else prints the packages)"
	@echo "  compdb   compile_commands.json for clangd and other editors (both backends)"
	@echo "  plot     RESULTS='a.csv b.json' [PLOT_DIR=dir]: PNG charts of benchmark results (--csv/--json)"
	@echo "  format-check  fail if clang-format (.clang-format) would change a C file"
	@echo "  fuzz     build the decoders' libFuzzer targets (clang) and run each FUZZ_SECONDS (default 60); FUZZ=pattern"
	@echo "  fuzz-seed  rewrite each module's fuzz/corpus from its fuzz/seeds.c"
	@echo "  exercises  write a learner tree (EXERCISES_DIR, default $(EXERCISES_DIR)): marked solutions become stubs"
	@echo "  grade    LAB=NN [USE_REF=1]: run the lab's tests and score its exercises (USE_REF=1: lower labs from the reference)"
	@echo "  clean    remove build/ and docs/html"
	@echo "variables:"
	@echo "  BACKEND=cuda|sim  device calls to the GPU or to the CPU sim (default here: $(BACKEND))"
	@echo "  LAB=NN   test/bench/demo/gdb one module: a lab's number or directory name, common, sim"
	@echo "  T=pattern  tests whose name contains pattern (or matches it as a glob), gdb.NN checks included"
	@echo "  MCCL_TEST_JOBS=N  test binaries run at once (sim: one per CPU, at most 8; cuda: 1)"
	@echo "  DEBUG=1  -O0 -g3            SANITIZE=1  ASan + UBSan (sim backend only)"
	@echo "  TSAN=1   ThreadSanitizer build (sim only; not with SANITIZE=1)"
	@echo "  CUDA_DEBUG=1  nvcc -G for cuda-gdb (cuda backend)"
	@echo "  BUILD_ROOT=dir  where builds go (default build): dir/<backend>[-debug][-G][-asan|-tsan]; a second"
	@echo "           root keeps, e.g., a sanitizer build of one lab apart from the everyday one"
	@echo "  outputs go to build/<backend>[-debug][-G][-asan|-tsan]/ (now: $(BUILD))"

-include $(shell find $(OBJ) -name '*.d' 2>/dev/null)
