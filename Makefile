# minccl top-level build. `make help` lists the targets and variables.
.DEFAULT_GOAL := all
SHELL := /bin/bash
include mk/config.mk

# Modules in layer order: common, the labs in number order, final. sim/ is the backend, built
# only for BACKEND=sim. A lab links itself and every lab below it (see ARCHITECTURE.md).
LAB_DIRS := $(sort $(wildcard labs/[0-9][0-9]_*))
LAYERS := common $(LAB_DIRS) $(wildcard final)
# LAB=NN (or LAB=common, LAB=sim) narrows test/bench/gdb/demo; T=pattern narrows tests by name.
LAB ?=
T ?=
modid = $(if $(filter labs/%,$(1)),$(patsubst labs/%,%,$(1)),$(1))
labnum = $(firstword $(subst _, ,$(call modid,$(1))))
selected = $(if $(LAB),$(foreach m,$(1),$(if $(filter $(LAB)%,$(call modid,$(m))),$(m))),$(1))

ALL_LIBS :=
ALL_BINS :=
TEST_ENTRIES :=
BENCH_ENTRIES :=
DEMO_ENTRIES :=

# ---- one module: library from src/, a binary per file in tests/, examples/, bench/ ---------
# mpi_*.c files are compiled with Open MPI and run under mpirun.
define MODULE
$(1)_ID := $(call modid,$(1))
$(1)_SRCS := $(wildcard $(1)/src/*.c)
$(1)_LIB := $(if $$($(1)_SRCS),$(LIB)/libmccl_$$($(1)_ID).a)
-include $(1)/module.mk
endef

# Layers up to and including each module, to compute link lines.
$(foreach i,$(shell seq 1 $(words $(LAYERS))),$(eval LAYERS_UPTO_$(word $(i),$(LAYERS)) := $(wordlist 1,$(i),$(LAYERS))))
$(foreach m,$(LAYERS),$(eval $(call MODULE,$(m))))
reverse = $(if $(1),$(call reverse,$(wordlist 2,$(words $(1)),$(1))) $(firstword $(1)))

# Link line of module m: its lib and every lower layer's lib, highest first.
linklibs = $(foreach l,$(call reverse,$(LAYERS_UPTO_$(1))),$($(l)_LIB))

define OBJ_RULE
$(OBJ)/$(1)/%.o: $(1)/%.c | $(BACKEND_DEP)
	@mkdir -p $$(@D)
	$(CC) $(CPPFLAGS) $$(if $$(findstring /mpi_,/$$(notdir $$<)),$$(MPI_CFLAGS)) $(CFLAGS) -c $$< -o $$@
endef

# The test harness has its own archive, linked only into tests/ binaries (never into a module's
# library, so not into final/'s either). Its sources are in common/harness/.
TEST_LIB := $(LIB)/libmccl_test.a
TEST_LIB_SRCS := $(wildcard common/harness/*.c)
testlib = $(if $(findstring /tests/,/$(1)),$(TEST_LIB))

define BIN_RULE
# $(1)=module $(2)=source file
$(BIN)/$($(1)_ID)/$(basename $(notdir $(2))): $(OBJ)/$(1)/$(patsubst $(1)/%.c,%.o,$(2)) $(call testlib,$(2)) $(call linklibs,$(1)) $(BACKEND_DEP)
	@mkdir -p $$(@D)
	$(CC) $(LDFLAGS) -o $$@ $$< $(call testlib,$(2)) $(call linklibs,$(1)) $$(if $$(findstring /mpi_,/$(notdir $(2))),$$(MPI_LIBS)) $(BACKEND_LIBS) $(LDLIBS)
ALL_BINS += $(BIN)/$($(1)_ID)/$(basename $(notdir $(2)))
endef

define LIB_RULE
$($(1)_LIB): $(patsubst $(1)/%.c,$(OBJ)/$(1)/%.o,$($(1)_SRCS))
	@mkdir -p $$(@D)
	rm -f $$@ && ar rcs $$@ $$^
ALL_LIBS += $($(1)_LIB)
endef

entry = $(if $(findstring /mpi_,/$(notdir $(2))),mpi:$(subst $(eval) ,$(comma),$(or $($(1)_MPI_NP),2 4)),plain):$(BIN)/$($(1)_ID)/$(basename $(notdir $(2)))
comma := ,

define MODULE_BINS
$(eval $(call OBJ_RULE,$(1)))
$(if $($(1)_LIB),$(eval $(call LIB_RULE,$(1))))
$(foreach s,$(wildcard $(1)/tests/*.c) $(wildcard $(1)/examples/*.c) $(wildcard $(1)/bench/*.c),$(eval $(call BIN_RULE,$(1),$(s))))
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
$(foreach s,$(wildcard sim/tests/*.c),$(eval $(call BIN_RULE,sim,$(s))))

$(foreach m,$(LAYERS),$(eval $(call MODULE_BINS,$(m))))

$(TEST_LIB): $(patsubst %.c,$(OBJ)/%.o,$(TEST_LIB_SRCS))
	@mkdir -p $(@D)
	rm -f $@ && ar rcs $@ $^
ALL_LIBS += $(TEST_LIB)

# ---- what test/bench/demo/gdb run --------------------------------------------------------
TEST_MODULES := $(call selected,common sim $(LAB_DIRS) $(wildcard final))
TEST_ENTRIES := $(foreach m,$(TEST_MODULES),$(foreach s,$(sort $(wildcard $(m)/tests/*.c)),$(call entry,$(m),$(s))) \
                  $(if $(wildcard $(m)/lab.gdb),gdb:$(m):$(BIN)/$($(m)_ID)/demo))
BENCH_ENTRIES := $(foreach m,$(TEST_MODULES),$(foreach s,$(sort $(wildcard $(m)/bench/*.c)),$(subst mpi:2$(comma)4,mpi:2,$(call entry,$(m),$(s)))))
DEMO_MODULES := $(call selected,$(LAB_DIRS) $(wildcard final))

export MPIRUN MPIRUN_FLAGS BACKEND CUDA_HOME MPICC
ifeq ($(SANITIZE),1)
  export LSAN_OPTIONS := suppressions=$(abspath mk/lsan.supp):print_suppressions=0
  export ASAN_OPTIONS := detect_leaks=1:abort_on_error=0
  export UBSAN_OPTIONS := print_stacktrace=1:halt_on_error=1
endif
ifeq ($(TSAN),1)
  # Every report is printed and makes the binary exit 66 (a FAIL in runtests.sh); mk/tsan.supp
  # holds suppressions for third-party code only.
  export TSAN_OPTIONS := suppressions=$(abspath mk/tsan.supp):second_deadlock_stack=1:exitcode=66
  export MCCL_TSAN := 1
endif
export MCCL_TEST_FILTER := $(T)

.PHONY: all test bench demo docs gdb deps clean help params-doc
all: $(BACKEND_DEP) $(ALL_LIBS) $(ALL_BINS)

test:
	@mk/deps.sh ensure test && $(MAKE) --no-print-directory all && mk/runtests.sh $(TEST_ENTRIES)

bench:
	@mk/deps.sh ensure bench && $(MAKE) --no-print-directory all && mk/runbench.sh $(BENCH_ENTRIES)

demo:
	@mk/deps.sh ensure demo && $(MAKE) --no-print-directory all
	@set -e; for m in $(DEMO_MODULES); do \
	  id=$${m#labs/}; \
	  printf '\n======== %s (%s backend) ========\n' "$$id" "$(BACKEND)"; \
	  if [ -x $(BIN)/$$id/mpi_demo ]; then $(MPIRUN) $(MPIRUN_FLAGS) -np 2 $(BIN)/$$id/mpi_demo; \
	  elif [ -x $(BIN)/$$id/demo ]; then $(BIN)/$$id/demo; fi; \
	done; printf '\nDemo finished: every lab example above ran on the %s backend.\n' "$(BACKEND)"

gdb: all
	@m="$(firstword $(filter-out common sim,$(call selected,$(LAB_DIRS))))"; \
	if [ -z "$(LAB)" ] || [ -z "$$m" ]; then echo "usage: make gdb LAB=NN (one of: $(notdir $(LAB_DIRS)))"; exit 2; fi; \
	dbg=$$(command -v gdb || command -v cuda-gdb); \
	[ -n "$$dbg" ] || { echo "no gdb found: run 'make deps'"; exit 2; }; \
	exec $$dbg -q -ex 'set breakpoint pending on' -x $$m/lab.gdb --args $(BIN)/$${m#labs/}/demo

docs:
	@mk/deps.sh ensure docs && mk/docs.sh

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
	@echo "  demo     run each lab's example in order        bench  run the benchmarks"
	@echo "  docs     Doxygen site in docs/html (warnings are errors)"
	@echo "  gdb      LAB=NN: the lab's demo under gdb with its lab.gdb"
	@echo "  deps     install what is missing (apt-get as root; else prints the packages)"
	@echo "  clean    remove build/ and docs/html"
	@echo "variables:"
	@echo "  BACKEND=cuda|sim  (default here: $(BACKEND))   LAB=NN  T=pattern  DEBUG=1"
	@echo "  SANITIZE=1  ASan+UBSan build (sim only)      TSAN=1  ThreadSanitizer build (sim only; not with SANITIZE=1)"
	@echo "  outputs go to build/<backend>[-debug][-asan|-tsan]/ (now: $(BUILD))"

-include $(shell find $(OBJ) -name '*.d' 2>/dev/null)
