// Helpers shared by the DSL tests.
#pragma once

#include <catch2/catch.hpp>

#include <string>

#include "tessera/dsl/DSL.h"
#include "tessera/ir/Printer.h"

namespace dsltest {

/// The kernel's IR text without locations (stable across edits of the test file).
inline std::string irText(const tessera::Kernel& k) {
  tessera::ir::PrintOptions o;
  o.locations = false;
  return tessera::ir::print(k.ir(), o);
}

/// Traces `body` (a kernel callable), expects a DslError, and returns its
/// message. Fails the test if tracing succeeds or throws something else.
template <class F>
std::string traceError(F&& body) {
  try {
    tessera::kernel("k", body);
  } catch (const tessera::DslError& e) {
    return e.what();
  }
  FAIL("tracing succeeded but a DslError was expected");
  return {};
}

/// "<this test file>:<line>: error: "
inline std::string at(const char* file, int line) {
  return std::string(file) + ":" + std::to_string(line) + ": error: ";
}

}  // namespace dsltest
