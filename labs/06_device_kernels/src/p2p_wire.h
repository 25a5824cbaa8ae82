// Lab 06, private: decoders of what the P2P transport receives from elsewhere: the peer's connect
// information (struct mcclConnect bytes, exchanged through the bootstrap) and the request its
// proxySetup hook gets (over lab 05's RPC socket). p2p.c calls them; this lab's fuzz/ targets feed
// them arbitrary bytes. *out is written only on success.
#ifndef MCCL_P2P_WIRE_H_
#define MCCL_P2P_WIRE_H_

#include <stddef.h>
#include "mccl_p2p.h"

// The peer's connect information: len is sizeof(struct mcclP2pConnectInfo) up to MCCL_CONNECT_SIZE,
// rank >= 0, cudaDev >= 0, pad_ 0, an allocation of size > 0 with a non-zero handle (whether it is
// large enough is the connect hook's check). mcclInternalError for a wrong length,
// mcclInvalidArgument for a bad field (the connect hook's argument).
mcclResult_t mcclP2pConnectInfoDecode(const void* buf, size_t len, struct mcclP2pConnectInfo* out);
// proxySetup's request on a send (send=1) or receive side: llBuffSize 0 on the send side, whole LL
// steps on the receive side; size exactly the page (send), or at least the page and the LL FIFO
// (receive); pad_ 0. mcclInternalError for a wrong length, mcclInvalidArgument for a bad field.
mcclResult_t mcclP2pRequestDecode(const void* buf, size_t len, int send, struct mcclP2pRequest* out);

#endif
