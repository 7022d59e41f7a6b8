// A compiled kernel as plain data: what the compiler produces and the runtime
// loads, described once. codegen fills it (codegen::Artifact::binary) and
// the runtime's Device::load consumes it (rt::Binary is this type), so no
// layer copies it field by field and neither needs the other's headers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tessera/support/DType.h"

namespace tessera {

/// One kernel parameter as the compiler declared it.
struct ArgSpec {
  enum class Kind { Pointer, Scalar };
  Kind kind = Kind::Scalar;
  DType dtype = DType::I32;  // pointee dtype for pointers
  std::string name;          // the user's parameter name if known ("arg2" otherwise)
  std::string str() const;   // "ptr<f32> out", "i32 cols"
};

/// A TMA tensor map (NVIDIA sm_90a `cp.async.bulk.tensor`) the compiler
/// asks the launch to build: a tiled view of rank 2 or 3 over one of the
/// kernel's pointer arguments. Each is a hidden kernel parameter (a
/// 128-byte, 64-aligned `.param` blob) after the user's arguments, in the
/// order of KernelSignature::tensorMaps; the caller never passes it. The
/// launch reads the extents from the arguments, checks them against TMA's
/// rules (a LaunchError naming the argument and the fix) and has the device
/// encode the map (CUDA: cuTensorMapEncodeTiled; the emulator: its own
/// format, runtime/emu).
struct TensorMapSpec {
  /// A launch-time integer: the value of scalar argument `arg` times
  /// `scale`, or the constant `value` when arg < 0.
  struct Extent {
    int arg = -1;
    int64_t scale = 1;
    int64_t value = 0;
    bool operator==(const Extent&) const = default;
  };
  int source = 0;            // index of the pointer argument (KernelSignature::args)
  DType dtype = DType::F16;  // its element type
  unsigned rank = 2;         // 2 or 3
  /// Elements per dimension, innermost (contiguous) first. An unbounded
  /// dimension (the kernel masks nothing there) is the constant INT32_MAX.
  Extent dims[3];
  /// Elements between consecutive indices of dimension d (strides[0] is
  /// 1: dimension 0 is contiguous).
  Extent strides[3];
  uint32_t box[3] = {1, 1, 1};  // the tile one copy moves, innermost first
  /// Shared-memory swizzle of 16-byte chunks within rows of this many
  /// bytes (0: none; 32, 64, 128), which equals box[0] * element bytes.
  uint32_t swizzleBytes = 0;
  bool operator==(const TensorMapSpec&) const = default;
  /// "tma(a: f16 dims [K, M] strides [1, K] box [32, 8] swizzle 64)", the
  /// arguments named as in `args`.
  std::string str(const std::vector<ArgSpec>& args) const;
};

struct KernelSignature {
  std::string kernelName;
  std::vector<ArgSpec> args;
  /// Hidden parameters after `args` (GPU kernels on sm_90a only).
  std::vector<TensorMapSpec> tensorMaps;
  std::string str() const;  // "softmax(ptr<f32> out, ptr<f32> in, i32 cols)"
};

struct KernelBinary {
  /// Which field holds the code: one format per kind of target.
  enum class Format { HostFunction, PTX, HSACO, EmulatedGpu };
  Format format = Format::HostFunction;
  KernelSignature signature;
  std::string symbol;  // kernel symbol in ptx / code object (the kernel's name)

  /// HostFunction: runs programs [begin, end) of grid {gx,gy,gz}; x varies
  /// fastest; args as CUDA kernelParams (args[i] points at the i-th value).
  using HostEntry = void (*)(void* const* args, int64_t begin, int64_t end, const int32_t* grid);
  HostEntry hostEntry = nullptr;
  /// Compiled with bounds checks: the kernel takes a BoundsCheckRecord
  /// (tessera/support/BoundsCheck.h) after the arguments (GPU formats: after
  /// the tensor maps and the extents of the pointer arguments).
  bool boundsChecked = false;
  /// HostFunction: the bytes of tiles one program keeps on the stack of the
  /// thread running it (the compiler caps it); the CPU device checks that
  /// each thread it runs programs on has this much room left.
  uint64_t hostStackBytes = 0;

  /// PTX: the PTX text. (EmulatedGpu binaries keep the PTX or code object
  /// the vendor backend built from the same module, for resource reports.) NVPTX kernels take sharedBytes as dynamic
  /// shared memory at launch.
  std::string ptx;
  /// HSACO: the linked AMDGPU code object, which holds its LDS statically
  /// (launch with 0 dynamic bytes).
  std::vector<char> codeObject;
  /// GPU formats: the block size the kernel was compiled for and the shared
  /// memory it uses per block.
  unsigned threadsPerBlock = 1;
  unsigned sharedBytes = 0;
  /// NVIDIA thread-block clusters: the blocks per cluster along x, y, z the
  /// kernel was compiled for (CompileOptions::cluster; PTX
  /// `.reqnctapercluster`). {1, 1, 1}: no cluster. A launch runs the grid
  /// in clusters of this shape (every grid dimension a multiple of it), the
  /// blocks of one cluster at once, sharing their shared memory
  /// (distributed shared memory) and cluster barriers.
  uint32_t cluster[3] = {1, 1, 1};
  uint32_t clusterBlocks() const { return cluster[0] * cluster[1] * cluster[2]; }

  /// EmulatedGpu: the body of ONE GPU thread (args as kernelParams), run by
  /// the SIMT machine (tessera/runtime/Emulator.h) over blocks of
  /// threadsPerBlock threads.
  using ThreadEntry = void (*)(void* const* args);
  ThreadEntry emuThread = nullptr;
  bool emuAmd = false;
  unsigned emuWarpSize = 32;
  size_t emuStaticSharedBytes = 0;    // laid out from offset 0 of the block's shared memory
  size_t emuDynamicSharedOffset = 0;  // where dynamic shared memory starts

  /// opId -> "op @ file:line": the ops run-time reports name (the emulator's
  /// races and bounds, checked launches).
  std::vector<std::string> opNames;
  /// Compiled with probes (CompileOptions::profile): the kernel takes the
  /// address of a profile buffer (tessera/support/Profile.h) as its last
  /// parameter. profileScopes: scope index -> "name @ file:line" (the
  /// records' scope numbers index it); profileWarps: slots per program;
  /// profileClock: what the records' times count.
  enum class ProfileClock { None, Nanoseconds, Realtime100MHz, TimeStampCounter, EmulatorOps };
  bool profiled = false;
  std::vector<std::string> profileScopes;
  unsigned profileWarps = 0;
  ProfileClock profileClock = ProfileClock::None;
  /// Keeps the code alive (the JIT that holds hostEntry / emuThread).
  std::shared_ptr<void> owner;
};

/// What a format is, for messages: "PTX (for a CUDA device)".
const char* describe(KernelBinary::Format f);

}  // namespace tessera
