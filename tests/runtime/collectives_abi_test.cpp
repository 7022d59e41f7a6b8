// The collective engines' declarations (runtime/lib/MpiAbi.h, NcclAbi.h)
// against Open MPI's mpi.h and NCCL's nccl.h, at compile time, when the
// headers are installed: every prototype, constant, handle and structure
// the engines use. A header that is missing is reported by a warning test.

#include <catch2/catch.hpp>

#include <cstddef>
#include <type_traits>

#if __has_include(<mpi.h>)
#define OMPI_SKIP_MPICXX 1  // the C API only
#include <mpi.h>
#define TS_HAVE_MPI_H 1
#endif
#if __has_include(<nccl.h>)
#include <nccl.h>
#define TS_HAVE_NCCL_H 1
#endif

#include "../../runtime/lib/MpiAbi.h"
#include "../../runtime/lib/NcclAbi.h"
#include "gpu_test_support.h"

using tessera::rt::testing::SameAbi;

#ifdef TS_HAVE_MPI_H
namespace mpiabi = tessera::rt::mpiabi;
#define TS_CHECK_MPI(field, sym, R, params) \
  static_assert(SameAbi<decltype(&::sym), mpiabi::PFN_##field>::value, #sym ": our declaration differs from mpi.h");
TESSERA_MPI_FUNCTIONS(TS_CHECK_MPI)
#undef TS_CHECK_MPI
// Each predefined handle is the address of the global object we look up.
#define TS_CHECK_OBJECT(field, sym) \
  static_assert(std::is_pointer_v<decltype(&::sym)>, #sym " is not declared by mpi.h");
TESSERA_MPI_OBJECTS(TS_CHECK_OBJECT)
#undef TS_CHECK_OBJECT
static_assert(std::is_pointer_v<MPI_Comm> && std::is_pointer_v<MPI_Datatype> && std::is_pointer_v<MPI_Op> &&
                  std::is_pointer_v<MPI_Request> && std::is_pointer_v<MPI_Errhandler>,
              "mpi.h's handles are not pointers: not Open MPI's ABI");
static_assert(mpiabi::kSuccess == MPI_SUCCESS);
static_assert(mpiabi::kThreadMultiple == MPI_THREAD_MULTIPLE);
static_assert(mpiabi::kMaxErrorString == MPI_MAX_ERROR_STRING);
static_assert(mpiabi::kMaxLibraryVersionString == MPI_MAX_LIBRARY_VERSION_STRING);
static_assert(sizeof(mpiabi::MPI_Status) == sizeof(MPI_Status));
static_assert(offsetof(mpiabi::MPI_Status, MPI_ERROR) == offsetof(MPI_Status, MPI_ERROR));
static_assert(std::is_same_v<decltype(&mpiabi::MPI_Status::_ucount), size_t mpiabi::MPI_Status::*>);
// (The test is not linked with MPI: the objects are only named, never used.)
TEST_CASE("the MPI engine's declarations match mpi.h", "[runtime][collectives]") {
  CHECK(mpiabi::kInPlace == MPI_IN_PLACE);
}
#else
TEST_CASE("the MPI engine's declarations match mpi.h", "[runtime][collectives]") {
  WARN("mpi.h not installed (apt-get install libopenmpi-dev): the MPI declarations are not checked");
}
#endif

#ifdef TS_HAVE_NCCL_H
namespace ncclabi = tessera::rt::ncclabi;
#define TS_CHECK_NCCL(field, sym, R, params) \
  static_assert(SameAbi<decltype(&::sym), ncclabi::PFN_##field>::value, #sym ": our declaration differs from nccl.h");
TESSERA_NCCL_FUNCTIONS(TS_CHECK_NCCL)
#undef TS_CHECK_NCCL
static_assert(SameAbi<decltype(&::ncclGetLastError), ncclabi::PFN_GetLastError>::value);
static_assert(sizeof(ncclabi::ncclUniqueId) == sizeof(::ncclUniqueId));
static_assert(ncclabi::kUniqueIdBytes == NCCL_UNIQUE_ID_BYTES);
static_assert(sizeof(ncclabi::ncclResult_t) == sizeof(::ncclResult_t));
static_assert(ncclabi::ncclSuccess == ::ncclSuccess && ncclabi::ncclInProgress == ::ncclInProgress);
static_assert(ncclabi::ncclInt8 == ::ncclInt8 && ncclabi::ncclInt32 == ::ncclInt32 &&
              ncclabi::ncclInt64 == ::ncclInt64);
static_assert(ncclabi::ncclFloat16 == ::ncclFloat16 && ncclabi::ncclFloat32 == ::ncclFloat32 &&
              ncclabi::ncclFloat64 == ::ncclFloat64 && ncclabi::ncclBfloat16 == ::ncclBfloat16);
static_assert(ncclabi::ncclSum == ::ncclSum && ncclabi::ncclProd == ::ncclProd && ncclabi::ncclMax == ::ncclMax &&
              ncclabi::ncclMin == ::ncclMin);
TEST_CASE("the NCCL engine's declarations match nccl.h", "[runtime][collectives]") { SUCCEED(); }
#else
TEST_CASE("the NCCL engine's declarations match nccl.h", "[runtime][collectives]") {
  WARN("nccl.h not installed: the NCCL declarations are not checked");
}
#endif
