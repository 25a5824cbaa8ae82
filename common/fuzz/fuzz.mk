# Fuzz targets of the decoders of every message that crosses a socket (docs/fuzzing.md). Included
# by the top Makefile. Each common/fuzz/fuzz_<name>.c is built twice:
#  - `make fuzz`: with clang -fsanitize=fuzzer,address,undefined into $(FUZZ_BUILD)/fuzz_<name>,
#    then run for FUZZ_SECONDS against the committed corpus (mk/fuzz.sh). A crash fails the target
#    and leaves its input in $(FUZZ_BUILD)/crashes/.
#  - `make all` / `make test`: with the normal compiler and replay_main.c into
#    $(BIN)/fuzz/replay_<name>, a test that replays corpus/<name>/ and crashes/<name>/ (so the sim,
#    sanitizer and TSan runs of CI replay every former crash, with or without clang).
FUZZ_DIR := common/fuzz
FUZZ_NAMES := $(patsubst $(FUZZ_DIR)/fuzz_%.c,%,$(sort $(wildcard $(FUZZ_DIR)/fuzz_*.c)))
# The decoders: the *_wire.c file of each module that receives messages, and the logging they use.
FUZZ_DECODER_SRCS := $(sort $(wildcard common/src/*_wire.c labs/*/src/*_wire.c)) common/src/debug.c common/src/param.c
# The replay binaries link the libraries of the highest module that holds a decoder (and so all below).
FUZZ_TOP := $(lastword $(foreach m,$(LAYERS),$(if $(wildcard $(m)/src/*_wire.c),$(m))))
FUZZ_REPLAY_BINS := $(addprefix $(BIN)/fuzz/replay_,$(FUZZ_NAMES))
FUZZ_REPLAY_OBJS := $(patsubst %,$(OBJ)/$(FUZZ_DIR)/fuzz_%.o,$(FUZZ_NAMES)) $(OBJ)/$(FUZZ_DIR)/replay_main.o
.SECONDARY: $(FUZZ_REPLAY_OBJS)

$(BIN)/fuzz/replay_%: $(OBJ)/$(FUZZ_DIR)/fuzz_%.o $(OBJ)/$(FUZZ_DIR)/replay_main.o $(TEST_LIB) $(call linklibs,$(FUZZ_TOP)) $(BACKEND_DEP)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -o $@ $(filter %.o,$^) $(TEST_LIB) $(call linklibs,$(FUZZ_TOP)) $(BACKEND_LIBS) $(LDLIBS) -lstdc++
ALL_BINS += $(FUZZ_REPLAY_BINS)
ifneq ($(filter common,$(TEST_MODULES)),)
  TEST_ENTRIES += $(addprefix plain:,$(FUZZ_REPLAY_BINS))
endif

# libFuzzer builds: their own directory, never mixed with a variant's objects.
FUZZ_CC ?= clang
FUZZ_SECONDS ?= 60
FUZZ_BUILD := $(BUILD_ROOT)/fuzz
FUZZ_CFLAGS := -std=c11 -g -O1 -fno-omit-frame-pointer -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
FUZZ_BINS := $(addprefix $(FUZZ_BUILD)/fuzz_,$(FUZZ_NAMES))
FUZZ_DECODER_OBJS := $(patsubst %.c,$(FUZZ_BUILD)/obj/%.o,$(FUZZ_DECODER_SRCS))
$(FUZZ_BUILD)/obj/%.o: %.c
	@mkdir -p $(@D)
	$(FUZZ_CC) $(CPPFLAGS) $(FUZZ_CFLAGS) -c $< -o $@
$(FUZZ_BUILD)/fuzz_%: $(FUZZ_BUILD)/obj/$(FUZZ_DIR)/fuzz_%.o $(FUZZ_DECODER_OBJS)
	$(FUZZ_CC) $(FUZZ_CFLAGS) $^ -o $@ -pthread
.SECONDARY: $(patsubst %,$(FUZZ_BUILD)/obj/$(FUZZ_DIR)/fuzz_%.o,$(FUZZ_NAMES))

$(BIN)/fuzz/gen_corpus: $(FUZZ_DIR)/gen_corpus.c $(FUZZ_DIR)/fuzz.h
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) $< -o $@

.PHONY: fuzz fuzz-build fuzz-seed
fuzz-build:
	@mk/deps.sh ensure fuzz && $(MAKE) --no-print-directory $(FUZZ_BINS)

# FUZZ_SECONDS per target; FUZZ=pattern narrows the targets (e.g. FUZZ=proxy).
fuzz: fuzz-build
	@mk/fuzz.sh $(FUZZ_BUILD) $(FUZZ_DIR) $(FUZZ_SECONDS) $(if $(FUZZ),$(foreach n,$(FUZZ_NAMES),$(if $(findstring $(FUZZ),$(n)),$(n))),$(FUZZ_NAMES))

# Rewrite the seed corpus from gen_corpus.c (commit the result).
fuzz-seed: $(BIN)/fuzz/gen_corpus
	$(BIN)/fuzz/gen_corpus $(FUZZ_DIR)/corpus

-include $(shell find $(FUZZ_BUILD)/obj -name '*.d' 2>/dev/null)
