#include "tessera/ir/analysis/ProbeScopes.h"

#include <map>

#include "tessera/support/Error.h"

namespace tessera::ir {

ProbeScopes::ProbeScopes(const Function& f) {
  std::map<std::string, uint32_t> ids;
  walk(const_cast<Block&>(f.body()), [&](const Op& op) {
    if (op.code() != OpCode::Probe) return;
    const std::string name = op.strAttr("name") + (op.loc().known() ? " @ " + op.loc().str() : std::string());
    auto [it, fresh] = ids.emplace(name, static_cast<uint32_t>(names.size()));
    if (fresh) names.push_back(name);
    of[&op] = it->second;
  });
}

uint32_t ProbeScopes::event(const Op& probe) const {
  auto it = of.find(&probe);
  TS_ASSERT(it != of.end(), "a probe of another kernel");
  return it->second << 1 | static_cast<uint32_t>(probe.intAttr("end") != 0);
}

}  // namespace tessera::ir
