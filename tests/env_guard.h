// Test support: an environment variable set (or unset) for one scope.
#pragma once

#include <cstdlib>
#include <string>

namespace tessera::testing {

/// Sets `name` to `value` (unsets it for nullptr) until the end of the
/// scope, then restores what was there before. Tests that read settings
/// from the environment (drivers, caches, peaks) run in one process, one
/// after another: each must leave the environment as it found it.
class EnvGuard {
 public:
  EnvGuard(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old, had_ = true;
    if (value)
      setenv(name, value, 1);
    else
      unsetenv(name);
  }
  ~EnvGuard() {
    if (had_)
      setenv(name_, old_.c_str(), 1);
    else
      unsetenv(name_);
  }
  EnvGuard(const EnvGuard&) = delete;
  EnvGuard& operator=(const EnvGuard&) = delete;

 private:
  const char* name_;
  std::string old_;
  bool had_ = false;
};

}  // namespace tessera::testing
