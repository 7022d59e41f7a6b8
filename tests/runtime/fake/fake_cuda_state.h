// The fake libcuda's state, shared by its two sources: fake_cuda.cpp
// (devices, contexts, memory, modules, launches) and fake_cuda_async.cpp
// (streams, events, asynchronous copies, pointer queries, and the entry
// points tests use to act as another library would). See fake_cuda.cpp.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "fake_driver.h"

namespace fakecuda {

// cuda.h's types. Its CUresult and attribute/option enums are int-sized
// enums and its handles pointers to opaque structs; like the runtime, the
// fake spells them int and void*, the same in the ABI.
using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
constexpr CUresult OK = 0, INVALID_VALUE = 1, OUT_OF_MEMORY = 2, NOT_INITIALIZED = 3, NO_DEVICE = 100,
                   INVALID_DEVICE = 101, INVALID_CONTEXT = 201, INVALID_PTX = 218, INVALID_HANDLE = 400,
                   NOT_FOUND = 500, ILLEGAL_ADDRESS = 700, INVALID_CLUSTER_SIZE = 912;

struct Ctx {
  int device;
  int retains = 0;
};
struct Function {
  std::string name;
  std::vector<unsigned> paramBytes;
  int maxDynamicShared = 48 * 1024;
  /// The entry's `.reqnctapercluster x, y, z`; {0, 0, 0} without one.
  unsigned cluster[3] = {0, 0, 0};
};
struct Module {
  std::string ptx;
  // Functions live as long as their module, as in the driver.
  std::vector<std::unique_ptr<Function>> functions;
};
struct Stream {
  Ctx* ctx;
  int launches = 0;
};
struct Event {
  Ctx* ctx;
  bool recorded = false;
  double ms = 0;  // the fake clock when recorded
};
struct Alloc {
  std::vector<uint8_t> bytes;
  int device;
};

inline std::mutex mu;
inline bool initialised = false;
inline Ctx contexts[2] = {{0}, {1}};
inline thread_local Ctx* current = nullptr;
inline std::map<CUdeviceptr, Alloc> memory;          // base address -> bytes
inline CUdeviceptr nextAddress = 0x5a0000000000ull;  // far from any host mapping
// Live modules and streams, owned here: what the runtime leaves behind is
// freed when the library is unloaded.
inline std::map<void*, std::unique_ptr<Module>> liveModules;
inline std::map<void*, std::unique_ptr<Stream>> liveStreams;
inline std::map<void*, std::unique_ptr<Event>> liveEvents;
inline int streams = 0, modules = 0, failNextSync = 0, copies = 0;
inline double clockMs = 0;
inline FakeLaunch last;
inline int launches = 0;
inline int sharedOptIn = -1;
inline int tensorMapEncodes = 0;

// The bytes [p, p + n) of one allocation, or nullptr.
inline uint8_t* resolve(CUdeviceptr p, size_t n) {
  auto it = memory.upper_bound(p);
  if (it == memory.begin()) return nullptr;
  --it;
  const CUdeviceptr off = p - it->first;
  std::vector<uint8_t>& bytes = it->second.bytes;
  if (off > bytes.size() || n > bytes.size() - off) return nullptr;
  return bytes.data() + off;
}

// The allocation holding p, or memory.end().
inline std::map<CUdeviceptr, Alloc>::iterator allocationOf(CUdeviceptr p) {
  auto it = memory.upper_bound(p);
  if (it == memory.begin()) return memory.end();
  --it;
  return p - it->first < it->second.bytes.size() ? it : memory.end();
}

inline CUdeviceptr allocate(int device, size_t bytes) {
  const CUdeviceptr p = nextAddress;
  memory[p] = Alloc{std::vector<uint8_t>(bytes, 0xCD), device};
  nextAddress += (bytes + 4095) / 4096 * 4096 + 4096;  // a gap: overruns do not land in a neighbour
  return p;
}

inline int takeSyncFailure() {
  const int r = failNextSync;
  failNextSync = 0;
  return r;
}

// Parameter widths of `.entry name( .param .u64 x, ... )`; a by-value
// blob such as a tensor map, `.param .align 64 .b8 x[128]`, is its bytes.
// `cluster`: its `.reqnctapercluster x, y, z` (between the parameter list
// and the body), left alone without one.
inline bool parseEntry(const std::string& ptx, const std::string& name, std::vector<unsigned>& bytes,
                       unsigned* cluster) {
  const std::string key = ".entry " + name;
  size_t at = 0;
  while ((at = ptx.find(key, at)) != std::string::npos) {
    size_t after = at + key.size();
    if (after < ptx.size() && (ptx[after] == '(' || ptx[after] == ' ' || ptx[after] == '\n' || ptx[after] == '\t'))
      break;
    at = after;
  }
  if (at == std::string::npos) return false;
  const size_t open = ptx.find('(', at), close = ptx.find(')', at);
  if (open == std::string::npos || close == std::string::npos) return false;
  const std::string list = ptx.substr(open, close - open);
  for (size_t p = 0; (p = list.find(".param .", p)) != std::string::npos;) {
    p += 8;  // at the type: u64, s32, f32, b8, ... or "align N .b8"
    if (list.compare(p, 6, "align ") == 0) {
      p = list.find('.', p);
      if (p == std::string::npos) return false;
      ++p;
    }
    const unsigned bits = static_cast<unsigned>(std::stoul(list.substr(p + 1)));
    unsigned count = 1;
    const size_t end = list.find_first_of(",)", p), bracket = list.find('[', p);
    if (bracket != std::string::npos && bracket < end)
      count = static_cast<unsigned>(std::stoul(list.substr(bracket + 1)));
    bytes.push_back(bits / 8 * count);
  }
  const size_t body = ptx.find('{', close), req = ptx.find(".reqnctapercluster", close);
  if (req != std::string::npos && req < body) {
    unsigned c[3] = {1, 1, 1};  // dimensions left out are 1
    if (std::sscanf(ptx.c_str() + req, ".reqnctapercluster %u , %u , %u", &c[0], &c[1], &c[2]) < 1) return false;
    std::memcpy(cluster, c, sizeof c);
  }
  return true;
}

#define NEED_CONTEXT() \
  if (!current) return INVALID_CONTEXT

}  // namespace fakecuda

extern "C" {
fakecuda::CUresult cuMemcpyHtoD_v2(fakecuda::CUdeviceptr dst, const void* src, size_t n);
fakecuda::CUresult cuMemcpyDtoH_v2(void* dst, fakecuda::CUdeviceptr src, size_t n);
fakecuda::CUresult cuMemcpyDtoD_v2(fakecuda::CUdeviceptr dst, fakecuda::CUdeviceptr src, size_t n);
}
