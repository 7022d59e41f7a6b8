// What the translation units generated from the documentation
// (cmake/DocSnippets.cmake) register: one entry per checked snippet, run by
// doc_snippets_main.cpp.
#pragma once

#include <string>

#include "tessera/tessera.h"

namespace ts = tessera;

namespace docsnip {

enum class Kind {
  Program,     // a whole program: its main must return 0
  KernelBody,  // a kernel body: traced, then compiled for the CPU
  Error,       // a kernel body that must throw a tessera::Error containing `expect`
  Fragment,    // host statements: run with a kernel, its CPU compile and the CPU device
  Tir,         // textual IR: parsed, verified, compiled for the CPU
  TirError,    // textual IR that must fail with a tessera::Error containing `expect`
};

struct Snippet {
  const char* page;
  int line;
  Kind kind;
  int (*program)() = nullptr;
  ts::Kernel (*kernel)() = nullptr;
  void (*fragment)(const ts::Kernel&, const ts::CompiledKernel&, const ts::Device&) = nullptr;
  const char* text = nullptr;    // the IR of a tir block
  const char* expect = nullptr;  // the expected message of an error block
};

/// Registers a snippet (called from the generated files' static initialisers).
bool add(const Snippet& s);

}  // namespace docsnip
