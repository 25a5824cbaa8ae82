# Fuzz targets of the decoders of every message that crosses a socket (docs/fuzzing.md). Included
# by the top Makefile. A target reads its module's private src/*_wire.h, so it lives with that module:
# <module>/fuzz/fuzz_<name>.c (common/fuzz/ holds the bootstrap's), beside its committed seeds
# (corpus/<name>/, written by the module's fuzz/seeds.c) and former crashes (crashes/<name>/).
# common/fuzz/ also holds what every module's targets share: fuzz.h, replay_main.c and gen_corpus.c.
# Each fuzz_<name>.c is built twice:
#  - `make fuzz`: with clang -fsanitize=fuzzer,address,undefined into $(FUZZ_BUILD)/fuzz_<name>, with
#    the decoders of its module and of the modules below, then run for FUZZ_SECONDS against its
#    committed corpus (mk/fuzz.sh). A crash fails the target and leaves its input in $(FUZZ_BUILD)/crashes/.
#  - `make all` / `make test`: with the normal compiler and replay_main.c into
#    $(BIN)/<module>/replay_<name>, a test of its module that replays corpus/<name>/ and crashes/<name>/
#    (so the sim, sanitizer and TSan runs of CI replay every former crash, with or without clang).
FUZZ_HARNESS := common/fuzz
FUZZ_MODULES := $(foreach m,$(LAYERS),$(if $(wildcard $(m)/fuzz/fuzz_*.c),$(m)))
$(foreach m,$(FUZZ_MODULES),$(eval FUZZ_NAMES_$(m) := $(patsubst $(m)/fuzz/fuzz_%.c,%,$(sort $(wildcard $(m)/fuzz/fuzz_*.c)))))
FUZZ_NAMES := $(foreach m,$(FUZZ_MODULES),$(FUZZ_NAMES_$(m)))
# The decoders a module's targets link: the *_wire.c files of that module and of those below it, and
# the logging they use.
fuzz_decoders = $(sort $(foreach l,$(LAYERS_UPTO_$(1)),$(wildcard $(l)/src/*_wire.c))) common/src/debug.c common/src/param.c

# libFuzzer builds: their own directory, never mixed with a variant's objects.
FUZZ_CC ?= clang
FUZZ_SECONDS ?= 60
FUZZ_BUILD := $(BUILD_ROOT)/fuzz
FUZZ_CFLAGS := -std=c11 -g -O1 -fno-omit-frame-pointer -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
$(FUZZ_BUILD)/obj/%.o: %.c
	@mkdir -p $(@D)
	$(FUZZ_CC) $(CPPFLAGS) -I$(FUZZ_HARNESS) $(FUZZ_CFLAGS) -c $< -o $@

# $(1)=module: its targets' objects (the harness's directory on their include path), replay_main.c
# compiled with that module's fuzz/ directory as where the corpus is, and the seed writer.
define FUZZ_MODULE
$(OBJ)/$(1)/fuzz/fuzz_%.o: $(1)/fuzz/fuzz_%.c | $(BACKEND_DEP)
	@mkdir -p $$(@D)
	$(CC) $(CPPFLAGS) -I$(FUZZ_HARNESS) $(CFLAGS) -c $$< -o $$@
$(OBJ)/$(1)/fuzz/replay_main.o: $(FUZZ_HARNESS)/replay_main.c | $(BACKEND_DEP)
	@mkdir -p $$(@D)
	$(CC) $(CPPFLAGS) -DMCCL_FUZZ_MODULE_DIR='"$(1)/fuzz"' $(CFLAGS) -c $$< -o $$@
$(BIN)/fuzz/gen_corpus_$($(1)_ID): $(FUZZ_HARNESS)/gen_corpus.c $(1)/fuzz/seeds.c $(FUZZ_HARNESS)/gen_corpus.h $(FUZZ_HARNESS)/fuzz.h
	@mkdir -p $$(@D)
	$(CC) $(CPPFLAGS) -I$(FUZZ_HARNESS) $(CFLAGS) $$(filter %.c,$$^) -o $$@
endef
# $(1)=module $(2)=target name: the replay test (linked with the module's libraries and those below
# it, as the module's own tests are) and the libFuzzer binary.
define FUZZ_TARGET
$(BIN)/$($(1)_ID)/replay_$(2): $(OBJ)/$(1)/fuzz/fuzz_$(2).o $(OBJ)/$(1)/fuzz/replay_main.o $(TEST_LIB) $(call linklibs,$(1)) $(BACKEND_DEP)
	@mkdir -p $$(@D)
	$(CC) $(LDFLAGS) -o $$@ $$(filter %.o,$$^) $(TEST_LIB) $(call linklibs,$(1)) $(BACKEND_LIBS) $(LDLIBS) -lstdc++
$(FUZZ_BUILD)/fuzz_$(2): $(FUZZ_BUILD)/obj/$(1)/fuzz/fuzz_$(2).o $(patsubst %.c,$(FUZZ_BUILD)/obj/%.o,$(call fuzz_decoders,$(1)))
	$(FUZZ_CC) $(FUZZ_CFLAGS) $$^ -o $$@ -pthread
endef
$(foreach m,$(FUZZ_MODULES),$(eval $(call FUZZ_MODULE,$(m)))$(foreach n,$(FUZZ_NAMES_$(m)),$(eval $(call FUZZ_TARGET,$(m),$(n)))))

FUZZ_REPLAY_BINS := $(foreach m,$(FUZZ_MODULES),$(addprefix $(BIN)/$($(m)_ID)/replay_,$(FUZZ_NAMES_$(m))))
.SECONDARY: $(foreach m,$(FUZZ_MODULES),$(patsubst %,$(OBJ)/$(m)/fuzz/fuzz_%.o,$(FUZZ_NAMES_$(m))) $(OBJ)/$(m)/fuzz/replay_main.o)
ALL_BINS += $(FUZZ_REPLAY_BINS)
# Each replay test joins its module's tests (make test LAB=05 runs lab 05's).
TEST_ENTRIES += $(foreach m,$(filter $(TEST_MODULES),$(FUZZ_MODULES)),$(addprefix plain:$(BIN)/$($(m)_ID)/replay_,$(FUZZ_NAMES_$(m))))

FUZZ_BINS := $(addprefix $(FUZZ_BUILD)/fuzz_,$(FUZZ_NAMES))
.SECONDARY: $(foreach m,$(FUZZ_MODULES),$(patsubst %,$(FUZZ_BUILD)/obj/$(m)/fuzz/fuzz_%.o,$(FUZZ_NAMES_$(m))))
# mk/fuzz.sh names each target by its directory and name: <module>/fuzz/<name>.
FUZZ_TARGETS := $(foreach m,$(FUZZ_MODULES),$(addprefix $(m)/fuzz/,$(FUZZ_NAMES_$(m))))
FUZZ_SEED_MODULES := $(foreach m,$(FUZZ_MODULES),$(if $(wildcard $(m)/fuzz/seeds.c),$(m)))

.PHONY: fuzz fuzz-build fuzz-seed
fuzz-build:
	@mk/deps.sh ensure fuzz && $(MAKE) --no-print-directory $(FUZZ_BINS)

# FUZZ_SECONDS per target; FUZZ=pattern narrows the targets (e.g. FUZZ=proxy).
fuzz: fuzz-build
	@mk/fuzz.sh $(FUZZ_BUILD) $(FUZZ_SECONDS) $(if $(FUZZ),$(foreach t,$(FUZZ_TARGETS),$(if $(findstring $(FUZZ),$(notdir $(t))),$(t))),$(FUZZ_TARGETS))

# Rewrite each module's seed corpus from its fuzz/seeds.c (commit the result).
fuzz-seed: $(foreach m,$(FUZZ_SEED_MODULES),$(BIN)/fuzz/gen_corpus_$($(m)_ID))
	@set -e; $(foreach m,$(FUZZ_SEED_MODULES),echo "$(BIN)/fuzz/gen_corpus_$($(m)_ID) $(m)/fuzz/corpus"; \
	  $(BIN)/fuzz/gen_corpus_$($(m)_ID) $(m)/fuzz/corpus;)

-include $(shell find $(FUZZ_BUILD)/obj -name '*.d' 2>/dev/null)
