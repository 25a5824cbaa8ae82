# Exercises (docs/exercises.md): `make exercises` writes a learner tree from this one, where every region
# marked // EXERCISE(NN.name) ... // END EXERCISE(NN.name) is a stub; there, `make grade LAB=NN` scores it.
# mk/learner.mk exists only in a learner tree (written by mk/exercises.py): MCCL_LEARNER and REF_TREE.
-include mk/learner.mk
EXERCISES_DIR ?= ../$(notdir $(CURDIR))-learner

ifneq ($(MCCL_LEARNER),)
  # Code in progress: the parameters, helpers and labels that a stubbed region no longer uses are not errors.
  LEARNER_WNO := -Wno-unused-parameter -Wno-unused-function -Wno-unused-variable -Wno-unused-but-set-variable \
                 -Wno-unused-label -Wno-error=maybe-uninitialized
  CFLAGS += $(LEARNER_WNO)
  ifeq ($(BACKEND),cuda)
    CU_COMPILE += -Xcompiler $(subst $(eval) ,$(comma),$(strip $(LEARNER_WNO))) -diag-suppress 177,550
  else
    CU_COMPILE += $(LEARNER_WNO)
  endif
endif

# USE_REF=1 (learner tree, with LAB=NN): the labs below NN link the reference tree's archives, so a learner
# can start at any lab. The build goes to build/<variant>-ref/ (mk/config.mk), apart from the learner's own.
GRADE_LAB := $(firstword $(subst _, ,$(notdir $(firstword $(LAB)))))
REF_VARIANT := $(patsubst %-ref,%,$(VARIANT))
REF_MAKE = $(MAKE) --no-print-directory -C $(REF_TREE) BACKEND=$(BACKEND) DEBUG=$(DEBUG) SANITIZE=$(SANITIZE) \
  TSAN=$(TSAN) CUDA_DEBUG=$(CUDA_DEBUG) BUILD_ROOT=build USE_REF= LAB= T=
ifeq ($(USE_REF),1)
  ifeq ($(REF_TREE),)
    $(error USE_REF=1 is for a learner tree (written by make exercises): this tree is the reference)
  endif
  ifeq ($(GRADE_LAB),)
    $(error USE_REF=1 needs LAB=NN: the labs below NN link the reference build)
  endif
  REF_BELOW := $(foreach m,$(LAB_DIRS),$(if $(shell [ $(call labnum,$(m)) -lt $(GRADE_LAB) ] && echo 1),$(m)))
  # Their headers too: device code in a lower lab's header (lab 06's primitives) is compiled into the lab
  # that includes it, so lab 07's kernels build on the reference's primitives while 06.waitPeer is a stub.
  REF_INCLUDES := $(foreach m,$(REF_BELOW),-I$(m)/include)
  CPPFLAGS := $(foreach f,$(CPPFLAGS),$(if $(filter $(REF_INCLUDES),$(f)),-I$(REF_TREE)/$(patsubst -I%,%,$(f)),$(f)))
  REF_LIBS := $(foreach m,$(REF_BELOW),$(REF_TREE)/build/$(REF_VARIANT)/lib/libmccl_$(call modid,$(m)).a)
  linklibs = $(foreach l,$(call reverse,$(LAYERS_UPTO_$(1))),$(if $(filter $(l),$(REF_BELOW)),$(REF_TREE)/build/$(REF_VARIANT)/lib/libmccl_$($(l)_ID).a,$($(l)_LIB)))
$(REF_TREE)/build/$(REF_VARIANT)/lib/%.a:
	$(REF_MAKE) build/$(REF_VARIANT)/lib/$*.a
endif

.PHONY: exercises grade
exercises:
	@python3 mk/exercises.py gen $(EXERCISES_DIR) $(if $(filter 1,$(EXERCISES_FORCE)),--force)
	@echo "next: cd $(EXERCISES_DIR) && make grade LAB=01"

grade:
	@m="$(firstword $(call selected,$(LAB_DIRS)))"; \
	if [ -z "$(LAB)" ] || [ ! -f "$$m/exercises.txt" ]; then \
	  echo "usage: make grade LAB=NN [USE_REF=1] [T=pattern] (NN one of: $(foreach m,$(LAB_DIRS),$(call labnum,$(m))))"; exit 2; fi; \
	$(if $(filter 1,$(USE_REF)),$(REF_MAKE) $(patsubst $(REF_TREE)/%,%,$(REF_LIBS)) || exit 1;) \
	log=$(BUILD)/grade-$${m#labs/}.log; mkdir -p $(BUILD); \
	$(MAKE) --no-print-directory test LAB=$(LAB) 2>&1 | tee $$log; \
	python3 mk/grade.py $$m $$log
