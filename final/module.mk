# final/: the NCCL drop-in (libnccl.so.2) keeps its rules in its own file.
include final/nccl.mk
