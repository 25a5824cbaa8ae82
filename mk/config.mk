# Build configuration shared by every module. See `make help`.

CUDA_HOME ?= $(or $(patsubst %/bin/nvcc,%,$(shell command -v nvcc 2>/dev/null)),/usr/local/cuda)
HAVE_GPU := $(shell nvidia-smi -L 2>/dev/null | grep -q '^GPU' && echo 1)
BACKEND ?= $(if $(HAVE_GPU),cuda,sim)
ifneq ($(filter-out cuda sim,$(BACKEND)),)
  $(error BACKEND must be cuda or sim, not '$(BACKEND)')
endif
ifeq ($(SANITIZE),1)
  ifneq ($(BACKEND),sim)
    $(error SANITIZE=1 is for the sim backend (ASan cannot see device memory); use BACKEND=sim)
  endif
endif
# TSAN=1: ThreadSanitizer over host code and the sim (whose streams and, from lab 06, kernels are
# host threads). It cannot be combined with ASan in one binary, and cannot see GPU threads.
ifeq ($(TSAN),1)
  ifneq ($(BACKEND),sim)
    $(error TSAN=1 is for the sim backend (TSan cannot see device threads); use BACKEND=sim)
  endif
  ifeq ($(SANITIZE),1)
    $(error TSAN=1 and SANITIZE=1 cannot be combined (one sanitizer runtime per binary): build them separately)
  endif
endif

# USE_REF=1 (a learner tree's make grade, mk/exercises.mk) links other archives: its own build directory.
VARIANT := $(BACKEND)$(if $(filter 1,$(DEBUG)),-debug)$(if $(filter 1,$(CUDA_DEBUG)),-G)$(if $(filter 1,$(SANITIZE)),-asan)$(if $(filter 1,$(TSAN)),-tsan)$(if $(filter 1,$(USE_REF)),-ref)
BUILD_ROOT ?= build
BUILD := $(BUILD_ROOT)/$(VARIANT)
BIN := $(BUILD)/bin
LIB := $(BUILD)/lib
OBJ := $(BUILD)/obj

CC := gcc
# SANITIZE=1 compiles host code at -O1 (AddressSanitizer's advice for usable speed; device code: CU_OPTFLAGS).
# Sanitizer builds keep line tables only (-g1): a report needs file:line, not variables, and every test
# binary links lab 07's kernels, so full debug information would take most of a CI machine's disk.
SANDEBUG := $(if $(filter 1,$(SANITIZE) $(TSAN)),-g1,-g)
OPTFLAGS := $(if $(filter 1,$(DEBUG)),-O0 -g3,$(if $(filter 1,$(SANITIZE)),-O1 $(SANDEBUG),-O2 $(SANDEBUG)))
# Device code on the sim under a sanitizer compiles at -O0 (CU_OPTFLAGS): each kernel file instantiates every
# type, function, operation and protocol, and optimising that instrumented code is most of what a sanitizer build
# costs, while the tests those kernels run spend their time switching between the sim's threads rather than in
# the kernels' own instructions. -O0 keeps every access and synchronisation the source makes, so the sanitizers
# see no fewer. The host code keeps the flags above; the device code keeps their debug information.
CU_OPTFLAGS = $(if $(filter 1,$(SANITIZE) $(TSAN)),$(patsubst -O%,-O0,$(OPTFLAGS)),$(OPTFLAGS))
comma := ,
SANFLAGS := $(if $(filter 1,$(SANITIZE)),-fsanitize=address$(comma)undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer) \
            $(if $(filter 1,$(TSAN)),-fsanitize=thread -fno-omit-frame-pointer)

# Every module's public headers are visible to every other: layering is kept by the link order
# (a lab links only itself and the labs below it) and by common/tests/test_layers.sh (no include
# points up the stack), not by hiding headers.
MODULE_DIRS := common $(sort $(wildcard labs/[0-9][0-9]_*)) $(wildcard final)
CPPFLAGS := -D_GNU_SOURCE -DMCCL_BACKEND_NAME='"$(BACKEND)"' $(foreach d,$(MODULE_DIRS),-I$(d)/include) \
            -I$(CUDA_HOME)/include -MMD -MP
# snprintf truncation is how we bound strings; gcc -Wformat-truncation flags every use of it.
# -Wvla: no array is sized by a caller's count (an unchecked stack allocation).
CFLAGS := -std=c11 -Wall -Wextra -Wvla -Werror -Wno-format-truncation $(OPTFLAGS) -fPIC -pthread $(SANFLAGS)
LDFLAGS := -pthread $(SANFLAGS)

# Device code (.cu, see common/include/mccl_device.h): nvcc for sm_90 + PTX on cuda, the same files as
# host C++17 through g++ on sim (with the sanitizer flags). Both force-include the portability header.
# CUDA_DEBUG=1 adds -G (device debug info for cuda-gdb; slow code), which DEBUG=1 does not.
NVCC ?= $(CUDA_HOME)/bin/nvcc
CXX := g++
CU_PREINCLUDE := -include common/include/mccl_device.h
ifeq ($(BACKEND),cuda)
  # -lineinfo: source lines for cuda-gdb backtraces and ncu in optimized code. Under -G, ptxas warns that
  # lab 07's kernels are too large for exact debug information, so device warnings are not errors there.
  CU_COMPILE = $(NVCC) -std=c++17 -rdc=false $(if $(filter 1,$(DEBUG)),-O0 -g,-O2 -g) \
    $(if $(filter 1,$(CUDA_DEBUG)),-G,-lineinfo -Werror all-warnings) \
    -gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90 \
    -Xcompiler -fPIC,-pthread,-Wall,-Wextra,-Werror $(CPPFLAGS) $(CU_PREINCLUDE)
else
  # -Wno-unknown-pragmas: device code says `#pragma unroll` (nvcc's), which g++ does not know. sim/include holds
  # the sim's own <cuda/atomic> and <nccl_device.h> (docs/device-contract.md), found before the toolkit's.
  CU_COMPILE = $(CXX) -std=c++17 -Wall -Wextra -Werror -Wno-unknown-pragmas $(CU_OPTFLAGS) -fPIC -pthread $(SANFLAGS) -Isim/include $(CPPFLAGS) -x c++ $(CU_PREINCLUDE)
endif

ifeq ($(BACKEND),sim)
  BACKEND_LIBS := -L$(LIB) -lsimcuda -Wl,-rpath,$(abspath $(LIB))
  BACKEND_DEP := $(LIB)/libsimcuda.so
else
  BACKEND_LIBS := -L$(CUDA_HOME)/lib64 -lcudart -L$(CUDA_HOME)/lib64/stubs -lcuda -Wl,-rpath,$(CUDA_HOME)/lib64
  BACKEND_DEP :=
endif
LDLIBS := -lrt -lm

MPICC ?= mpicc
MPI_CFLAGS = $(shell $(MPICC) --showme:compile 2>/dev/null)
MPI_LIBS = $(shell $(MPICC) --showme:link 2>/dev/null)

# mpirun flags for tests: oversubscribe (CI has 2 cores), root flags when root, and no CMA
# single-copy (refused in most containers).
MPIRUN ?= mpirun
MPIRUN_FLAGS ?= --oversubscribe --bind-to none --mca btl_vader_single_copy_mechanism none \
                $(if $(filter 0,$(shell id -u)),--allow-run-as-root)
