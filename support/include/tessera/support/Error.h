// Error types shared by every layer of Tessera.
//
// Two kinds of failure exist and they are kept apart on purpose:
//  * user errors (bad DSL use, malformed IR text, bad launches, missing
//    drivers or toolchains, over-budget resources) throw a subclass of
//    tessera::Error whose message names the problem and, where known, the
//    user's file and line;
//  * compiler bugs trip TS_ASSERT / TS_UNREACHABLE, which stay on in release
//    builds and throw InternalError (never abort), so a host application can
//    report them instead of dying.
#pragma once

#include <stdexcept>
#include <string>

namespace tessera {

/// Base of every exception Tessera throws.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Misuse of the embedded DSL: shapes, dtypes, axes, schedules.
class DslError : public Error {
  using Error::Error;
};
/// The verifier rejected a malformed kernel IR.
class VerifyError : public Error {
  using Error::Error;
};
/// Textual IR that does not parse.
class ParseError : public Error {
  using Error::Error;
};
/// Lowering or LLVM code generation failed for a reason the user can act on.
class CompileError : public Error {
  using Error::Error;
};
/// A kernel does not fit a target's limits (shared memory, threads, registers).
class ResourceError : public Error {
  using Error::Error;
};
/// Bad launch: argument count or type, null buffer, empty or oversized grid.
class LaunchError : public Error {
  using Error::Error;
};
/// A device, driver or toolchain that is absent or failed.
class DeviceError : public Error {
  using Error::Error;
};
/// A collective across devices failed as a group (tessera/runtime/Collectives.h):
/// ranks whose calls do not match (counts, dtypes, operation, root), a peer
/// that died or never made its call (the wait timed out), or the engine
/// (MPI, NCCL, RCCL) reporting an error. The communicator cannot be used
/// afterwards.
class CommError : public DeviceError {
  using DeviceError::DeviceError;
};
/// An API used the wrong way: an empty (default-constructed) handle, an
/// unknown stage name, a stage that does not exist for the kernel's target,
/// an example run with a shape it does not take.
class UsageError : public Error {
  using Error::Error;
};
/// A compiler bug: an internal invariant did not hold.
class InternalError : public Error {
  using Error::Error;
};

[[noreturn]] void internalError(const char* cond, const char* file, int line, const std::string& msg);

}  // namespace tessera

#define TS_ASSERT(cond, msg)                                               \
  do {                                                                     \
    if (!(cond)) ::tessera::internalError(#cond, __FILE__, __LINE__, msg); \
  } while (0)

#define TS_UNREACHABLE(msg) ::tessera::internalError("unreachable", __FILE__, __LINE__, msg)
