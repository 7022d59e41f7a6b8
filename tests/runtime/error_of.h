// The message of the exception of type E that f throws, for tests that check
// what an error says; a marker text when f throws nothing of that type.
#pragma once

#include <string>

namespace tessera::rt::testing {

template <class E, class F>
std::string errorOf(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  return "(no error of the expected type)";
}

}  // namespace tessera::rt::testing
