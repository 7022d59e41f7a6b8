// A source reading a variable that options.md (next to tree/) does not list.
#include <cstdlib>

const char* knob() { return std::getenv("TESSERA_UNDOCUMENTED_KNOB"); }
const char* documented() { return std::getenv("TESSERA_DOCUMENTED_KNOB"); }
