// Semantics of the warp-wide matrix instructions the SIMT machine emulates
// (mma.sync m16n8k16 / m16n8k32.s8, ldmatrix, AMD MFMA and WMMA): pure functions over the
// fragment registers of every lane of one warp. Private to runtime/emu.
#pragma once

#include <cstdint>

namespace tessera::emu::detail {

/// One lane's operands of a matrix multiply-accumulate (the integer forms
/// keep i32 accumulator bits in c / d).
struct LaneFrag {
  const uint32_t* a = nullptr;
  const uint32_t* b = nullptr;
  const float* c = nullptr;
  float* d = nullptr;
};

float halfToFloat(uint16_t h);
float bf16ToFloat(uint16_t h);

/// `lanes` has the warp's 32 (NVIDIA, WMMA) or 64 (MFMA) lanes; `mode`
/// is a TESSERA_EMU_{MMA,MFMA,WMMA}_* constant. Returns false for an
/// unknown mode.
bool mmaSync(int32_t mode, const LaneFrag* lanes);
bool mfma(int32_t mode, const LaneFrag* lanes);
bool wmma(int32_t mode, const LaneFrag* lanes);
/// Whether `mode` is a WMMA mode wmma() models (RDNA3's f16/bf16/iu8; with
/// TESSERA_EMU_WMMA_GFX12, RDNA4's forms of them and its fp8/bf8 forms).
bool wmmaKnown(int32_t mode);
/// Whether `mode` is an f8f6f4 MFMA mode mfma() models (EmuAbi.h: the two
/// forms, fp8 / bf8 / fp4 operands, scaled or not).
bool mfmaF8F6F4Known(int32_t mode);
/// One warp's 16 rows of wgmma.mma_async.m64nNk16 with A in registers:
/// lanes[l].a the lane's 4 A registers (mma.m16n8k16's A fragment),
/// .c / .d its n / 2 accumulators (d[4i + 2h + s] = (g + 8h, 8i + 2t + s));
/// `b` the 16 x n B elements (f16 or bf16 bits), row k at b + k * n; `a`,
/// when not null, the warp's 16 x 16 A elements (row-major) read from
/// shared memory instead of the lanes' registers.
void wgmma(bool bf16, int n, const LaneFrag* lanes, const uint16_t* b, const uint16_t* a);
/// The same for wgmma.mma_async.m64nNk32 with fp8 operands: lanes[l].a the
/// lane's 4 A registers (mma.m16n8k32's A fragment: 4 codes each), `b` the
/// 32 x n B codes, row k at b + k * n; A's format e5m2 when `aE5m2`, else
/// e4m3, B's likewise. Products exact, summed in f32 in k order from C, as
/// the fp8 mma.sync (a model: the hardware's fp8 accumulation is not
/// specified to the bit).
void wgmmaFp8(bool aE5m2, bool bE5m2, int n, const LaneFrag* lanes, const uint8_t* b);
/// ldmatrix over 32 lanes: rows[8j + r] = address of row r of matrix j.
void ldmatrix(int count, bool trans, const unsigned char* const* rows, uint32_t* const* out);

}  // namespace tessera::emu::detail
