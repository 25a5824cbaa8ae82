# final/: libminccl.so and libminccl.a from every layer's library (common, labs 01-07) and
# final/src, exporting only minccl.h's calls; `make install PREFIX=...` installs them with the
# headers and minccl.pc. Every object is already -fPIC (mk/config.mk, both backends).

# The layers' archives, highest first (the link order): final, labs 07 .. 01, common. The test
# harness (libmccl_test.a) is not among them.
minccl_reverse = $(if $(1),$(call minccl_reverse,$(wordlist 2,$(words $(1)),$(1))) $(firstword $(1)))
MINCCL_ARCHIVES := $(strip $(foreach l,$(call minccl_reverse,$(LAYERS)),$($(l)_LIB)))
MINCCL_VERSION := $(shell sed -nE 's/^\#define MCCL_(MAJOR|MINOR|PATCH) ([0-9]+).*/\2/p' final/include/minccl.h | paste -sd.)
MINCCL_SONAME := libminccl.so.$(firstword $(subst ., ,$(MINCCL_VERSION)))
MINCCL_SO := $(LIB)/libminccl.so
MINCCL_A := $(LIB)/libminccl.a
MINCCL_MAP := final/minccl.map
# The API names, from the version script (for the static library's symbol table).
MINCCL_API = $(shell sed -nE 's/^ +(mccl[A-Za-z]+);$$/\1/p' $(MINCCL_MAP))
# Installed headers: minccl.h, minccl_device.h and what they include.
MINCCL_HEADERS := final/include/minccl.h final/include/minccl_device.h labs/09_device_api/include/mccl_dev_comm.h \
  common/include/mccl_result.h common/include/mccl_types.h
# What a program linking libminccl also needs: the device runtime (the sim's, or CUDA's).
ifeq ($(BACKEND),sim)
  MINCCL_SO_LIBS := -L$(LIB) -lsimcuda -Wl,-rpath,'$$ORIGIN'
  MINCCL_RUNTIME_LIBS := -lsimcuda
  MINCCL_PRIVATE_LIBS := $(MINCCL_RUNTIME_LIBS)
  MINCCL_RUNTIME_FILES := $(LIB)/libsimcuda.so
else
  MINCCL_SO_LIBS := $(BACKEND_LIBS)
  MINCCL_RUNTIME_LIBS := -L$(CUDA_HOME)/lib64 -lcudart -Wl,-rpath,$(CUDA_HOME)/lib64
  # The static library also calls the driver API (cuMem*, cuLaunchKernel): libcuda, through its stub.
  MINCCL_PRIVATE_LIBS := $(MINCCL_RUNTIME_LIBS) -L$(CUDA_HOME)/lib64/stubs -lcuda
  MINCCL_RUNTIME_FILES :=
endif

# The shared library: final's archive whole (it holds the API), the rest as the linker needs them.
$(MINCCL_SO): $(MINCCL_ARCHIVES) $(MINCCL_MAP) $(BACKEND_DEP)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -shared -Wl,-soname,$(MINCCL_SONAME) -Wl,--version-script=$(MINCCL_MAP) -Wl,--no-undefined \
	  -o $@ -Wl,--whole-archive $(firstword $(MINCCL_ARCHIVES)) -Wl,--no-whole-archive $(wordlist 2,99,$(MINCCL_ARCHIVES)) \
	  $(MINCCL_SO_LIBS) $(LDLIBS) -ldl -lstdc++
	ln -sf libminccl.so $(LIB)/$(MINCCL_SONAME)

# The static library: one relocatable object of every layer, in which only the API stays global,
# so a program that links it cannot clash with the labs' internal names.
$(MINCCL_A): $(MINCCL_ARCHIVES) $(MINCCL_MAP)
	@mkdir -p $(OBJ)/final
	ld -r -o $(OBJ)/final/minccl-all.o --whole-archive $(MINCCL_ARCHIVES) --no-whole-archive
	objcopy $(addprefix --keep-global-symbol=,$(MINCCL_API)) $(OBJ)/final/minccl-all.o $(OBJ)/final/minccl.o
	rm -f $@.tmp && ar rcs $@.tmp $(OBJ)/final/minccl.o && mv -f $@.tmp $@

ALL_LIBS += $(MINCCL_SO) $(MINCCL_A)

