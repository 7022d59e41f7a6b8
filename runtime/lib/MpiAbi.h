// The subset of MPI the MPI engine calls, declared here rather than taken
// from mpi.h: the library is opened with dlopen (libmpi.so.40, Open MPI's
// ABI since 3.0), so Tessera neither links against MPI nor needs its headers.
//
// Open MPI's handles (MPI_Comm, MPI_Datatype, MPI_Op, ...) are pointers to
// the library's predefined objects: MPI_COMM_WORLD is &ompi_mpi_comm_world,
// MPI_FLOAT is &ompi_mpi_float, and so on, which dlsym returns. MPICH and its
// derivatives (libmpi.so.12) use integer handles and are not supported.
// tests/runtime/collectives_abi_test.cpp checks every declaration below
// against Open MPI's mpi.h when it is installed.
#pragma once

#include <cstddef>

namespace tessera::rt::mpiabi {

using MPI_Comm = void*;
using MPI_Datatype = void*;
using MPI_Op = void*;
using MPI_Request = void*;
using MPI_Errhandler = void*;
using MPI_User_function = void(void* in, void* inout, int* len, MPI_Datatype* type);

/// Open MPI's MPI_Status (only ignored here, but Testall's prototype names it).
struct MPI_Status {
  int MPI_SOURCE;
  int MPI_TAG;
  int MPI_ERROR;
  int _cancelled;
  size_t _ucount;
};

constexpr int kSuccess = 0;
constexpr int kThreadMultiple = 3;
constexpr int kMaxErrorString = 256;
constexpr int kMaxLibraryVersionString = 256;
inline void* const kInPlace = reinterpret_cast<void*>(1);

// X(field, symbol, return type, parameter list)
#define TESSERA_MPI_FUNCTIONS(X)                                                                                   \
  X(Initialized, MPI_Initialized, int, (int* flag))                                                                \
  X(Finalized, MPI_Finalized, int, (int* flag))                                                                    \
  X(InitThread, MPI_Init_thread, int, (int* argc, char*** argv, int required, int* provided))                      \
  X(QueryThread, MPI_Query_thread, int, (int* provided))                                                           \
  X(Finalize, MPI_Finalize, int, ())                                                                               \
  X(CommDup, MPI_Comm_dup, int, (MPI_Comm comm, MPI_Comm * out))                                                   \
  X(CommFree, MPI_Comm_free, int, (MPI_Comm * comm))                                                               \
  X(CommRank, MPI_Comm_rank, int, (MPI_Comm comm, int* rank))                                                      \
  X(CommSize, MPI_Comm_size, int, (MPI_Comm comm, int* size))                                                      \
  X(CommSetErrhandler, MPI_Comm_set_errhandler, int, (MPI_Comm comm, MPI_Errhandler handler))                      \
  X(ErrorString, MPI_Error_string, int, (int code, char* text, int* len))                                          \
  X(GetLibraryVersion, MPI_Get_library_version, int, (char* text, int* len))                                       \
  X(OpCreate, MPI_Op_create, int, (MPI_User_function * fn, int commute, MPI_Op* op))                               \
  X(OpFree, MPI_Op_free, int, (MPI_Op * op))                                                                       \
  X(Iallreduce, MPI_Iallreduce, int,                                                                               \
    (const void* send, void* recv, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm, MPI_Request* req))      \
  X(Iallgather, MPI_Iallgather, int,                                                                               \
    (const void* send, int sendCount, MPI_Datatype sendType, void* recv, int recvCount, MPI_Datatype recvType,     \
     MPI_Comm comm, MPI_Request* req))                                                                             \
  X(IreduceScatterBlock, MPI_Ireduce_scatter_block, int,                                                           \
    (const void* send, void* recv, int recvCount, MPI_Datatype type, MPI_Op op, MPI_Comm comm, MPI_Request* req))  \
  X(Ibcast, MPI_Ibcast, int, (void* buf, int count, MPI_Datatype type, int root, MPI_Comm comm, MPI_Request* req)) \
  X(Ialltoallv, MPI_Ialltoallv, int,                                                                               \
    (const void* send, const int* sendCounts, const int* sendDispls, MPI_Datatype sendType, void* recv,            \
     const int* recvCounts, const int* recvDispls, MPI_Datatype recvType, MPI_Comm comm, MPI_Request* req))        \
  X(Isend, MPI_Isend, int,                                                                                         \
    (const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm, MPI_Request* req))           \
  X(Irecv, MPI_Irecv, int,                                                                                         \
    (void* buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm, MPI_Request* req))               \
  X(Testall, MPI_Testall, int, (int count, MPI_Request* reqs, int* flag, MPI_Status* statuses))

#define TESSERA_DECLARE_MPI_PFN(field, sym, R, params) using PFN_##field = R(*) params;
TESSERA_MPI_FUNCTIONS(TESSERA_DECLARE_MPI_PFN)
#undef TESSERA_DECLARE_MPI_PFN

// X(field, Open MPI's global object): the predefined handles, each the
// address of that object (mpi.h's OMPI_PREDEFINED_GLOBAL).
#define TESSERA_MPI_OBJECTS(X)            \
  X(CommWorld, ompi_mpi_comm_world)       \
  X(ErrorsReturn, ompi_mpi_errors_return) \
  X(OpSum, ompi_mpi_op_sum)               \
  X(OpProd, ompi_mpi_op_prod)             \
  X(OpMax, ompi_mpi_op_max)               \
  X(OpMin, ompi_mpi_op_min)               \
  X(TypeByte, ompi_mpi_byte)              \
  X(TypeInt8, ompi_mpi_int8_t)            \
  X(TypeInt16, ompi_mpi_int16_t)          \
  X(TypeInt32, ompi_mpi_int32_t)          \
  X(TypeInt64, ompi_mpi_int64_t)          \
  X(TypeUint16, ompi_mpi_uint16_t)        \
  X(TypeFloat, ompi_mpi_float)            \
  X(TypeDouble, ompi_mpi_double)

}  // namespace tessera::rt::mpiabi
