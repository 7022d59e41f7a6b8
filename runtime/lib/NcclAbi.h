// The subset of NCCL the NCCL and RCCL engines call, declared here rather
// than taken from nccl.h / rccl.h: the libraries are opened with dlopen
// (libnccl.so.2, librccl.so), so Tessera builds without them. RCCL keeps
// NCCL's API and ABI (names, enum values, the 128-byte unique id).
// tests/runtime/collectives_abi_test.cpp checks the declarations against
// nccl.h when it is installed.
#pragma once

#include <cstddef>

namespace tessera::rt::ncclabi {

using ncclResult_t = int;    // an enum in nccl.h
using ncclComm_t = void*;    // struct ncclComm*
using ncclDataType_t = int;  // an enum
using ncclRedOp_t = int;     // an enum
using ncclStream_t = void*;  // cudaStream_t / hipStream_t: the driver's stream

constexpr size_t kUniqueIdBytes = 128;
struct ncclUniqueId {
  char internal[kUniqueIdBytes];
};

constexpr ncclResult_t ncclSuccess = 0;
constexpr ncclResult_t ncclInProgress = 7;

constexpr ncclDataType_t ncclInt8 = 0;
constexpr ncclDataType_t ncclInt32 = 2;
constexpr ncclDataType_t ncclInt64 = 4;
constexpr ncclDataType_t ncclFloat16 = 6;
constexpr ncclDataType_t ncclFloat32 = 7;
constexpr ncclDataType_t ncclFloat64 = 8;
constexpr ncclDataType_t ncclBfloat16 = 9;

constexpr ncclRedOp_t ncclSum = 0;
constexpr ncclRedOp_t ncclProd = 1;
constexpr ncclRedOp_t ncclMax = 2;
constexpr ncclRedOp_t ncclMin = 3;

// X(field, symbol, return type, parameter list)
#define TESSERA_NCCL_FUNCTIONS(X)                                                                                      \
  X(GetVersion, ncclGetVersion, ncclResult_t, (int* version))                                                          \
  X(GetUniqueId, ncclGetUniqueId, ncclResult_t, (ncclUniqueId * id))                                                   \
  X(CommInitRank, ncclCommInitRank, ncclResult_t, (ncclComm_t * comm, int nranks, ncclUniqueId id, int rank))          \
  X(CommInitAll, ncclCommInitAll, ncclResult_t, (ncclComm_t * comms, int ndev, const int* devlist))                    \
  X(CommDestroy, ncclCommDestroy, ncclResult_t, (ncclComm_t comm))                                                     \
  X(CommAbort, ncclCommAbort, ncclResult_t, (ncclComm_t comm))                                                         \
  X(CommGetAsyncError, ncclCommGetAsyncError, ncclResult_t, (ncclComm_t comm, ncclResult_t * asyncError))              \
  X(GetErrorString, ncclGetErrorString, const char*, (ncclResult_t result))                                            \
  X(AllReduce, ncclAllReduce, ncclResult_t,                                                                            \
    (const void* send, void* recv, size_t count, ncclDataType_t type, ncclRedOp_t op, ncclComm_t comm,                 \
     ncclStream_t stream))                                                                                             \
  X(AllGather, ncclAllGather, ncclResult_t,                                                                            \
    (const void* send, void* recv, size_t sendCount, ncclDataType_t type, ncclComm_t comm, ncclStream_t stream))       \
  X(ReduceScatter, ncclReduceScatter, ncclResult_t,                                                                    \
    (const void* send, void* recv, size_t recvCount, ncclDataType_t type, ncclRedOp_t op, ncclComm_t comm,             \
     ncclStream_t stream))                                                                                             \
  X(Broadcast, ncclBroadcast, ncclResult_t,                                                                            \
    (const void* send, void* recv, size_t count, ncclDataType_t type, int root, ncclComm_t comm, ncclStream_t stream)) \
  X(Send, ncclSend, ncclResult_t,                                                                                      \
    (const void* send, size_t count, ncclDataType_t type, int peer, ncclComm_t comm, ncclStream_t stream))             \
  X(Recv, ncclRecv, ncclResult_t,                                                                                      \
    (void* recv, size_t count, ncclDataType_t type, int peer, ncclComm_t comm, ncclStream_t stream))                   \
  X(GroupStart, ncclGroupStart, ncclResult_t, ())                                                                      \
  X(GroupEnd, ncclGroupEnd, ncclResult_t, ())

#define TESSERA_DECLARE_NCCL_PFN(field, sym, R, params) using PFN_##field = R(*) params;
TESSERA_NCCL_FUNCTIONS(TESSERA_DECLARE_NCCL_PFN)
#undef TESSERA_DECLARE_NCCL_PFN

/// ncclGetLastError (NCCL 2.13+, RCCL 2.13+): the last error's details; optional.
using PFN_GetLastError = const char* (*)(ncclComm_t comm);

}  // namespace tessera::rt::ncclabi
