// AMX tile state permission (tessera/support/HostTiles.h).
#include "tessera/support/HostTiles.h"

#if defined(__linux__) && defined(__x86_64__)
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>
#endif

namespace tessera {

#if defined(__linux__) && defined(__x86_64__)
namespace {
// Linux's arch_prctl codes (asm/prctl.h) and the XSAVE component of the
// tile data (Intel SDM vol. 1, 13.1: state component 18).
constexpr int kArchGetXcompPerm = 0x1022;
constexpr int kArchReqXcompPerm = 0x1023;
constexpr unsigned kXfeatureXtiledata = 18;

bool ask() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  // CPUID.(7,0):EDX[24] AMX-TILE.
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || !((d >> 24) & 1u)) return false;
  // The OS saves both tile components (XCR0 bits 17 and 18) only if it
  // enabled XSAVE for them (CPUID.1:ECX[27] OSXSAVE first).
  if (!__get_cpuid(1, &a, &b, &c, &d) || !((c >> 27) & 1u)) return false;
  uint32_t lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  if ((lo & (3u << 17)) != (3u << 17)) return false;
  if (syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) != 0) return false;
  uint64_t perm = 0;
  return syscall(SYS_arch_prctl, kArchGetXcompPerm, &perm) == 0 && ((perm >> kXfeatureXtiledata) & 1u);
}
}  // namespace

bool requestHostTileState() {
  static const bool granted = ask();
  return granted;
}
#else
bool requestHostTileState() { return false; }
#endif

}  // namespace tessera
