// An entry file of the persistent cache's store (EntryFormat.cpp gives its
// layout): the bytes encoded from a key and a payload, and parsed back with
// every check. Private to codegen.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "tessera/codegen/DiskCache.h"

namespace tessera::codegen::cache {

/// An entry's fields as found in its bytes.
struct Parsed {
  std::string problem;  // "" when valid
  std::string kind, hash;
  std::vector<KeyPart> parts;
  std::string_view payload;  // a view into the bytes parsed
};

/// Checks an entry's bytes: magic, format, checksum, then its fields.
Parsed parseEntry(const std::string& bytes);

/// The bytes of the entry holding `payload` under `key`.
std::string encodeEntry(const CacheKey& key, const std::string& payload);

}  // namespace tessera::codegen::cache
