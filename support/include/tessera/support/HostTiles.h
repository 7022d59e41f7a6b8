// The x86 AMX tile state (TILECFG and TILEDATA, 8 KiB of registers) is not
// given to a Linux process by default: it must ask for it once
// (arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA), Linux 5.16 on),
// and an AMX instruction run before that faults with SIGILL. The compiler
// asks before it lets CPU code use the tiles, and the CPU device before it
// loads such code, so neither can crash a process that lacks the state.
#pragma once

namespace tessera {

/// Asks the OS for the AMX tile state for this process, once (later calls
/// return the first answer). True when the process may execute AMX
/// instructions: the cpu has AMX, the OS saves its state (XCR0) and granted
/// it. False on other hosts and architectures.
bool requestHostTileState();

}  // namespace tessera
