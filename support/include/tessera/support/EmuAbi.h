// The emulator's C ABI, shared by the code a GPU kernel is rewritten into
// (codegen/emu) and the SIMT machine that runs it (runtime/emu): the mode and
// kind constants the hooks take, and the hook prototypes, generated from
// EmuHooks.def.
#pragma once

#include <cstdint>

extern "C" {
enum : int32_t {  // shfl modes, as PTX's shfl.sync.{idx,up,down,bfly}
  TESSERA_EMU_SHFL_IDX = 0,
  TESSERA_EMU_SHFL_UP = 1,
  TESSERA_EMU_SHFL_DOWN = 2,
  TESSERA_EMU_SHFL_BFLY = 3,
};
enum : int32_t {  // vote modes, as PTX's vote.sync.{all,any,uni}
  TESSERA_EMU_VOTE_ALL = 0,
  TESSERA_EMU_VOTE_ANY = 1,
  TESSERA_EMU_VOTE_UNI = 2,
};
enum : int32_t {  // memory access kinds
  TESSERA_EMU_LOAD = 0,
  TESSERA_EMU_STORE = 1,
  TESSERA_EMU_ATOMIC = 2,  // read-modify-write; atomics never race each other
};

// Matrix instructions (mode argument of the hooks below). The integer forms
// take and produce i32 accumulators in the c / d registers (the hooks'
// float pointers carry the bits) and wrap mod 2^32 as the hardware does.
enum : int32_t {
  TESSERA_EMU_MMA_M16N8K16_F16 = 0,        // mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32
  TESSERA_EMU_MMA_M16N8K16_BF16 = 1,       // ... .f32.bf16.bf16.f32
  TESSERA_EMU_MMA_M16N8K32_S8 = 2,         // mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32
  TESSERA_EMU_MMA_M16N8K32_E4M3_E4M3 = 3,  // mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32
  TESSERA_EMU_MMA_M16N8K32_E4M3_E5M2 = 4,  // ... .f32.e4m3.e5m2.f32 (A e4m3, B e5m2)
  TESSERA_EMU_MMA_M16N8K32_E5M2_E4M3 = 5,  // ... .f32.e5m2.e4m3.f32
  TESSERA_EMU_MMA_M16N8K32_E5M2_E5M2 = 6,  // ... .f32.e5m2.e5m2.f32
  TESSERA_EMU_MFMA_32X32X8_F16 = 0,        // v_mfma_f32_32x32x8f16
  TESSERA_EMU_MFMA_32X32X8_BF16 = 1,       // v_mfma_f32_32x32x8bf16_1k
  TESSERA_EMU_MFMA_16X16X16_F16 = 2,       // v_mfma_f32_16x16x16f16
  TESSERA_EMU_MFMA_16X16X16_BF16 = 3,      // v_mfma_f32_16x16x16bf16_1k
  TESSERA_EMU_MFMA_16X16X16_I8 = 4,        // v_mfma_i32_16x16x16i8 (gfx90a)
  TESSERA_EMU_MFMA_16X16X32_I8 = 5,        // v_mfma_i32_16x16x32_i8 (gfx942)
  TESSERA_EMU_MFMA_16X16X32_FP8_FP8 = 6,   // v_mfma_f32_16x16x32_fp8_fp8 (gfx942; fp8 = e4m3fnuz, bf8 = e5m2fnuz)
  TESSERA_EMU_MFMA_16X16X32_FP8_BF8 = 7,   // v_mfma_f32_16x16x32_fp8_bf8 (A fp8, B bf8)
  TESSERA_EMU_MFMA_16X16X32_BF8_FP8 = 8,   // v_mfma_f32_16x16x32_bf8_fp8
  TESSERA_EMU_MFMA_16X16X32_BF8_BF8 = 9,   // v_mfma_f32_16x16x32_bf8_bf8
  TESSERA_EMU_MFMA_32X32X16_F16 = 10,      // v_mfma_f32_32x32x16_f16 (gfx950)
  TESSERA_EMU_MFMA_32X32X16_BF16 = 11,     // v_mfma_f32_32x32x16_bf16 (gfx950)
  TESSERA_EMU_MFMA_16X16X32_F16 = 12,      // v_mfma_f32_16x16x32_f16 (gfx950)
  TESSERA_EMU_MFMA_16X16X32_BF16 = 13,     // v_mfma_f32_16x16x32_bf16 (gfx950)
  TESSERA_EMU_MFMA_16X16X32_OCP_F8 = 14,   // v_mfma_f32_16x16x32_{fp8,bf8}_{fp8,bf8} (gfx950: OCP e4m3 / e5m2)
  TESSERA_EMU_MFMA_16X16X128_F8F6F4 = 15,  // v_mfma_[scale_]f32_16x16x128_f8f6f4 (gfx950; formats: see below)
  TESSERA_EMU_MFMA_32X32X64_F8F6F4 = 16,   // v_mfma_[scale_]f32_32x32x64_f8f6f4 (gfx950)
  TESSERA_EMU_MFMA_A_BF8 = 32,             // flags added to _16X16X32_OCP_F8: the instruction's A / B
  TESSERA_EMU_MFMA_B_BF8 = 64,             // is e5m2 (bf8), else e4m3 (fp8)
  TESSERA_EMU_MFMA_SCALED = 128,           // flag added to the f8f6f4 forms: block scales (see below)
  TESSERA_EMU_WMMA_16X16X16_F16 = 0,       // v_wmma_f32_16x16x16_f16 (wave32)
  TESSERA_EMU_WMMA_16X16X16_BF16 = 1,      // v_wmma_f32_16x16x16_bf16 (wave32)
  TESSERA_EMU_WMMA_16X16X16_IU8 = 2,       // v_wmma_i32_16x16x16_iu8 (wave32), unsigned operands
  TESSERA_EMU_WMMA_A_SIGNED = 4,           // flags added to _IU8: A's / B's elements are signed
  TESSERA_EMU_WMMA_B_SIGNED = 8,
  TESSERA_EMU_WMMA_GFX12 = 16,             // flag: RDNA4's layouts (8 operand elements per lane)
  TESSERA_EMU_WMMA_16X16X16_FP8_FP8 = 32,  // v_wmma_f32_16x16x16_fp8_fp8 (RDNA4 only; fp8 = e4m3, bf8 = e5m2)
  TESSERA_EMU_WMMA_16X16X16_FP8_BF8 = 33,  // v_wmma_f32_16x16x16_fp8_bf8 (A fp8, B bf8)
  TESSERA_EMU_WMMA_16X16X16_BF8_FP8 = 34,  // v_wmma_f32_16x16x16_bf8_fp8
  TESSERA_EMU_WMMA_16X16X16_BF8_BF8 = 35,  // v_wmma_f32_16x16x16_bf8_bf8
};
// The block-scaled mma.sync mode (mma.sync.aligned.m16n8k32.row.col
// .kind::mxf8f6f4.block_scale.scale_vec::1X.f32.<a>.<b>.f32.ue8m0, sm_120a):
// TESSERA_EMU_MMA_BLOCK_SCALE plus A's element format << 16 and B's << 19
// (TESSERA_EMU_MXF_*: one element a byte, fp6 in the low six bits, fp4 in
// bits 2-5), and the selectors byte-id-a << 8, thread-id-a << 10,
// byte-id-b << 12, thread-id-b << 14; each lane's fragment arrays are the
// fp8 form's extended by scale-a-data (a[4]) and scale-b-data (b[2]). With
// TESSERA_EMU_MMA_MXF4_K64 (formats e2m1): m16n8k64.row.col.kind::mxf4
// .block_scale.scale_vec::2X, two e2m1 codes a byte in the same registers
// and two scales per row (column), bytes byte-id and byte-id + 1. With
// TESSERA_EMU_MMA_NVF4_K64 (formats e2m1, byte-ids 0): m16n8k64.row.col
// .kind::mxf4nvf4.block_scale.scale_vec::4X ... .ue4m3, the same codes and
// four UE4M3 scales per row (column), k 16b..16b+15 scaled by byte b.
enum : int32_t {
  TESSERA_EMU_MMA_BLOCK_SCALE = 16,
  TESSERA_EMU_MMA_MXF4_K64 = 1 << 22,
  TESSERA_EMU_MMA_NVF4_K64 = 1 << 23,
  TESSERA_EMU_MXF_E4M3 = 0,
  TESSERA_EMU_MXF_E5M2 = 1,
  TESSERA_EMU_MXF_E2M3 = 2,
  TESSERA_EMU_MXF_E3M2 = 3,
  TESSERA_EMU_MXF_E2M1 = 4,
};
// The f8f6f4 MFMA modes: the form plus the instruction's A format << 16 and
// B's << 19 (TESSERA_EMU_MXF_*, cbsz / blgp's own numbering: fp8 and bf8 a
// byte each in eight registers, fp4 two a byte in four, low nibble first);
// with TESSERA_EMU_MFMA_SCALED, op_sel A << 8 and op_sel B << 10 pick the
// byte of the e8m0 scale word that follows each operand's registers.
/// wgmma mode: the instruction's N (8 to 256, a multiple of 8), plus the
/// flags below.
#define TESSERA_EMU_WGMMA_BF16 0x1000
/// wgmma mode flag: imm-trans-b (B stored N-major, K x N), else K-major.
#define TESSERA_EMU_WGMMA_TRANS_B 0x2000
/// wgmma mode flag: A is read from shared memory through the descriptor in
/// the a words 0-1 (K-major), not from four fragment registers.
#define TESSERA_EMU_WGMMA_A_SHARED 0x4000
/// wgmma mode flags: fp8 operands (m64nNk32, A from registers, B K-major),
/// A's and B's format: e4m3, or e5m2 with the _E5M2 flag.
#define TESSERA_EMU_WGMMA_FP8 0x8000
#define TESSERA_EMU_WGMMA_A_E5M2 0x10000
#define TESSERA_EMU_WGMMA_B_E5M2 0x20000
/// ldmatrix mode: number of 8x8 matrices (1, 2, 4), plus this flag for .trans.
#define TESSERA_EMU_LDMATRIX_TRANS 8
/// A cancellation response (clc_try_cancel), the machine's encoding of what
/// the hardware keeps opaque: bytes 0-11 the cancelled cluster's first
/// block (x, y, z as i32), bytes 12-15 this flag where one was cancelled,
/// else 0. codegen/emu decodes query_cancel from it.
#define TESSERA_EMU_CLC_CANCELLED 1

#define TS_EMU_HOOK(name, effects, ret, ...) ret tessera_emu_##name(__VA_ARGS__);
#include "tessera/support/EmuHooks.def"
}
