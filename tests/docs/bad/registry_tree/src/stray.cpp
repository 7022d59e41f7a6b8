// Reads a registered variable by spelling its name: the registry check
// must refuse it (docs/selftest/stray_variable).
#include <cstdlib>
const char* knob() { return std::getenv("TESSERA_REGISTERED_KNOB"); }