# make install PREFIX=dir [DESTDIR=root]: lib/libminccl.{so,a} (and, on sim, the sim's runtime
# libsimcuda.so, which every program of this backend needs; lab 08's net plugin libmccl-net-mpi.so,
# which NET dlopens next to libminccl.so), include/, lib/pkgconfig/minccl.pc.
PREFIX ?= /usr/local
# A sanitizer build's library needs that sanitizer's runtime in the program (first in its library
# list), so the installed minccl.pc of such a build links it: programs built with pkg-config run.
MINCCL_SAN_LIBS := $(if $(filter 1,$(SANITIZE)), -fsanitize=address$(comma)undefined)$(if $(filter 1,$(TSAN)), -fsanitize=thread)
.PHONY: install
install: $(MINCCL_SO) $(MINCCL_A) $(MINCCL_RUNTIME_FILES) $(NET_MPI_PLUGIN)
	install -d $(DESTDIR)$(PREFIX)/lib/pkgconfig $(DESTDIR)$(PREFIX)/include
	install -m 644 $(MINCCL_HEADERS) $(DESTDIR)$(PREFIX)/include/
	install -m 755 $(MINCCL_SO) $(DESTDIR)$(PREFIX)/lib/libminccl.so.$(MINCCL_VERSION)
	ln -sf libminccl.so.$(MINCCL_VERSION) $(DESTDIR)$(PREFIX)/lib/$(MINCCL_SONAME)
	ln -sf $(MINCCL_SONAME) $(DESTDIR)$(PREFIX)/lib/libminccl.so
	install -m 644 $(MINCCL_A) $(DESTDIR)$(PREFIX)/lib/
	$(if $(MINCCL_RUNTIME_FILES),install -m 755 $(MINCCL_RUNTIME_FILES) $(DESTDIR)$(PREFIX)/lib/)
	$(if $(NET_MPI_PLUGIN),install -m 755 $(NET_MPI_PLUGIN) $(DESTDIR)$(PREFIX)/lib/)
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|$(MINCCL_VERSION)|' -e 's|@BACKEND@|$(BACKEND)|' \
	  -e 's|@CUDA_CFLAGS@|-I$(CUDA_HOME)/include|' -e 's|@RUNTIME_LIBS@|$(MINCCL_RUNTIME_LIBS)$(MINCCL_SAN_LIBS)|' \
	  -e 's|@PRIVATE_LIBS@|$(MINCCL_PRIVATE_LIBS) -lstdc++ -lrt -lm -ldl -pthread|' \
	  final/minccl.pc.in > $(DESTDIR)$(PREFIX)/lib/pkgconfig/minccl.pc
	@echo "installed minccl $(MINCCL_VERSION) ($(BACKEND) backend) in $(DESTDIR)$(PREFIX): pkg-config --cflags --libs minccl (PKG_CONFIG_PATH=$(PREFIX)/lib/pkgconfig)"

# The mpirun tests run with 2, 3 and 4 ranks (odd rings too), as lab 07's.
final_MPI_NP := 2 3 4
# The NET test poses as 2 hosts x 2 ranks (MCCL_HOSTID from the world rank): 4 ranks.
final_mpi_net_MPI_NP := 4
# The watchdog's cases are one rank against the other: 2 ranks.
final_mpi_watchdog_MPI_NP := 2

# A peer killed mid-collective across posed hosts (final/tests/test_net_peerdeath.sh runs it under mpirun
# --enable-recovery, which a plain mpirun test entry has not: mpirun would end the job with the victim), so
# it is built from a folder of its own, which make test does not scan for tests.
NET_PEERDEATH := $(BIN)/final/net_peerdeath
MPI_SRCS += final/tests/peerdeath/net_peerdeath.c
$(NET_PEERDEATH): $(OBJ)/final/tests/peerdeath/net_peerdeath.o $(LIB)/libmccl_test.a $(MINCCL_ARCHIVES) $(BACKEND_DEP) \
                  | $(NET_MPI_PLUGIN)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -o $@ $< $(LIB)/libmccl_test.a $(MINCCL_ARCHIVES) $(MPI_LIBS) $(BACKEND_LIBS) $(LDLIBS) -lstdc++
ALL_BINS += $(NET_PEERDEATH)

# A rank killed mid-loop, the survivors shrink and go on (final/tests/test_shrink_after_kill.sh, under
# mpirun --enable-recovery for the same reason).
SHRINK_AFTER_KILL := $(BIN)/final/shrink_after_kill
MPI_SRCS += final/tests/peerdeath/shrink_after_kill.c
$(SHRINK_AFTER_KILL): $(OBJ)/final/tests/peerdeath/shrink_after_kill.o $(LIB)/libmccl_test.a $(MINCCL_ARCHIVES) \
                      $(BACKEND_DEP)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -o $@ $< $(LIB)/libmccl_test.a $(MINCCL_ARCHIVES) $(MPI_LIBS) $(BACKEND_LIBS) $(LDLIBS) -lstdc++
ALL_BINS += $(SHRINK_AFTER_KILL)

# The NCCL drop-in (libnccl.so.2 from the same archives) keeps its rules in its own file.
include final/nccl.mk

# The benchmark is an MPI program (run under mpirun, or alone) named as nccl-tests names its own.
MPI_SRCS += final/bench/allreduce_perf.c
