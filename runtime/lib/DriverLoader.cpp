// dlopen / dlsym for the GPU drivers (see DriverLoader.h).

#include "DriverLoader.h"

#include <dlfcn.h>

namespace tessera::rt::driver {
namespace {

// dlopen with the text of the failure, or nullptr. dlerror() is per-thread
// and cleared by reading it, so it is read right after the call.
void* tryOpen(const std::string& name, std::string& why) {
  // RTLD_LOCAL: the driver's symbols must not satisfy other libraries' (or
  // a fake driver's) lookups; RTLD_NOW: a broken install fails here, not at
  // the first call.
  void* h = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char* e = dlerror();
    why = e ? e : "unknown error";
  }
  return h;
}

}  // namespace

Library openLibrary(const std::string& override, const char* envVar, std::initializer_list<const char*> names) {
  Library lib;
  std::string why;
  if (!override.empty()) {
    lib.handle = tryOpen(override, why);
    if (lib.handle)
      lib.path = override;
    else
      lib.error = "dlopen(" + override + ") failed (from " + envVar + "): " + why;
    return lib;
  }
  for (const char* n : names) {
    lib.handle = tryOpen(n, why);
    if (lib.handle) {
      lib.path = n;
      lib.error.clear();
      return lib;
    }
    if (!lib.error.empty()) lib.error += "; ";
    lib.error += std::string("dlopen(") + n + ") failed: " + why;
  }
  return lib;
}

void* findSymbol(const Library& lib, const char* name) { return lib.handle ? dlsym(lib.handle, name) : nullptr; }

}  // namespace tessera::rt::driver
