// Hopper's warpgroup MMA on NVPTX: `wgmma.mma_async` and the fence and wait
// that bracket it, as inline assembly (LLVM 22 has intrinsics for
// wgmma.fence / commit_group / wait_group but none for wgmma.mma_async).
//
// One warpgroup (4 consecutive warps) computes D (64 x N, f32) = A (64 x 16,
// f16/bf16, in registers: each warp holds its 16 rows as mma.m16n8k16's A
// fragment) x B (16 x N, in shared memory, named by a matrix descriptor) +
// D. The accumulator registers of a warp are mma.m16n8k16's C fragments of
// its 16 rows for the N/8 n-tiles in order: d[4i + 2h + s] = (row g + 8h,
// col 8i + 2t + s), g = lane / 4, t = lane % 4 (PTX ISA, "Register
// Fragments and Shared Memory Matrix Layouts" of wgmma.mma_async.m64nNk16).
//
// The instruction runs asynchronously: its registers may be touched only
// after `wgmma.wait_group` retires it, and the registers it reads (A, D) may
// be written by other instructions only before a `wgmma.fence`. So that
// LLVM cannot move a write or a read of them across either, the fence and
// the wait are inline assembly that take those registers and hand them
// back (tied operands): every use of an accumulator depends on the wait.
//
// The emulator (codegen/emu/EmuInlineAsm.cpp) recognises exactly these
// texts (matchWgmma), so the two sides are defined by this one file.
// Private to codegen; free of LLVM headers (tests include it).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "../llvm/LLVMForward.h"  // relative: tests include these headers by path

namespace tessera::codegen::nvptx {

/// The matrix descriptor of an operand in shared memory (PTX ISA, "Matrix
/// Descriptor Format"): bits 0-13 start address >> 4, 16-29 leading byte
/// offset (LBO) >> 4, 32-45 stride byte offset (SBO) >> 4, 62-63 swizzle (0
/// none, 1 128-byte, 2 64-byte, 3 32-byte). The canonical layouts with a
/// swizzle of S bytes (PTX ISA, "Shared Memory Matrix Layout"), in rows of
/// S bytes grouped by 8 (an 8 x S-byte atom), 16-byte chunk c of a row at
/// chunk c ^ ((address >> 7) & (S / 16 - 1)):
///   K-major (B^T: N x K): a row holds S / 2 k of one n; rows are
///     consecutive n, 8-row groups SBO apart; one wgmma's 16 k fit a row.
///   N-major (B: K x N): a row holds S / 2 n of one k; rows are consecutive
///     k, the 16 k of one wgmma two 8-row groups SBO apart, and the blocks
///     of S / 2 columns LBO apart.
/// The swizzle is codegen/gpu/GpuDot.h's stagingIndex when the buffer is
/// aligned to 8 * S (it is one of address bits).
enum class WgmmaSwizzle : unsigned { None = 0, B128 = 1, B64 = 2, B32 = 3 };
/// Bytes of one swizzled row (128, 64, 32; 16 for None).
unsigned swizzleBytes(WgmmaSwizzle s);
/// The constant part of a descriptor (everything but the start address).
uint64_t descriptorBits(WgmmaSwizzle s, uint64_t leadingBytes, uint64_t strideBytes);

/// fp8 operand formats of the m64nNk32 forms.
enum class WgmmaFp8 : uint8_t { None, E4M3, E5M2 };

struct WgmmaForm {
  int n = 0;          // 8 to 256, a multiple of 8
  bool bf16 = false;  // else f16
  /// imm-trans-b: B is stored N-major (K x N rows, "transposed"), else
  /// K-major (N x K rows).
  bool transB = false;
  /// A read from shared memory through its own descriptor (K-major), else
  /// from four registers.
  bool aShared = false;
  /// fp8 operands (both set, or neither): m64nNk32.f32.<a>.<b>, A from four
  /// registers of 4 codes each, B K-major (fp8 has no imm-trans operands,
  /// so transB and aShared stay false and bf16 is unused).
  WgmmaFp8 fp8A = WgmmaFp8::None, fp8B = WgmmaFp8::None;
  bool isFp8() const { return fp8A != WgmmaFp8::None; }
  bool operator==(const WgmmaForm&) const = default;
};

/// The inline assembly of one form: outputs $0..$h-1 (h = n / 2, "=f"),
/// the accumulator inputs tied to them, A $2h..$2h+3 ("r"), B's descriptor
/// $2h+4 ("l"), then "r" 1 for scale-d (D is accumulated):
///   { .reg .pred p; setp.ne.b32 p, $2h+5, 0;
///     wgmma.mma_async.sync.aligned.m64n<N>k16.f32.f16.f16 {$0, ...},
///     {$2h, ...}, $2h+4, p, 1, 1, 0; }
/// (imm-scale-a = imm-scale-b = 1; the last is imm-trans-b, 1 with transB.)
/// With aShared, A's descriptor $2h ("l"), B's $2h+1, scale-d $2h+2, and
/// imm-trans-a 0 before imm-trans-b. fp8: m64n<N>k32.f32.<a>.<b>, the same
/// operands without the imm-trans ones (ptxas refuses them for fp8).
struct WgmmaAsm {
  std::string text, constraints;
};
WgmmaAsm wgmmaAsm(const WgmmaForm& f);
/// The form whose assembly has exactly this text and these constraints.
std::optional<WgmmaForm> matchWgmma(std::string_view text, std::string_view constraints);

/// The register pass-throughs: `wgmma.fence.sync.aligned;` and
/// `wgmma.wait_group.sync.aligned N;` over `nRegs` registers of which the
/// first `nInts` are "r" (A fragments) and the rest "f" (accumulators).
WgmmaAsm wgmmaFenceAsm(unsigned nInts, unsigned nRegs);
WgmmaAsm wgmmaWaitAsm(unsigned pending, unsigned nInts, unsigned nRegs);
/// Whether this is one of them (the emulator passes the registers through).
bool matchWgmmaPassThrough(std::string_view text, std::string_view constraints);
/// The N of a wait's text, -1 for the fence's (or any other text).
int wgmmaWaitPending(std::string_view text);

/// Emits one wgmma.mma_async: `a` 4 i32 (A fragments) or, aShared, one i64
/// (A's descriptor), `desc` i64, `acc` n / 2 floats; returns the n / 2
/// result floats.
std::vector<llvm::Value*> emitWgmma(llvm::IRBuilderBase& b, const WgmmaForm& f, const std::vector<llvm::Value*>& a,
                                    llvm::Value* desc, const std::vector<llvm::Value*>& acc);
/// Emits a pass-through (fence: pending < 0; else the wait of `pending`)
/// over `regs` (i32 first, then floats) and returns the registers it hands back.
std::vector<llvm::Value*> emitWgmmaPassThrough(llvm::IRBuilderBase& b, int pending,
                                               const std::vector<llvm::Value*>& regs);

}  // namespace tessera::codegen::nvptx
