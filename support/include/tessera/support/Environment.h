// The environment variables the library reads, from one registry
// (Environment.def): code reads them through env::get, never by spelling
// the name, so every knob has one entry giving its type, default, meaning
// and reader, and docs/options.md is checked against it.
#pragma once

#include <cstdlib>
#include <optional>
#include <string_view>

namespace tessera::env {

enum class Var {
#define TS_ENV(Id, name, type, dflt, meaning, reader) Id,
#include "tessera/support/Environment.def"
};

struct Info {
  const char* name;     // the variable, TESSERA_...
  const char* type;     // "Folder", "Switch", ...
  const char* dflt;     // what applies when unset ("" : nothing)
  const char* meaning;  // one line
  const char* reader;   // the file(s) that read it
};

inline constexpr Info kAll[] = {
#define TS_ENV(Id, name, type, dflt, meaning, reader) {name, #type, dflt, meaning, reader},
#include "tessera/support/Environment.def"
};

inline constexpr const Info& info(Var v) { return kAll[static_cast<unsigned>(v)]; }
inline constexpr const char* name(Var v) { return info(v).name; }

/// The variable's value, or nullptr when it is unset or empty (an empty
/// value means "not set" for every Tessera variable).
inline const char* get(Var v) {
  const char* s = std::getenv(name(v));
  return s && *s ? s : nullptr;
}

/// The registered variable spelt `n` (the tool variables GpuToolchain.h
/// derives from a tool's name are looked up this way).
inline std::optional<Var> byName(std::string_view n) {
  for (unsigned i = 0; i < std::size(kAll); ++i)
    if (n == kAll[i].name) return static_cast<Var>(i);
  return std::nullopt;
}

}  // namespace tessera::env
