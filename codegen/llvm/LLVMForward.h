// The LLVM classes that codegen's LLVM-free private headers name in their
// declarations (emitters taking an IRBuilder and returning Values), declared
// once here so that those headers, which tests include by relative path
// without LLVM's or the project root's include path, need no LLVM header.
// Hence they include this one by a relative path too.
#pragma once

namespace llvm {
class DataLayout;
class IRBuilderBase;
class Type;
class Value;
}  // namespace llvm
