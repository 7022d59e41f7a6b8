// Warp-wide matrix instructions of the SIMT machine (see Matrix.h). The
// fragment layouts are those of the vendor documents:
//   PTX ISA, "Matrix Fragments for mma.m16n8k16 with floating point type"
//   and "ldmatrix"; AMD's matrix instruction calculator / CDNA ISA for
//   v_mfma_f32_{32x32x8,16x16x16}{f16,bf16_1k} and CDNA4's
//   v_mfma_f32_{32x32x16,16x16x32}_{f16,bf16}; the RDNA3 ISA for
//   v_wmma_f32_16x16x16_{f16,bf16}, the RDNA4 ISA / AMD's matrix
//   instruction calculator for RDNA4's forms of the same instructions and
//   v_wmma_f32_16x16x16_{fp8,bf8}_{fp8,bf8} (fp8 = OCP e4m3, bf8 = OCP
//   e5m2). The 8-bit integer forms: "Matrix
//   Fragments for mma.m16n8k32" (.s8), v_mfma_i32_16x16x16i8 (CDNA2),
//   v_mfma_i32_16x16x32_i8 (CDNA3), v_wmma_i32_16x16x16_iu8 (RDNA3); four
//   8-bit elements per 32-bit register, the lowest k in the low byte.
//   The fp8 forms: "Matrix Fragments for mma.m16n8k32" (.e4m3/.e5m2, the
//   .s8 places), v_mfma_f32_16x16x32_{fp8,bf8}_{fp8,bf8} (CDNA3, the
//   16x16x32_i8 places; fp8 = e4m3fnuz, bf8 = e5m2fnuz; the same places on
//   CDNA4, gfx950, reading the OCP e4m3 / e5m2), and CDNA4's
//   v_mfma_f32_{16x16x128,32x32x64}_f8f6f4 with fp8/bf8 operands (AMD's
//   CDNA4 matrix-core examples: 32 codes per lane, two runs of 16 along K
//   half the instruction's K apart; see mfmaF8).
// Each instruction gathers the whole A, B, C matrices from the lanes,
// computes D = A B + C, and scatters D back. Products of two f16 or bf16
// values are exact in f32 (at most 22 significant bits); they are summed in
// k order in f32, starting from C. fp8 codes are decoded exactly
// (support/Fp8.h, the codec every Tessera backend uses); the products of
// two fp8 values are exact in f32 (at most 8 significant bits, exponents
// from 2^-32 to 2^31) and are summed the same way: IEEE f32 additions,
// round to nearest even, in k order from C. That is a model, not the
// hardware's adder: NVIDIA and AMD do not specify the order or the
// internal precision of an fp8 MMA's sum (Hopper's fp8 tensor cores are
// reported to keep fewer than f32's 24 bits inside one instruction), so a
// device's result may differ from the emulator's in the rounding of the
// sums (Tessera's fp8 GEMM tests compare against a tolerance relative to
// the sum of |products|, not bit for bit). On AMD the measurements of
// CDNA3's matrix cores (MMA-Sim, arXiv:2511.10909) find the products of
// one instruction summed in a wider fixed-point adder, normalised and
// rounded once, with a rounding that is not IEEE round to nearest; CDNA4's
// adder is not published. The model here is the one above (f32 additions
// in k order), for the FNUZ and the OCP forms and the f8f6f4 ones alike: a
// gfx950 device may differ in the last bits of a sum, never in which
// products are summed. NaN and infinity inputs propagate as in IEEE
// arithmetic (OCP e4m3 has no infinity, its NaN is S.1111.111; e5m2 has
// both).
// Integer forms are exact: the products and their sum are computed in 64
// bits, then added to C mod 2^32 (the instructions neither saturate nor
// clamp here).
#include "Matrix.h"

#include <cmath>
#include <cstring>
#include <optional>
#include <vector>

#include "tessera/runtime/Emulator.h"
#include "tessera/support/Fp8.h"
#include "tessera/support/MxFormats.h"

namespace tessera::emu::detail {

float halfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h >> 15) << 31;
  const uint32_t exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  float f;
  if (exp == 0) {
    f = std::ldexp(static_cast<float>(man), -24);  // zero or subnormal
    return sign ? -f : f;
  }
  uint32_t bits = exp == 31 ? (sign | 0x7f800000u | (man << 13)) : (sign | ((exp + 112) << 23) | (man << 13));
  std::memcpy(&f, &bits, 4);
  return f;
}

