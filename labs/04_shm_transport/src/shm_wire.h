// Lab 04, private: decoders of what the SHM transport receives from elsewhere: the peer's connect
// information (struct mcclConnect bytes, exchanged over a socket) and the requests its proxy hooks
// get (carried over lab 05's RPC socket). shm.c calls them; this lab's fuzz/ targets feed them arbitrary
// bytes. Each checks lengths, kinds, sizes and string termination and writes *out only on success.
#ifndef MCCL_SHM_WIRE_H_
#define MCCL_SHM_WIRE_H_

#include <stddef.h>
#include "mccl_shm.h"

// A descriptor another process made: LEGACY with a 6-character [A-Za-z0-9] suffix and a size > 0,
// or CUMEM with a POSIX-fd handle type and a size > 0. mcclInvalidArgument (it is also the check of
// mcclShmImportShareableBuffer's argument).
mcclResult_t mcclShmIpcDescCheck(const mcclShmIpcDesc_t* desc);
// The peer's connect information: len is sizeof(struct mcclShmConnectInfo) up to MCCL_CONNECT_SIZE,
// rank >= 0, a descriptor that passes mcclShmIpcDescCheck, and for CUMEM a non-zero handle to ask
// the owner's proxy for. mcclInternalError for a wrong length, mcclInvalidArgument for a bad
// field (the connect hook's argument).
mcclResult_t mcclShmConnectInfoDecode(const void* buf, size_t len, struct mcclShmConnectInfo* out);
// proxySetup's request on a send (send=1) or receive side: buffSize a multiple of 4096 from 4096 to
// MCCL_SHM_MAX_BUFFSIZE; llBuffSize 0 on the send side, whole LL steps up to MCCL_SHM_MAX_BUFFSIZE on
// the receive side; size exactly the page (send) or the page, the LL and the SIMPLE FIFO (receive);
// legacy 0 or 1. mcclInternalError for a wrong length, mcclInvalidArgument for a bad field.
mcclResult_t mcclShmRequestDecode(const void* buf, size_t len, int send, struct mcclShmRequest* out);
// proxyConnect's request: three non-NULL addresses. mcclInternalError / mcclInvalidArgument as above.
mcclResult_t mcclShmProxyConnectReqDecode(const void* buf, size_t len, struct mcclShmProxyConnectReq* out);

#endif
