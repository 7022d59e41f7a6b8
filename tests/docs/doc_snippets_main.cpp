// Runs the snippets of the documentation that the generated translation units
// registered (cmake/DocSnippets.cmake): `doc_snippets [PAGE...]` runs those
// of the named pages (docs/dsl.md, README.md, ...), or all. Prints one line
// per snippet and exits with 1 if any failed. A page with no runnable
// snippet (only compile-time checks, or none) passes: its checks happened
// when doc_snippets was built.
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "doc_snippets.h"

namespace docsnip {

static std::vector<Snippet>& registry() {
  static std::vector<Snippet> r;
  return r;
}

bool add(const Snippet& s) {
  registry().push_back(s);
  return true;
}

namespace {

// The kernel `fragment` snippets get: the signature kernel-body snippets have.
ts::Kernel fragmentKernel() {
  return ts::kernel("scale", {"out", "in", "n"}, [](ts::Ptr<float> out, ts::Ptr<const float> in, ts::Int n) {
    auto offs = ts::program_id(0) * 128 + ts::arange(128);
    auto mask = offs < n;
    ts::store(out + offs, ts::load(in + offs, mask) * 2.0f, mask);
  });
}

const char* kindName(Kind k) {
  switch (k) {
    case Kind::Program: return "program";
    case Kind::KernelBody: return "kernel-body";
    case Kind::Error: return "error";
    case Kind::Fragment: return "fragment";
    case Kind::Tir: return "tir";
    case Kind::TirError: return "tir error";
  }
  return "?";
}

/// Runs one snippet; an empty string means it passed, otherwise why not.
std::string check(const Snippet& s) {
  const ts::Target cpu = ts::Target::cpu();
  auto expectError = [&](auto&& f) -> std::string {
    try {
      f();
    } catch (const ts::Error& e) {
      if (std::string(e.what()).find(s.expect) == std::string::npos)
        return std::string("the error was \"") + e.what() + "\", expected one containing \"" + s.expect + "\"";
      return {};
    }
    return std::string("no error, expected one containing \"") + s.expect + "\"";
  };
  try {
    switch (s.kind) {
      case Kind::Program: {
        int rc = s.program();
        return rc == 0 ? std::string() : "main returned " + std::to_string(rc);
      }
      case Kind::KernelBody: ts::compile(s.kernel(), cpu); return {};
      case Kind::Error: return expectError([&] { ts::compile(s.kernel(), cpu); });
      case Kind::Fragment: {
        ts::Device dev = ts::Device::cpu();
        ts::Kernel kernel = fragmentKernel();
        s.fragment(kernel, ts::compile(kernel, dev), dev);
        return {};
      }
      case Kind::Tir:
        ts::compile(ts::parseKernel(s.text, std::string(s.page) + ":" + std::to_string(s.line)), cpu);
        return {};
      case Kind::TirError:
        return expectError(
            [&] { ts::compile(ts::parseKernel(s.text, std::string(s.page) + ":" + std::to_string(s.line)), cpu); });
    }
  } catch (const std::exception& e) {
    return std::string("threw: ") + e.what();
  }
  return "unknown kind";
}

}  // namespace
}  // namespace docsnip

int main(int argc, char** argv) {
  std::vector<std::string> pages(argv + 1, argv + argc);
  int failed = 0, ran = 0;
  for (const docsnip::Snippet& s : docsnip::registry()) {
    bool wanted = pages.empty();
    for (const auto& p : pages) wanted = wanted || p == s.page;
    if (!wanted) continue;
    ++ran;
    std::string why = docsnip::check(s);
    std::printf("%s:%d: %s: %s\n", s.page, s.line, docsnip::kindName(s.kind), why.empty() ? "ok" : "FAILED");
    if (!why.empty()) {
      std::printf("  %s\n", why.c_str());
      ++failed;
    }
  }
  std::printf("%d snippet(s) run, %d failed\n", ran, failed);
  return failed ? 1 : 0;
}