float bf16ToFloat(uint16_t h) {
  uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

namespace {

// Element e of a lane's packed 16-bit register array (low half first).
uint16_t elem(const uint32_t* regs, int e) {
  uint32_t w = regs[e / 2];
  return static_cast<uint16_t>(e % 2 ? w >> 16 : w & 0xffff);
}

struct Mat {
  int rows, cols;
  std::vector<float> v;
  Mat(int r, int c) : rows(r), cols(c), v(static_cast<size_t>(r * c), 0.0f) {}
  float& at(int r, int c) { return v[static_cast<size_t>(r * cols + c)]; }
};

// Byte e of a lane's packed 8-bit register array (lowest byte first), as a
// signed or unsigned value.
int32_t byteElem(const uint32_t* regs, int e, bool isSigned) {
  const auto u = static_cast<uint8_t>(regs[e / 4] >> (8 * (e % 4)));
  return isSigned ? static_cast<int32_t>(static_cast<int8_t>(u)) : static_cast<int32_t>(u);
}

struct IMat {
  int rows, cols;
  std::vector<int64_t> v;
  IMat(int r, int c) : rows(r), cols(c), v(static_cast<size_t>(r * c), 0) {}
  int64_t& at(int r, int c) { return v[static_cast<size_t>(r * cols + c)]; }
};

// The i32 accumulators travel in the hooks' float registers: their bits.
uint32_t accBits(const float* regs, int r) {
  uint32_t u;
  std::memcpy(&u, regs + r, 4);
  return u;
}
void setAccBits(float* regs, int r, uint32_t u) { std::memcpy(regs + r, &u, 4); }

// D = A B + C mod 2^32 (C holds the accumulator bits).
IMat iproduct(IMat& a, IMat& b, IMat& c) {
  IMat d(c.rows, c.cols);
  for (int i = 0; i < c.rows; ++i)
    for (int j = 0; j < c.cols; ++j) {
      int64_t s = 0;
      for (int k = 0; k < a.cols; ++k) s += a.at(i, k) * b.at(k, j);
      d.at(i, j) = static_cast<uint32_t>(static_cast<uint64_t>(c.at(i, j)) + static_cast<uint64_t>(s));
    }
  return d;
}

Mat product(Mat& a, Mat& b, Mat& c) {
  Mat d(c.rows, c.cols);
  for (int i = 0; i < c.rows; ++i)
    for (int j = 0; j < c.cols; ++j) {
      float s = c.at(i, j);
      for (int k = 0; k < a.cols; ++k) s += a.at(i, k) * b.at(k, j);
      d.at(i, j) = s;
    }
  return d;
}

// The fp8 formats of an mma.sync / MFMA fp8 mode's A and B.
struct Fp8Pair {
  DType a, b;
};
std::optional<Fp8Pair> mmaFp8(int32_t mode) {
  switch (mode) {
    case TESSERA_EMU_MMA_M16N8K32_E4M3_E4M3: return Fp8Pair{DType::F8E4M3, DType::F8E4M3};
    case TESSERA_EMU_MMA_M16N8K32_E4M3_E5M2: return Fp8Pair{DType::F8E4M3, DType::F8E5M2};
    case TESSERA_EMU_MMA_M16N8K32_E5M2_E4M3: return Fp8Pair{DType::F8E5M2, DType::F8E4M3};
    case TESSERA_EMU_MMA_M16N8K32_E5M2_E5M2: return Fp8Pair{DType::F8E5M2, DType::F8E5M2};
    default: return std::nullopt;
  }
}

// MFMA: fp8 = e4m3fnuz, bf8 = e5m2fnuz (gfx942), the instruction's A first.
std::optional<Fp8Pair> mfmaFp8(int32_t mode) {
  switch (mode) {
    case TESSERA_EMU_MFMA_16X16X32_FP8_FP8: return Fp8Pair{DType::F8E4M3FNUZ, DType::F8E4M3FNUZ};
    case TESSERA_EMU_MFMA_16X16X32_FP8_BF8: return Fp8Pair{DType::F8E4M3FNUZ, DType::F8E5M2FNUZ};
    case TESSERA_EMU_MFMA_16X16X32_BF8_FP8: return Fp8Pair{DType::F8E5M2FNUZ, DType::F8E4M3FNUZ};
    case TESSERA_EMU_MFMA_16X16X32_BF8_BF8: return Fp8Pair{DType::F8E5M2FNUZ, DType::F8E5M2FNUZ};
    default: return std::nullopt;
  }
}

// Byte e of a lane's packed 8-bit register array, decoded as fp8 `t`.
float fp8Elem(const uint32_t* regs, int e, DType t) {
  return fp8Decode(t, static_cast<uint8_t>(regs[e / 4] >> (8 * (e % 4))));
}

}  // namespace

bool mmaSync(int32_t mode, const LaneFrag* lanes) {
  if (mode & TESSERA_EMU_MMA_BLOCK_SCALE) {
    // The block-scaled form: D = (A x scale_A) (B x scale_B) + C, one e8m0
    // scale per row of A and column of B for all 32 k (.scale_vec::1X). Per
    // the PTX ISA's "Block Scaling for mma.sync": byte byte-id of
    // scale-a-data of lane 4 (m % 8) + 2 thread-id-a + m / 8 scales A's row
    // m, byte byte-id-b of scale-b-data of lane 4n + thread-id-b B's column n.
    // Each element a byte (EmuAbi.h): fp8 whole, fp6 the low six bits, fp4
    // bits 2-5.
    auto elem = [](int fmt, uint8_t c) -> float {
      switch (fmt) {
        case TESSERA_EMU_MXF_E4M3: return fp8Decode(DType::F8E4M3, c);
        case TESSERA_EMU_MXF_E5M2: return fp8Decode(DType::F8E5M2, c);
        case TESSERA_EMU_MXF_E2M3: return mxElementDecode(DType::F6E2M3, c & 0x3F);
        case TESSERA_EMU_MXF_E3M2: return mxElementDecode(DType::F6E3M2, c & 0x3F);
        default: return mxElementDecode(DType::F4E2M1, c >> 2 & 0xF);
      }
    };
    const int fa = mode >> 16 & 7, fb = mode >> 19 & 7;
    auto byteOf = [](const uint32_t* regs, int e) { return static_cast<uint8_t>(regs[e / 4] >> (8 * (e % 4))); };
    const int ba = mode >> 8 & 3, ta = mode >> 10 & 3, bb = mode >> 12 & 3, tb = mode >> 14 & 3;
    auto e8m0 = [](uint32_t reg, int byte) {
      const unsigned c = reg >> (8 * byte) & 0xFF;
      return c == 255 ? std::nan("") : std::ldexp(1.0, static_cast<int>(c) - 127);
    };
    // UE4M3 (NVFP4's scales): e4m3 without a sign; the PTX ISA gives no
    // meaning to a code with bit 7 set, which Tessera never passes (its
    // compiler clears the bit): NaN here, so that a path that did not
    // would show.
    auto ue4m3 = [](uint32_t reg, int byte) {
      const unsigned c = reg >> (8 * byte) & 0xFF;
      return c & 0x80 ? std::nan("") : static_cast<double>(fp8Decode(DType::F8E4M3, static_cast<uint8_t>(c)));
    };
    // With TESSERA_EMU_MMA_MXF4_K64 (m16n8k64 kind::mxf4, scale_vec::2X)
    // the byte places are the same, each byte two e2m1 codes (k 2j in the
    // low nibble, 2j + 1 in the high), and row m's k 32h..32h+31 is scaled
    // by byte byte-id + h; with TESSERA_EMU_MMA_NVF4_K64 (kind::mxf4nvf4,
    // scale_vec::4X) k 16h..16h+15 by UE4M3 byte h (byte-id 0).
    const bool nvf4 = mode & TESSERA_EMU_MMA_NVF4_K64;
    const int per = mode & (TESSERA_EMU_MMA_MXF4_K64 | TESSERA_EMU_MMA_NVF4_K64) ? 2 : 1, K = 32 * per;
    const int nb = nvf4 ? 4 : per, blk = K / nb;  // scales per row, elements per scale
    auto scale = [&](uint32_t reg, int byte) { return nvf4 ? ue4m3(reg, byte) : e8m0(reg, byte); };
    std::vector<double> sa(size_t(16 * nb)), sb(size_t(8 * nb));
    for (int h = 0; h < nb; ++h) {
      for (int m = 0; m < 16; ++m) sa[size_t(m * nb + h)] = scale(lanes[4 * (m % 8) + 2 * ta + m / 8].a[4], ba + h);
      for (int n = 0; n < 8; ++n) sb[size_t(n * nb + h)] = scale(lanes[4 * n + tb].b[2], bb + h);
    }
    auto code = [&](int fmt, uint8_t c, int s) -> float {
      return per == 2 ? mxElementDecode(DType::F4E2M1, c >> (4 * s) & 0xF) : elem(fmt, c);
    };
    Mat A(16, K), B(K, 8), C(16, 8);
    for (int l = 0; l < 32; ++l) {
      const int g = l / 4, t = l % 4;
      for (int i = 0; i < 16; ++i)
        for (int s = 0; s < per; ++s)
          A.at(g + 8 * (i / 4 % 2), per * (4 * t + i % 4 + 16 * (i / 8)) + s) = code(fa, byteOf(lanes[l].a, i), s);
      for (int i = 0; i < 8; ++i)
        for (int s = 0; s < per; ++s)
          B.at(per * (4 * t + i % 4 + 16 * (i / 4)) + s, g) = code(fb, byteOf(lanes[l].b, i), s);
      for (int i = 0; i < 4; ++i) C.at(g + 8 * (i / 2), 2 * t + i % 2) = lanes[l].c[i];
    }
    // Each product of two elements is exact in double, and so is its
    // scaling by two powers of two (within double's range), or by two
    // e4m3 values (4 significant bits each).
    for (int l = 0; l < 32; ++l) {
      const int g = l / 4, t = l % 4;
      for (int i = 0; i < 4; ++i) {
        const int r = g + 8 * (i / 2), col = 2 * t + i % 2;
        double s = 0;
        for (int k = 0; k < K; ++k)
          s += static_cast<double>(A.at(r, k)) * B.at(k, col) * sa[size_t(r * nb + k / blk)] *
               sb[size_t(col * nb + k / blk)];
        lanes[l].d[i] = static_cast<float>(C.at(r, col) + s);
      }
    }
    return true;
  }
  if (std::optional<Fp8Pair> f8 = mmaFp8(mode)) {
    // The .s8 places (below), fp8 codes, an f32 C/D.
    Mat A(16, 32), B(32, 8), C(16, 8);
    for (int l = 0; l < 32; ++l) {
      const int g = l / 4, t = l % 4;
      for (int i = 0; i < 16; ++i)
        A.at(g + 8 * (i / 4 % 2), 4 * t + i % 4 + 16 * (i / 8)) = fp8Elem(lanes[l].a, i, f8->a);
      for (int i = 0; i < 8; ++i) B.at(4 * t + i % 4 + 16 * (i / 4), g) = fp8Elem(lanes[l].b, i, f8->b);
      for (int i = 0; i < 4; ++i) C.at(g + 8 * (i / 2), 2 * t + i % 2) = lanes[l].c[i];
    }
    Mat D = product(A, B, C);
    for (int l = 0; l < 32; ++l) {
      const int g = l / 4, t = l % 4;
      for (int i = 0; i < 4; ++i) lanes[l].d[i] = D.at(g + 8 * (i / 2), 2 * t + i % 2);
    }
    return true;
  }
  if (mode == TESSERA_EMU_MMA_M16N8K32_S8) {
    // A 16x32: register q byte e of lane 4g + t is (g + 8 (q % 2), 4t + e +
    // 16 (q / 2)); B 32x8: register q byte e is (4t + e + 16 q, g).
    IMat A(16, 32), B(32, 8), C(16, 8);
    for (int l = 0; l < 32; ++l) {
      const int g = l / 4, t = l % 4;
      for (int i = 0; i < 16; ++i)
        A.at(g + 8 * (i / 4 % 2), 4 * t + i % 4 + 16 * (i / 8)) = byteElem(lanes[l].a, i, true);
      for (int i = 0; i < 8; ++i) B.at(4 * t + i % 4 + 16 * (i / 4), g) = byteElem(lanes[l].b, i, true);
      for (int i = 0; i < 4; ++i) C.at(g + 8 * (i / 2), 2 * t + i % 2) = accBits(lanes[l].c, i);
    }
    IMat D = iproduct(A, B, C);
    for (int l = 0; l < 32; ++l) {
      const int g = l / 4, t = l % 4;
      for (int i = 0; i < 4; ++i)
        setAccBits(lanes[l].d, i, static_cast<uint32_t>(D.at(g + 8 * (i / 2), 2 * t + i % 2)));
    }
    return true;
  }
  if (mode != TESSERA_EMU_MMA_M16N8K16_F16 && mode != TESSERA_EMU_MMA_M16N8K16_BF16) return false;
  auto cvt = mode == TESSERA_EMU_MMA_M16N8K16_F16 ? halfToFloat : bf16ToFloat;
  Mat A(16, 16), B(16, 8), C(16, 8);
  for (int l = 0; l < 32; ++l) {
    const int g = l / 4, t = l % 4;
    for (int i = 0; i < 8; ++i) A.at(g + 8 * (i / 2 % 2), 2 * t + i % 2 + 8 * (i / 4)) = cvt(elem(lanes[l].a, i));
    for (int i = 0; i < 4; ++i) B.at(2 * t + i % 2 + 8 * (i / 2), g) = cvt(elem(lanes[l].b, i));
    for (int i = 0; i < 4; ++i) C.at(g + 8 * (i / 2), 2 * t + i % 2) = lanes[l].c[i];
  }
  Mat D = product(A, B, C);
  for (int l = 0; l < 32; ++l) {
    const int g = l / 4, t = l % 4;
    for (int i = 0; i < 4; ++i) lanes[l].d[i] = D.at(g + 8 * (i / 2), 2 * t + i % 2);
  }
  return true;
}

void wgmma(bool bf16, int n, const LaneFrag* lanes, const uint16_t* b, const uint16_t* a) {
  // The products and sums of mma.m16n8k16 (16 k per instruction, in k
  // order from C): a wgmma equals N/8 mma.sync of the same rows.
  auto cvt = bf16 ? bf16ToFloat : halfToFloat;
  Mat A(16, 16), B(16, n), C(16, n);
  for (int l = 0; l < 32; ++l) {
    const int g = l / 4, t = l % 4;
    if (!a)
      for (int i = 0; i < 8; ++i) A.at(g + 8 * (i / 2 % 2), 2 * t + i % 2 + 8 * (i / 4)) = cvt(elem(lanes[l].a, i));
    for (int i = 0; i < n / 2; ++i) C.at(g + 8 * (i / 2 % 2), 8 * (i / 4) + 2 * t + i % 2) = lanes[l].c[i];
  }
  for (int k = 0; k < 16; ++k)
    for (int j = 0; j < n; ++j) B.at(k, j) = cvt(b[k * n + j]);
  if (a)
    for (int r = 0; r < 16; ++r)
      for (int k = 0; k < 16; ++k) A.at(r, k) = cvt(a[r * 16 + k]);
  Mat D = product(A, B, C);
  for (int l = 0; l < 32; ++l) {
    const int g = l / 4, t = l % 4;
    for (int i = 0; i < n / 2; ++i) lanes[l].d[i] = D.at(g + 8 * (i / 2 % 2), 8 * (i / 4) + 2 * t + i % 2);
  }
}

void wgmmaFp8(bool aE5m2, bool bE5m2, int n, const LaneFrag* lanes, const uint8_t* b) {
  // A warp's 16 rows are n / 8 mma.m16n8k32 of the same rows (the fp8
  // mma.sync's A places and sums, above).
  const DType at = aE5m2 ? DType::F8E5M2 : DType::F8E4M3, bt = bE5m2 ? DType::F8E5M2 : DType::F8E4M3;
  Mat A(16, 32), B(32, n), C(16, n);
  for (int l = 0; l < 32; ++l) {
    const int g = l / 4, t = l % 4;
    for (int i = 0; i < 16; ++i) A.at(g + 8 * (i / 4 % 2), 4 * t + i % 4 + 16 * (i / 8)) = fp8Elem(lanes[l].a, i, at);
    for (int i = 0; i < n / 2; ++i) C.at(g + 8 * (i / 2 % 2), 8 * (i / 4) + 2 * t + i % 2) = lanes[l].c[i];
  }
  for (int k = 0; k < 32; ++k)
    for (int j = 0; j < n; ++j) B.at(k, j) = fp8Decode(bt, b[k * n + j]);
  Mat D = product(A, B, C);
  for (int l = 0; l < 32; ++l) {
    const int g = l / 4, t = l % 4;
    for (int i = 0; i < n / 2; ++i) lanes[l].d[i] = D.at(g + 8 * (i / 2 % 2), 8 * (i / 4) + 2 * t + i % 2);
  }
}

namespace {

// gfx950's OCP fp8 16x16x32 form (TESSERA_EMU_MFMA_16X16X32_OCP_F8): lane
// l holds row l % 16 of A and column l % 16 of B, byte e k 8 (l / 16) + e;
// D as the f16 forms' (register r is row 4 (l / 16) + r).
bool mfmaOcpF8(int32_t mode, const LaneFrag* lanes) {
  if ((mode & ~(TESSERA_EMU_MFMA_A_BF8 | TESSERA_EMU_MFMA_B_BF8)) != TESSERA_EMU_MFMA_16X16X32_OCP_F8) return false;
  const DType ta = mode & TESSERA_EMU_MFMA_A_BF8 ? DType::F8E5M2 : DType::F8E4M3;
  const DType tb = mode & TESSERA_EMU_MFMA_B_BF8 ? DType::F8E5M2 : DType::F8E4M3;
  Mat A(16, 32), B(32, 16), C(16, 16);
  for (int l = 0; l < 64; ++l) {
    const int i = l % 16;
    for (int e = 0; e < 8; ++e) {
      A.at(i, 8 * (l / 16) + e) = fp8Elem(lanes[l].a, e, ta);
      B.at(8 * (l / 16) + e, i) = fp8Elem(lanes[l].b, e, tb);
    }
    for (int r = 0; r < 4; ++r) C.at(4 * (l / 16) + r, i) = lanes[l].c[r];
  }
  Mat D = product(A, B, C);
  for (int l = 0; l < 64; ++l)
    for (int r = 0; r < 4; ++r) lanes[l].d[r] = D.at(4 * (l / 16) + r, l % 16);
  return true;
}

// gfx950's f8f6f4 forms (EmuAbi.h): lane l holds row l % n of A and column
// l % n of B, D as the f16 forms' (16x16: register r is row 4 (l / 16) +
// r; 32x32: row 8 (r / 4) + 4 (l / 32) + r % 4). fp8 / bf8, 32 bytes a
// lane: byte e is k 16 (l / n) + e % 16 + (K / 2) (e / 16), so 16x16x128's
// lane group q holds k 16q.. and 64 + 16q.., 32x32x64's k 16q.. and 32 +
// 16q... fp4, 16 bytes a lane: element e (nibble e % 2 of byte e / 2) is k
// 32 (l / n) + e. Scaled: lane l's scale (byte op_sel of the word after its
// operand registers) is that of row (column) l % n for k 32 (l / n) ..
// 32 (l / n) + 31; the products, exact in double with the two powers of
// two, are summed in double and rounded once (as the block-scaled
// mma.sync). Unscaled fp8 sums in f32 in k order from C (product), as the
// other forms.
bool mfmaF8F6F4(int32_t mode, const LaneFrag* lanes) {
  if (!mfmaF8F6F4Known(mode)) return false;
  const int form = mode & 0x7F, fa = mode >> 16 & 7, fb = mode >> 19 & 7;
  const bool big = form == TESSERA_EMU_MFMA_32X32X64_F8F6F4, scaled = mode & TESSERA_EMU_MFMA_SCALED;
  const int n = big ? 32 : 16, K = 64 / n * 32, regs = big ? 16 : 4;
  auto kOf = [&](int fmt, int l, int e) {
    return fmt == TESSERA_EMU_MXF_E2M1 ? 32 * (l / n) + e : 16 * (l / n) + e % 16 + K / 2 * (e / 16);
  };
  auto elem = [](int fmt, const uint32_t* r, int e) -> float {
    if (fmt != TESSERA_EMU_MXF_E2M1) return fp8Elem(r, e, fmt == TESSERA_EMU_MXF_E5M2 ? DType::F8E5M2 : DType::F8E4M3);
    return mxElementDecode(DType::F4E2M1, r[e / 8] >> (4 * (e % 8)) & 0xF);
  };
  auto row = [&](int l, int r) { return big ? 8 * (r / 4) + 4 * (l / 32) + r % 4 : 4 * (l / 16) + r; };
  Mat A(n, K), B(K, n), C(n, n);
  std::vector<double> sa(size_t(n * K / 32), 1.0), sb(sa.size(), 1.0);  // [row][block]
  auto e8m0 = [](uint32_t word, int byte) {
    const unsigned c = word >> (8 * byte) & 0xFF;
    return c == 255 ? std::nan("") : std::ldexp(1.0, static_cast<int>(c) - 127);
  };
  const int wa = fa == TESSERA_EMU_MXF_E2M1 ? 4 : 8, wb = fb == TESSERA_EMU_MXF_E2M1 ? 4 : 8;
  for (int l = 0; l < 64; ++l) {
    const int i = l % n;
    for (int e = 0; e < 32; ++e) {
      A.at(i, kOf(fa, l, e)) = elem(fa, lanes[l].a, e);
      B.at(kOf(fb, l, e), i) = elem(fb, lanes[l].b, e);
    }
    for (int r = 0; r < regs; ++r) C.at(row(l, r), i) = lanes[l].c[r];
    if (scaled) {
      sa[size_t(i * K / 32 + l / n)] = e8m0(lanes[l].a[wa], mode >> 8 & 3);
      sb[size_t(i * K / 32 + l / n)] = e8m0(lanes[l].b[wb], mode >> 10 & 3);
    }
  }
  if (!scaled && fa != TESSERA_EMU_MXF_E2M1 && fb != TESSERA_EMU_MXF_E2M1) {
    Mat D = product(A, B, C);
    for (int l = 0; l < 64; ++l)
      for (int r = 0; r < regs; ++r) lanes[l].d[r] = D.at(row(l, r), l % n);
    return true;
  }
  for (int l = 0; l < 64; ++l)
    for (int r = 0; r < regs; ++r) {
      const int i = row(l, r), j = l % n;
      double s = 0;
      for (int k = 0; k < K; ++k)
        s += static_cast<double>(A.at(i, k)) * B.at(k, j) * sa[size_t(i * K / 32 + k / 32)] *
             sb[size_t(j * K / 32 + k / 32)];
      lanes[l].d[r] = static_cast<float>(C.at(i, j) + s);
    }
  return true;
}

}  // namespace

bool mfmaF8F6F4Known(int32_t mode) {
  const int form = mode & 0x7F, fa = mode >> 16 & 7, fb = mode >> 19 & 7;
  auto fmt = [](int f) { return f == TESSERA_EMU_MXF_E4M3 || f == TESSERA_EMU_MXF_E5M2 || f == TESSERA_EMU_MXF_E2M1; };
  const int32_t rest = mode & ~(0x7F | TESSERA_EMU_MFMA_SCALED | 0xF00 | 0x3F0000);
  return mode >= 0 && (form == TESSERA_EMU_MFMA_16X16X128_F8F6F4 || form == TESSERA_EMU_MFMA_32X32X64_F8F6F4) &&
         fmt(fa) && fmt(fb) && rest == 0 && ((mode & TESSERA_EMU_MFMA_SCALED) || (mode & 0xF00) == 0);
}

bool mfma(int32_t mode, const LaneFrag* lanes) {
  if (mfmaOcpF8(mode, lanes) || mfmaF8F6F4(mode, lanes)) return true;
  if (std::optional<Fp8Pair> f8 = mfmaFp8(mode)) {
    // The 16x16x32_i8 places (below), fp8/bf8 codes, an f32 C/D.
    Mat A(16, 32), B(32, 16), C(16, 16);
    for (int l = 0; l < 64; ++l) {
      const int i = l % 16, kb = 8 * (l / 16);
      for (int e = 0; e < 8; ++e) {
        A.at(i, kb + e) = fp8Elem(lanes[l].a, e, f8->a);
        B.at(kb + e, i) = fp8Elem(lanes[l].b, e, f8->b);
      }
      for (int r = 0; r < 4; ++r) C.at(4 * (l / 16) + r, i) = lanes[l].c[r];
    }
    Mat D = product(A, B, C);
    for (int l = 0; l < 64; ++l)
      for (int r = 0; r < 4; ++r) lanes[l].d[r] = D.at(4 * (l / 16) + r, l % 16);
    return true;
  }
  if (mode == TESSERA_EMU_MFMA_16X16X16_I8 || mode == TESSERA_EMU_MFMA_16X16X32_I8) {
    // Lane l holds A(l % 16, kb + e) and B(kb + e, l % 16), e < kw, kb =
    // kw (l / 16); D register r is row 4 (l / 16) + r, column l % 16.
    const int kw = mode == TESSERA_EMU_MFMA_16X16X16_I8 ? 4 : 8;
    IMat A(16, 4 * kw), B(4 * kw, 16), C(16, 16);
    for (int l = 0; l < 64; ++l) {
      const int i = l % 16, kb = kw * (l / 16);
      for (int e = 0; e < kw; ++e) {
        A.at(i, kb + e) = byteElem(lanes[l].a, e, true);
        B.at(kb + e, i) = byteElem(lanes[l].b, e, true);
      }
      for (int r = 0; r < 4; ++r) C.at(4 * (l / 16) + r, i) = accBits(lanes[l].c, r);
    }
    IMat D = iproduct(A, B, C);
    for (int l = 0; l < 64; ++l)
      for (int r = 0; r < 4; ++r) setAccBits(lanes[l].d, r, static_cast<uint32_t>(D.at(4 * (l / 16) + r, l % 16)));
    return true;
  }
  const bool cdna4 = mode >= TESSERA_EMU_MFMA_32X32X16_F16 && mode <= TESSERA_EMU_MFMA_16X16X32_BF16;
  if (!cdna4 && (mode < TESSERA_EMU_MFMA_32X32X8_F16 || mode > TESSERA_EMU_MFMA_16X16X16_BF16)) return false;
  auto cvt = mode % 2 == 0 ? halfToFloat : bf16ToFloat;
  // 32x32x8: lane = i + 32 * (k / 4); D register r of lane l is row
  // 8 (r / 4) + 4 (l / 32) + r % 4, column l % 32.
  // 16x16x16: lane = i + 16 * (k / 4); D register r is row 4 (l / 16) + r.
  // The CDNA4 forms (32x32x16, 16x16x32) hold 8 k per lane instead of 4
  // (lane = i + n * (k / 8)); their D is as their K-halved siblings'.
  const bool big = cdna4 ? mode < TESSERA_EMU_MFMA_16X16X32_F16 : mode < TESSERA_EMU_MFMA_16X16X16_F16;
  const int kw = cdna4 ? 8 : 4;  // k per lane
  const int n = big ? 32 : 16, K = 64 / n * kw, regs = big ? 16 : 4;
  Mat A(n, K), B(K, n), C(n, n);
  auto row = [&](int l, int r) { return big ? 8 * (r / 4) + 4 * (l / 32) + r % 4 : 4 * (l / 16) + r; };
  for (int l = 0; l < 64; ++l) {
    const int i = l % n, kb = kw * (l / n);
    for (int e = 0; e < kw; ++e) {
      A.at(i, kb + e) = cvt(elem(lanes[l].a, e));
      B.at(kb + e, i) = cvt(elem(lanes[l].b, e));
    }
    for (int r = 0; r < regs; ++r) C.at(row(l, r), i) = lanes[l].c[r];
  }
  Mat D = product(A, B, C);
  for (int l = 0; l < 64; ++l)
    for (int r = 0; r < regs; ++r) lanes[l].d[r] = D.at(row(l, r), l % n);
  return true;
}

namespace {

// WMMA: fp8 = e4m3, bf8 = e5m2 (OCP, RDNA4), the instruction's A first.
std::optional<Fp8Pair> wmmaFp8(int32_t base) {
  switch (base) {
    case TESSERA_EMU_WMMA_16X16X16_FP8_FP8: return Fp8Pair{DType::F8E4M3, DType::F8E4M3};
    case TESSERA_EMU_WMMA_16X16X16_FP8_BF8: return Fp8Pair{DType::F8E4M3, DType::F8E5M2};
    case TESSERA_EMU_WMMA_16X16X16_BF8_FP8: return Fp8Pair{DType::F8E5M2, DType::F8E4M3};
    case TESSERA_EMU_WMMA_16X16X16_BF8_BF8: return Fp8Pair{DType::F8E5M2, DType::F8E5M2};
    default: return std::nullopt;
  }
}

// RDNA4 (gfx1200, gfx1201), i = lane % 16, h = lane / 16: element e of a
// 16-bit operand is k 8 (e / 4) + 4h + e % 4 of row i of A (column i of
// B), byte e of an 8-bit operand k 8h + e; D register r is (row r + 8h,
// column i). Every lane holds its own operands (no copies across the
// half-waves).
int gfx12Kf16(int l, int e) { return 8 * (e / 4) + 4 * (l / 16) + e % 4; }
int gfx12K8(int l, int e) { return 8 * (l / 16) + e; }
int gfx12Row(int l, int r) { return r + 8 * (l / 16); }

bool wmmaGfx12(int32_t base, bool sa, bool sb, const LaneFrag* lanes) {
  if (base == TESSERA_EMU_WMMA_16X16X16_IU8) {
    IMat A(16, 16), B(16, 16), C(16, 16);
    for (int l = 0; l < 32; ++l) {
      for (int e = 0; e < 8; ++e) {
        A.at(l % 16, gfx12K8(l, e)) = byteElem(lanes[l].a, e, sa);
        B.at(gfx12K8(l, e), l % 16) = byteElem(lanes[l].b, e, sb);
      }
      for (int r = 0; r < 8; ++r) C.at(gfx12Row(l, r), l % 16) = accBits(lanes[l].c, r);
    }
    IMat D = iproduct(A, B, C);
    for (int l = 0; l < 32; ++l)
      for (int r = 0; r < 8; ++r) setAccBits(lanes[l].d, r, static_cast<uint32_t>(D.at(gfx12Row(l, r), l % 16)));
    return true;
  }
  std::optional<Fp8Pair> f8 = wmmaFp8(base);
  if (!f8 && base != TESSERA_EMU_WMMA_16X16X16_F16 && base != TESSERA_EMU_WMMA_16X16X16_BF16) return false;
  auto cvt = base == TESSERA_EMU_WMMA_16X16X16_F16 ? halfToFloat : bf16ToFloat;
  Mat A(16, 16), B(16, 16), C(16, 16);
  for (int l = 0; l < 32; ++l) {
    for (int e = 0; e < 8; ++e) {
      if (f8) {
        A.at(l % 16, gfx12K8(l, e)) = fp8Elem(lanes[l].a, e, f8->a);
        B.at(gfx12K8(l, e), l % 16) = fp8Elem(lanes[l].b, e, f8->b);
      } else {
        A.at(l % 16, gfx12Kf16(l, e)) = cvt(elem(lanes[l].a, e));
        B.at(gfx12Kf16(l, e), l % 16) = cvt(elem(lanes[l].b, e));
      }
    }
    for (int r = 0; r < 8; ++r) C.at(gfx12Row(l, r), l % 16) = lanes[l].c[r];
  }
  Mat D = product(A, B, C);
  for (int l = 0; l < 32; ++l)
    for (int r = 0; r < 8; ++r) lanes[l].d[r] = D.at(gfx12Row(l, r), l % 16);
  return true;
}

}  // namespace

bool wmmaKnown(int32_t mode) {
  const int32_t base = mode & ~(TESSERA_EMU_WMMA_A_SIGNED | TESSERA_EMU_WMMA_B_SIGNED | TESSERA_EMU_WMMA_GFX12);
  const bool signs = (mode & (TESSERA_EMU_WMMA_A_SIGNED | TESSERA_EMU_WMMA_B_SIGNED)) != 0;
  if (signs && base != TESSERA_EMU_WMMA_16X16X16_IU8) return false;
  if (wmmaFp8(base)) return (mode & TESSERA_EMU_WMMA_GFX12) != 0;  // RDNA4 instructions
  return base == TESSERA_EMU_WMMA_16X16X16_F16 || base == TESSERA_EMU_WMMA_16X16X16_BF16 ||
         base == TESSERA_EMU_WMMA_16X16X16_IU8;
}

bool wmma(int32_t mode, const LaneFrag* lanes) {
  if (!wmmaKnown(mode)) return false;
  if (mode & TESSERA_EMU_WMMA_GFX12)
    return wmmaGfx12(mode & ~(TESSERA_EMU_WMMA_A_SIGNED | TESSERA_EMU_WMMA_B_SIGNED | TESSERA_EMU_WMMA_GFX12),
                     (mode & TESSERA_EMU_WMMA_A_SIGNED) != 0, (mode & TESSERA_EMU_WMMA_B_SIGNED) != 0, lanes);
  if ((mode & ~(TESSERA_EMU_WMMA_A_SIGNED | TESSERA_EMU_WMMA_B_SIGNED)) == TESSERA_EMU_WMMA_16X16X16_IU8) {
    // Lane i < 16 holds row i of A and column i of B, 16 bytes each; D as
    // the f32 form's.
    const bool sa = (mode & TESSERA_EMU_WMMA_A_SIGNED) != 0, sb = (mode & TESSERA_EMU_WMMA_B_SIGNED) != 0;
    IMat A(16, 16), B(16, 16), C(16, 16);
    for (int l = 0; l < 16; ++l)
      for (int e = 0; e < 16; ++e) {
        A.at(l, e) = byteElem(lanes[l].a, e, sa);
        B.at(e, l) = byteElem(lanes[l].b, e, sb);
      }
    for (int l = 0; l < 32; ++l)
      for (int r = 0; r < 8; ++r) C.at(2 * r + l / 16, l % 16) = accBits(lanes[l].c, r);
    IMat D = iproduct(A, B, C);
    for (int l = 0; l < 32; ++l)
      for (int r = 0; r < 8; ++r) setAccBits(lanes[l].d, r, static_cast<uint32_t>(D.at(2 * r + l / 16, l % 16)));
    return true;
  }
  if (mode != TESSERA_EMU_WMMA_16X16X16_F16 && mode != TESSERA_EMU_WMMA_16X16X16_BF16) return false;
  auto cvt = mode == TESSERA_EMU_WMMA_16X16X16_F16 ? halfToFloat : bf16ToFloat;
  Mat A(16, 16), B(16, 16), C(16, 16);
  for (int l = 0; l < 16; ++l)
    for (int e = 0; e < 16; ++e) {
      A.at(l, e) = cvt(elem(lanes[l].a, e));
      B.at(e, l) = cvt(elem(lanes[l].b, e));
    }
  for (int l = 0; l < 32; ++l)
    for (int r = 0; r < 8; ++r) C.at(2 * r + l / 16, l % 16) = lanes[l].c[r];
  Mat D = product(A, B, C);
  for (int l = 0; l < 32; ++l)
    for (int r = 0; r < 8; ++r) lanes[l].d[r] = D.at(2 * r + l / 16, l % 16);
  return true;
}

void ldmatrix(int count, bool trans, const unsigned char* const* rows, uint32_t* const* out) {
  auto load16 = [](const unsigned char* p) {
    uint16_t v;
    std::memcpy(&v, p, 2);
    return static_cast<uint32_t>(v);
  };
  for (int l = 0; l < 32; ++l)
    for (int j = 0; j < count; ++j) {
      uint32_t lo, hi;
      if (!trans) {
        const unsigned char* r = rows[8 * j + l / 4];
        lo = load16(r + 2 * (2 * (l % 4)));
        hi = load16(r + 2 * (2 * (l % 4) + 1));
      } else {
        lo = load16(rows[8 * j + 2 * (l % 4)] + 2 * (l / 4));
        hi = load16(rows[8 * j + 2 * (l % 4) + 1] + 2 * (l / 4));
      }
      out[l][j] = lo | hi << 16;
    }
}

}  // namespace tessera::emu::detail
