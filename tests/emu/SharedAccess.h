// Shared-memory accesses through the machine's hook, as the rewritten
// module makes them (codegen/emu/EmuMemory.cpp), for the kernels the
// emulator's tests write in C++.
#pragma once

#include "tessera/support/EmuAbi.h"

namespace tessera::emu::test {

template <class T>
T sload(T* p, int op) {
  return *static_cast<T*>(tessera_emu_shared_access(p, sizeof(T), TESSERA_EMU_LOAD, op));
}
template <class T>
void sstore(T* p, T v, int op) {
  *static_cast<T*>(tessera_emu_shared_access(p, sizeof(T), TESSERA_EMU_STORE, op)) = v;
}

}  // namespace tessera::emu::test
