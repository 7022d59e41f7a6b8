// Printer: writes the one textual form of the tile IR (Parser reads it back).
//
//   kernel @softmax(%out: ptr<f32, global>, %in: ptr<f32, global> {divisibility = 16}, %cols: i32) {
//     %0 = program_id() {axis = 0} : i32 loc("softmax.cpp":12:5)
//     %1 = arange() {end = 1024, start = 0} : tile<1024xi32>
//     %2 = splat(%0) : tile<1024xi32>
//     %3:2 = for(%lo, %hi, %step, %a, %b) : f32, tile<16xf32> {
//     ^(%4: i32, %5: f32, %6: tile<16xf32>):
//       ...
//       yield(%7, %8)
//     }
//     %9 = if(%c) : f32 {
//       yield(%x)
//     } else {
//       yield(%y)
//     }
//     return()
//   }
//
// Every op prints as  results = name(operands) {attrs} : result-types loc(...)
// with attributes sorted by key and the location optional. Values are
// numbered in order of appearance; kernel arguments keep their names.
#pragma once

#include <string>

#include "tessera/ir/IR.h"

namespace tessera::ir {

struct PrintOptions {
  bool locations = true;  // append loc("file":line:col) to ops
};

std::string print(const Function& f, const PrintOptions& opts = {});
std::string print(const Module& m, const PrintOptions& opts = {});

}  // namespace tessera::ir
