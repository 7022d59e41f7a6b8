// An example's compiled kernel run on the emulator (or the CPU) with each
// of a few host-thread counts, its launch prepared afresh each time (the
// output as the example initialises it) and checked against the
// example's reference.
#pragma once

#include <catch2/catch.hpp>

#include <initializer_list>

#include "registry.h"
#include "tessera/tessera.h"

namespace examples_test {

inline void checkOnHostThreads(const tessera::CompiledKernel& k, const tessera::examples::Example& e,
                               const tessera::examples::RunContext& ctx, std::initializer_list<unsigned> threads) {
  for (unsigned n : threads) {
    INFO(n << " host threads");
    tessera::examples::Launch l = e.prepare(ctx);
    tessera::LaunchOptions o;
    o.threads = n;
    k.launchWith(l.grid, l.args, o);
    tessera::examples::CheckResult r = l.check();
    INFO(r.detail);
    CHECK(r.ok);
  }
}

}  // namespace examples_test
