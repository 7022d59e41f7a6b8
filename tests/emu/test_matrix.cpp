// The warp-wide matrix instructions of the SIMT machine (mma.sync m16n8k16
// and m16n8k32 s8/e4m3/e5m2, ldmatrix, AMD MFMA and WMMA) against an independent model of the vendor
// fragment layouts. The model here goes the other way round from the
// machine: for every matrix element it names the lane and register element
// holding it (the "owner"), written from the layout tables of the PTX ISA
// and AMD's matrix instruction documentation.
#include <array>
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <tuple>
#include <vector>

#include "tessera/runtime/Emulator.h"
#include "tessera/support/Fp8.h"
#include "tessera/support/MxFormats.h"

using namespace tessera::emu;

namespace {

struct Owner {
  int lane, idx;  // idx: 16-bit element (A, B) or 32-bit register (C, D)
};

// ---- NVIDIA mma.m16n8k16 (PTX ISA fragment figures) ---------------------------
// A 16x16 (row, k): "groupID" rows, a0..a7 cover (g | g+8) x (2t.. | 2t+8..).
Owner nvA(int r, int k) { return {(r % 8) * 4 + (k % 8) / 2, k % 2 + 2 * (r / 8) + 4 * (k / 8)}; }
// B 16x8 (k, col): col = groupID, b0,b1 rows 2t,2t+1; b2,b3 rows +8.
Owner nvB(int k, int n) { return {n * 4 + (k % 8) / 2, k % 2 + 2 * (k / 8)}; }
// C/D 16x8: c0,c1 row g cols 2t,2t+1; c2,c3 row g+8.
Owner nvC(int r, int c) { return {(r % 8) * 4 + c / 2, c % 2 + 2 * (r / 8)}; }

// ---- AMD MFMA (matrix instruction calculator) -----------------------------------
Owner mfma32A(int r, int k) { return {r + 32 * (k / 4), k % 4}; }
Owner mfma32B(int k, int n) { return {n + 32 * (k / 4), k % 4}; }
Owner mfma32D(int r, int c) { return {c + 32 * ((r / 4) % 2), 4 * (r / 8) + r % 4}; }
Owner mfma16A(int r, int k) { return {r + 16 * (k / 4), k % 4}; }
Owner mfma16B(int k, int n) { return {n + 16 * (k / 4), k % 4}; }
Owner mfma16D(int r, int c) { return {c + 16 * (r / 4), r % 4}; }
// CDNA4's 32x32x16 and 16x16x32 f16/bf16: 8 k per lane; D as above.
Owner mfma32x16A(int r, int k) { return {r + 32 * (k / 8), k % 8}; }
Owner mfma32x16B(int k, int n) { return {n + 32 * (k / 8), k % 8}; }
Owner mfma16x32A(int r, int k) { return {r + 16 * (k / 8), k % 8}; }
Owner mfma16x32B(int k, int n) { return {n + 16 * (k / 8), k % 8}; }
// ---- AMD WMMA (RDNA3 ISA, wave32): A/B replicated in lanes 16-31 -------------
Owner wmmaA(int r, int k) { return {r, k}; }
Owner wmmaB(int k, int n) { return {n, k}; }
Owner wmmaD(int r, int c) { return {c + 16 * (r % 2), r / 2}; }
// ---- AMD WMMA on RDNA4 (matrix instruction calculator, gfx1200/gfx1201):
// no replication, lanes 16-31 hold the other half of K. 16-bit operands:
// lane half h = k / 4 % 2, element 4 (k / 8) + k % 4; 8-bit operands
// (iu8, fp8/bf8): h = k / 8, byte k % 8. D register r of lane c + 16 h is
// row r + 8h.
Owner wmma12A(int r, int k) { return {r + 16 * (k / 4 % 2), 4 * (k / 8) + k % 4}; }
Owner wmma12B(int k, int n) { return {n + 16 * (k / 4 % 2), 4 * (k / 8) + k % 4}; }
Owner wmma12i8A(int r, int k) { return {r + 16 * (k / 8), k % 8}; }
Owner wmma12i8B(int k, int n) { return {n + 16 * (k / 8), k % 8}; }
Owner wmma12D(int r, int c) { return {c + 16 * (r / 8), r % 8}; }

uint16_t toHalf(float f) {  // exact for the small values used here
  if (f == 0) return std::signbit(f) ? 0x8000 : 0;
  uint32_t sign = f < 0 ? 0x8000 : 0;
  float a = std::fabs(f);
  int e;
  float m = std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1)
  uint32_t exp = static_cast<uint32_t>(e - 1 + 15);
  uint32_t man = static_cast<uint32_t>(std::lround((m * 2 - 1) * 1024));
  REQUIRE(exp > 0);
  REQUIRE(exp < 31);
  return static_cast<uint16_t>(sign | exp << 10 | man);
}
uint16_t toBf16(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  REQUIRE((b & 0xffff) == 0);  // exactly representable
  return static_cast<uint16_t>(b >> 16);
}

struct Regs {
  std::vector<std::vector<uint32_t>> a, b;
  std::vector<std::vector<float>> c, d;
};

void setHalf(std::vector<uint32_t>& regs, int idx, uint16_t v) {
  uint32_t& w = regs[idx / 2];
  w = idx % 2 ? (w & 0xffff) | uint32_t(v) << 16 : (w & 0xffff0000u) | v;
}

/// Runs one matrix instruction (`hook` with `mode`) on `warps` warps of
/// `warp` lanes, each lane's registers from `r`: the first warp's results
/// go to r.d (the others compute independently, beside it).
void runWave(Regs& r, Vendor vendor, int warp, int warps, int mode,
             void (*hook)(int32_t, const uint32_t*, const uint32_t*, const float*, float*), const char* name) {
  struct P {
    Regs* r;
    int mode;
    void (*hook)(int32_t, const uint32_t*, const uint32_t*, const float*, float*);
  } p{&r, mode, hook};
  void* args[] = {&p};
  LaunchConfig cfg;
  cfg.vendor = vendor;
  cfg.warpSize = static_cast<unsigned>(warp);
  cfg.block[0] = static_cast<uint32_t>(warp * warps);
  cfg.kernelName = name;
  launch(
      +[](void* const* a) {
        P& p = *static_cast<P*>(a[0]);
        int lane = tessera_emu_lane_id();
        // Copies on this thread's stack, as a compiled kernel's registers.
        uint32_t ra[16], rb[16];
        float rc[16], rd[16];
        std::memcpy(ra, p.r->a[lane].data(), sizeof ra);
        std::memcpy(rb, p.r->b[lane].data(), sizeof rb);
        std::memcpy(rc, p.r->c[lane].data(), sizeof rc);
        p.hook(p.mode, ra, rb, rc, rd);
        if (tessera_emu_thread_id_x() < tessera_emu_warp_size()) std::memcpy(p.r->d[lane].data(), rd, sizeof rd);
      },
      args, cfg);
}

struct Shape {
  int M, N, K;
  std::function<Owner(int, int)> A, B, C;
  int lanes;  // lanes holding A/B (WMMA: 16, replicated)
  int warp;   // warp size
  int cRegs;  // C/D registers per lane
};

// A random f16 (exponents 2^-6 to 2^5) or bf16 (2^-16 to 2^15) value of
// either sign, as its float value and its code.
std::pair<float, uint16_t> randomHalf(std::mt19937& rng, bool bf16) {
  const uint32_t u = rng();
  if (bf16) {
    const uint32_t code = (u & 0x807f) | ((111 + (u >> 16) % 32) << 7);
    const uint32_t bits = code << 16;
    float f;
    std::memcpy(&f, &bits, 4);
    return {f, static_cast<uint16_t>(code)};
  }
  const uint32_t exp = 9 + (u >> 16) % 12, man = u & 0x3ff;
  const float mag = std::ldexp(1.0f + static_cast<float>(man) / 1024, static_cast<int>(exp) - 15);
  return {(u & 0x8000) ? -mag : mag, static_cast<uint16_t>((u & 0x8000) | exp << 10 | man)};
}

// Fills the fragments of every lane from whole matrices through the owner
// model, runs the hook in one warp and reads D back through the model.
// `random`: random f16/bf16 operands and f32 C, checked bit for bit against
// the emulator's documented sum (products exact in f32, added in k order
// from C with f32 rounding); else small values whose every sum is exact.
void runCase(const Shape& s, Vendor vendor, int mode, bool bf16,
             void (*hook)(int32_t, const uint32_t*, const uint32_t*, const float*, float*), unsigned seed,
             bool random = false) {
  std::mt19937 rng(seed);
  // Small integers and halves: every product and sum is exact in f32, so
  // the result must match the double reference exactly, whatever the order.
  std::uniform_int_distribution<int> d(-8, 8);
  std::vector<float> A(s.M * s.K), B(s.K * s.N), C(s.M * s.N);
  std::vector<uint16_t> codeA(A.size()), codeB(B.size());
  if (random) {
    for (size_t i = 0; i < A.size(); ++i) std::tie(A[i], codeA[i]) = randomHalf(rng, bf16);
    for (size_t i = 0; i < B.size(); ++i) std::tie(B[i], codeB[i]) = randomHalf(rng, bf16);
    std::uniform_real_distribution<float> u(-100.0f, 100.0f);
    for (float& x : C) x = u(rng);
  } else {
    for (float& x : A) x = d(rng) * 0.5f;
    for (float& x : B) x = d(rng) * 0.25f;
    for (float& x : C) x = float(d(rng) * 3);
  }
  Regs r;
  r.a.assign(s.warp, std::vector<uint32_t>(16, 0));
  r.b.assign(s.warp, std::vector<uint32_t>(16, 0));
  r.c.assign(s.warp, std::vector<float>(16, 0));
  r.d.assign(s.warp, std::vector<float>(16, NAN));
  auto enc = [&](float f) { return bf16 ? toBf16(f) : toHalf(f); };
  for (int i = 0; i < s.M; ++i)
    for (int k = 0; k < s.K; ++k) {
      Owner o = s.A(i, k);
      const uint16_t v = random ? codeA[i * s.K + k] : enc(A[i * s.K + k]);
      for (int rep = o.lane; rep < s.warp; rep += s.lanes) setHalf(r.a[rep], o.idx, v);
    }
  for (int k = 0; k < s.K; ++k)
    for (int j = 0; j < s.N; ++j) {
      Owner o = s.B(k, j);
      const uint16_t v = random ? codeB[k * s.N + j] : enc(B[k * s.N + j]);
      for (int rep = o.lane; rep < s.warp; rep += s.lanes) setHalf(r.b[rep], o.idx, v);
    }
  for (int i = 0; i < s.M; ++i)
    for (int j = 0; j < s.N; ++j) {
      Owner o = s.C(i, j);
      r.c[o.lane][o.idx] = C[i * s.N + j];
    }
  runWave(r, vendor, s.warp, 2, mode, hook, "matrix");
  for (int i = 0; i < s.M; ++i)
    for (int j = 0; j < s.N; ++j) {
      double ref = C[i * s.N + j];
      float ref32 = C[i * s.N + j];
      for (int k = 0; k < s.K; ++k) {
        ref += double(A[i * s.K + k]) * B[k * s.N + j];
        ref32 += A[i * s.K + k] * B[k * s.N + j];
      }
      Owner o = s.C(i, j);
      INFO("D(" << i << "," << j << ") lane " << o.lane << " reg " << o.idx);
      if (random)
        REQUIRE(r.d[o.lane][o.idx] == ref32);
      else
        REQUIRE(r.d[o.lane][o.idx] == ref);
    }
}

// ---- 8-bit integer forms: idx is the byte of the lane's packed registers
// (four per 32-bit register, lowest first) for A and B, the register for
// C/D (i32 bits in the hook's float registers).
// mma.m16n8k32 .s8 (PTX ISA): a0..a15 cover (g | g+8) x (4t.. | 4t+16..)
// register by register; b0..b7 rows 4t.., 4t+16.. of column g.
Owner nv8A(int r, int k) { return {(r % 8) * 4 + (k % 16) / 4, k % 4 + 4 * (r / 8) + 8 * (k / 16)}; }
Owner nv8B(int k, int n) { return {n * 4 + (k % 16) / 4, k % 4 + 4 * (k / 16)}; }
// v_mfma_i32_16x16x16i8: 4 k per lane; v_mfma_i32_16x16x32_i8: 8.
Owner mfma16i8A(int r, int k) { return {r + 16 * (k / 4), k % 4}; }
Owner mfma16i8B(int k, int n) { return {n + 16 * (k / 4), k % 4}; }
Owner mfma32i8A(int r, int k) { return {r + 16 * (k / 8), k % 8}; }
Owner mfma32i8B(int k, int n) { return {n + 16 * (k / 8), k % 8}; }

// As runCase for the integer forms: operands over the whole 8-bit range
// (signed or not), C over the whole i32 range, so D = A B + C wraps; the
// reference is computed mod 2^32.
void runIntCase(const Shape& s, Vendor vendor, int mode, bool aSigned, bool bSigned,
                void (*hook)(int32_t, const uint32_t*, const uint32_t*, const float*, float*), unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> da(aSigned ? -128 : 0, aSigned ? 127 : 255),
      db(bSigned ? -128 : 0, bSigned ? 127 : 255);
  std::vector<int> A(s.M * s.K), B(s.K * s.N);
  std::vector<uint32_t> C(s.M * s.N);
  for (int& x : A) x = da(rng);
  for (int& x : B) x = db(rng);
  for (uint32_t& x : C) x = static_cast<uint32_t>(rng());
  A[0] = aSigned ? -128 : 255;
  B[0] = bSigned ? -128 : 255;
  Regs r;
  r.a.assign(s.warp, std::vector<uint32_t>(16, 0));
  r.b.assign(s.warp, std::vector<uint32_t>(16, 0));
  r.c.assign(s.warp, std::vector<float>(16, 0));
  r.d.assign(s.warp, std::vector<float>(16, 0));
  auto setByte = [](std::vector<uint32_t>& regs, int idx, int v) {
    uint32_t& w = regs[idx / 4];
    const int sh = 8 * (idx % 4);
    w = (w & ~(0xffu << sh)) | (static_cast<uint32_t>(v) & 0xffu) << sh;
  };
  for (int i = 0; i < s.M; ++i)
    for (int k = 0; k < s.K; ++k) {
      Owner o = s.A(i, k);
      for (int rep = o.lane; rep < s.warp; rep += s.lanes) setByte(r.a[rep], o.idx, A[i * s.K + k]);
    }
  for (int k = 0; k < s.K; ++k)
    for (int j = 0; j < s.N; ++j) {
      Owner o = s.B(k, j);
      for (int rep = o.lane; rep < s.warp; rep += s.lanes) setByte(r.b[rep], o.idx, B[k * s.N + j]);
    }
  for (int i = 0; i < s.M; ++i)
    for (int j = 0; j < s.N; ++j) {
      Owner o = s.C(i, j);
      std::memcpy(&r.c[o.lane][o.idx], &C[i * s.N + j], 4);
    }
  runWave(r, vendor, s.warp, 1, mode, hook, "matrix_int");
  for (int i = 0; i < s.M; ++i)
    for (int j = 0; j < s.N; ++j) {
      uint32_t ref = C[i * s.N + j];
      for (int k = 0; k < s.K; ++k) ref += static_cast<uint32_t>(A[i * s.K + k] * B[k * s.N + j]);
      Owner o = s.C(i, j);
      uint32_t got;
      std::memcpy(&got, &r.d[o.lane][o.idx], 4);
      INFO("D(" << i << "," << j << ") lane " << o.lane << " reg " << o.idx);
      REQUIRE(got == ref);
    }
}

// ---- fp8 forms (mma.m16n8k32 .e4m3/.e5m2, MFMA f32 16x16x32 fp8/bf8):
// the 8-bit places of the integer forms (nv8A/nv8B, mfma32i8A/B), f32 C/D.
// With `exact`, every operand is 0 or of magnitude 2^-2..2^2: the products
// (at most 8 significant bits, exponents >= 2^-10) and every partial sum
// (below 2^12) are exact in f32, so D must equal the reference bit for bit
// in any summation order; otherwise codes are drawn from all finite values
// (subnormals, the largest magnitudes) and D is checked to 2^-20 of the sum
// of |products| (the f32 rounding of 32 additions).
void runFp8Case(const Shape& s, Vendor vendor, int mode, tessera::DType ta, tessera::DType tb, bool exact,
                void (*hook)(int32_t, const uint32_t*, const uint32_t*, const float*, float*), unsigned seed) {
  std::mt19937 rng(seed);
  auto draw = [&](tessera::DType t) {
    std::uniform_int_distribution<int> d(0, 255);
    for (;;) {
      auto c = static_cast<uint8_t>(d(rng));
      float v = tessera::fp8Decode(t, c);
      if (!std::isfinite(v)) continue;
      if (exact && v != 0 && (std::fabs(v) < 0.25f || std::fabs(v) > 4.0f)) continue;
      return c;
    }
  };
  std::vector<uint8_t> A(s.M * s.K), B(s.K * s.N);
  std::vector<float> C(s.M * s.N);
  for (auto& x : A) x = draw(ta);
  for (auto& x : B) x = draw(tb);
  std::uniform_int_distribution<int> dc(-64, 64);
  for (float& x : C) x = float(dc(rng)) * 0.5f;
  Regs r;
  r.a.assign(s.warp, std::vector<uint32_t>(16, 0));
  r.b.assign(s.warp, std::vector<uint32_t>(16, 0));
  r.c.assign(s.warp, std::vector<float>(16, 0));
  r.d.assign(s.warp, std::vector<float>(16, NAN));
  auto setByte = [](std::vector<uint32_t>& regs, int idx, uint8_t v) {
    uint32_t& w = regs[idx / 4];
    const int sh = 8 * (idx % 4);
    w = (w & ~(0xffu << sh)) | static_cast<uint32_t>(v) << sh;
  };
  for (int i = 0; i < s.M; ++i)
    for (int k = 0; k < s.K; ++k) {
      Owner o = s.A(i, k);
      for (int rep = o.lane; rep < s.warp; rep += s.lanes) setByte(r.a[rep], o.idx, A[i * s.K + k]);
    }
  for (int k = 0; k < s.K; ++k)
    for (int j = 0; j < s.N; ++j) {
      Owner o = s.B(k, j);
      for (int rep = o.lane; rep < s.warp; rep += s.lanes) setByte(r.b[rep], o.idx, B[k * s.N + j]);
    }
  for (int i = 0; i < s.M; ++i)
    for (int j = 0; j < s.N; ++j) {
      Owner o = s.C(i, j);
      r.c[o.lane][o.idx] = C[i * s.N + j];
    }
  runWave(r, vendor, s.warp, 1, mode, hook, "matrix_fp8");
  for (int i = 0; i < s.M; ++i)
    for (int j = 0; j < s.N; ++j) {
      double ref = C[i * s.N + j], mag = std::fabs(ref);
      for (int k = 0; k < s.K; ++k) {
        double prod = double(tessera::fp8Decode(ta, A[i * s.K + k])) * tessera::fp8Decode(tb, B[k * s.N + j]);
        ref += prod;
        mag += std::fabs(prod);
      }
      Owner o = s.C(i, j);
      const double got = r.d[o.lane][o.idx];
      INFO(tessera::name(ta) << " x " << tessera::name(tb) << " D(" << i << "," << j << ") lane " << o.lane << " reg "
                             << o.idx << " = " << got << ", reference " << ref);
      if (exact)
        REQUIRE(got == ref);
      else
        REQUIRE(std::fabs(got - ref) <= std::ldexp(mag, -20));
    }
}

/// The four format pairs of one fp8 instruction family, each exact and
/// random: modes[i] takes (e4m3-like, e5m2-like) operands in the order
/// e4 x e4, e4 x e5, e5 x e4, e5 x e5; `flags` are or-ed into every mode.
void runFp8Forms(const Shape& s, Vendor vendor, const std::array<int, 4>& modes, tessera::DType e4, tessera::DType e5,
                 int flags, void (*hook)(int32_t, const uint32_t*, const uint32_t*, const float*, float*),
                 unsigned seed) {
  const tessera::DType as[4] = {e4, e4, e5, e5}, bs[4] = {e4, e5, e4, e5};
  for (int i = 0; i < 4; ++i)
    for (bool exact : {true, false}) runFp8Case(s, vendor, modes[i] | flags, as[i], bs[i], exact, hook, ++seed);
}

/// The block-scaled m16n8k32 (sm_120a, .kind::mxf8f6f4.block_scale
/// .scale_vec::1X, ue8m0): the 8-bit fragments of nv8A / nv8B, each byte
/// one element (fp8 whole, fp6 in the low six bits, fp4 in bits 2-5), plus
/// the scales as the PTX ISA's "Block Scaling for mma.sync" places them
/// with selectors {byte-id, thread-id}: A's row m in byte byte-id-a of
/// scale-a-data (the lane's a[4]) of lane 4 (m % 8) + 2 thread-id-a + m / 8,
/// B's column n in byte byte-id-b of scale-b-data (b[2]) of lane 4n +
/// thread-id-b. Every other byte of every lane's scale registers is random,
/// so a wrong selection changes D. The exact sum spans fewer than 53 bits
/// (elements of at most 4 significant bits, scales 2^-6..2^6), which the
/// machine forms in double and rounds once: D is the exact reference
/// rounded to f32, bit for bit.
struct MxElem {
  int mode;  // TESSERA_EMU_MXF_*
  tessera::DType dt;
  double value(uint8_t container) const {
    if (tessera::isFp8(dt)) return tessera::fp8Decode(dt, container);
    return tessera::mxElementDecode(dt, dt == tessera::DType::F4E2M1 ? container >> 2 : container);
  }
};
const MxElem kMxElems[] = {{TESSERA_EMU_MXF_E4M3, tessera::DType::F8E4M3},
                           {TESSERA_EMU_MXF_E5M2, tessera::DType::F8E5M2},
                           {TESSERA_EMU_MXF_E2M3, tessera::DType::F6E2M3},
                           {TESSERA_EMU_MXF_E3M2, tessera::DType::F6E3M2},
                           {TESSERA_EMU_MXF_E2M1, tessera::DType::F4E2M1}};

/// A warp's registers for a block-scaled mma.sync: fragments zero, D NaN,
/// and every byte of the scale registers (a[4], b[2]) random, for the case
/// to set the selected ones.
Regs blockScaleRegs(std::mt19937& rng) {
  Regs r;
  r.a.assign(32, std::vector<uint32_t>(16, 0));
  r.b.assign(32, std::vector<uint32_t>(16, 0));
  r.c.assign(32, std::vector<float>(16, 0));
  r.d.assign(32, std::vector<float>(16, NAN));
  for (int l = 0; l < 32; ++l) {
    r.a[l][4] = static_cast<uint32_t>(rng());
    r.b[l][2] = static_cast<uint32_t>(rng());
  }
  return r;
}

void setByte(uint32_t& w, int byte, uint8_t v) {
  w = (w & ~(0xffu << (8 * byte))) | static_cast<uint32_t>(v) << (8 * byte);
}

void runBlockScaledCase(const MxElem& fa, const MxElem& fb, int ba, int ta, int bb, int tb, unsigned seed) {
  const Shape s{16, 8, 32, nv8A, nv8B, nvC, 32, 32, 4};
  std::mt19937 rng(seed);
  auto draw = [&](const MxElem& f) {
    std::uniform_int_distribution<int> d(0, 255);
    for (;;) {
      auto c = static_cast<uint8_t>(d(rng));
      if (f.dt == tessera::DType::F6E2M3 || f.dt == tessera::DType::F6E3M2) return static_cast<uint8_t>(c & 0x3F);
      if (f.dt == tessera::DType::F4E2M1) return static_cast<uint8_t>((c & 0xF) << 2);
      float v = tessera::fp8Decode(f.dt, c);
      if (std::isfinite(v) && (v == 0 || (std::fabs(v) >= 0.25f && std::fabs(v) <= 4.0f))) return c;
    }
  };
  std::uniform_int_distribution<int> dScale(121, 133);
  std::vector<uint8_t> A(16 * 32), B(32 * 8), SA(16), SB(8);
  for (auto& x : A) x = draw(fa);
  for (auto& x : B) x = draw(fb);
  for (auto& x : SA) x = static_cast<uint8_t>(dScale(rng));
  for (auto& x : SB) x = static_cast<uint8_t>(dScale(rng));
  Regs r = blockScaleRegs(rng);
  for (int i = 0; i < 16; ++i)
    for (int k = 0; k < 32; ++k) {
      Owner o = s.A(i, k);
      setByte(r.a[o.lane][o.idx / 4], o.idx % 4, A[i * 32 + k]);
    }
  for (int k = 0; k < 32; ++k)
    for (int j = 0; j < 8; ++j) {
      Owner o = s.B(k, j);
      setByte(r.b[o.lane][o.idx / 4], o.idx % 4, B[k * 8 + j]);
    }
  for (int m = 0; m < 16; ++m) setByte(r.a[4 * (m % 8) + 2 * ta + m / 8][4], ba, SA[m]);
  for (int n = 0; n < 8; ++n) setByte(r.b[4 * n + tb][2], bb, SB[n]);
  std::uniform_int_distribution<int> dc(-64, 64);
  std::vector<float> C(16 * 8);
  for (float& x : C) x = float(dc(rng)) * 0.5f;
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 8; ++j) r.c[s.C(i, j).lane][s.C(i, j).idx] = C[i * 8 + j];
  const int mode =
      TESSERA_EMU_MMA_BLOCK_SCALE | fa.mode << 16 | fb.mode << 19 | ba << 8 | ta << 10 | bb << 12 | tb << 14;
  runWave(r, Vendor::NVIDIA, 32, 1, mode, tessera_emu_mma_sync, "matrix_block_scale");
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 8; ++j) {
      double ref = C[i * 8 + j];
      for (int k = 0; k < 32; ++k)
        ref += fa.value(A[i * 32 + k]) * std::ldexp(1.0, SA[i] - 127) * fb.value(B[k * 8 + j]) *
               std::ldexp(1.0, SB[j] - 127);
      Owner o = s.C(i, j);
      INFO(tessera::name(fa.dt) << " x " << tessera::name(fb.dt) << " selectors a {" << ba << "," << ta << "} b {" << bb
                                << "," << tb << "} D(" << i << "," << j << ") = " << r.d[o.lane][o.idx]
                                << ", reference " << ref);
      REQUIRE(r.d[o.lane][o.idx] == static_cast<float>(ref));
    }
}

/// The packed m16n8k64 (.kind::mxf4.block_scale.scale_vec::2X, ue8m0):
/// nv8A / nv8B's byte places, each byte two e2m1 codes (element 2j in the
/// low nibble, 2j + 1 in the high), and two scales per row of A (column of
/// B) in bytes byte-id and byte-id + 1 of the lanes the 1X form reads: k
/// 0..31 and 32..63. With `nvf4` (.kind::mxf4nvf4.scale_vec::4X, ue4m3,
/// byte-ids 0) four scales per row, bytes 0-3: k 16b..16b+15. The rest of
/// every scale register is random.
void runMxf4K64Case(int ba, int ta, int bb, int tb, unsigned seed, bool nvf4 = false) {
  const Shape s{16, 8, 32, nv8A, nv8B, nvC, 32, 32, 4};  // places of the 32 bytes of a row
  const int nb = nvf4 ? 4 : 2, blk = 64 / nb;
  std::mt19937 rng(seed);
  std::vector<uint8_t> A(16 * 64), B(64 * 8), SA(size_t(16 * nb)), SB(size_t(8 * nb));
  for (auto& x : A) x = static_cast<uint8_t>(rng() % 16);
  for (auto& x : B) x = static_cast<uint8_t>(rng() % 16);
  // e8m0 2^-6 .. 2^6; UE4M3 normal values 2^-4 .. 2^4 (0x18 .. 0x5F).
  for (auto* v : {&SA, &SB})
    for (auto& x : *v) x = static_cast<uint8_t>(nvf4 ? 0x18 + rng() % 0x48 : 121 + rng() % 13);
  auto scale = [&](uint8_t c) {
    return nvf4 ? double(tessera::fp8Decode(tessera::DType::F8E4M3, c)) : std::ldexp(1.0, c - 127);
  };
  Regs r = blockScaleRegs(rng);
  for (int i = 0; i < 16; ++i)
    for (int kb = 0; kb < 32; ++kb) {
      Owner o = s.A(i, kb);
      setByte(r.a[o.lane][o.idx / 4], o.idx % 4, uint8_t(A[i * 64 + 2 * kb] | A[i * 64 + 2 * kb + 1] << 4));
    }
  for (int kb = 0; kb < 32; ++kb)
    for (int j = 0; j < 8; ++j) {
      Owner o = s.B(kb, j);
      setByte(r.b[o.lane][o.idx / 4], o.idx % 4, uint8_t(B[2 * kb * 8 + j] | B[(2 * kb + 1) * 8 + j] << 4));
    }
  for (int h = 0; h < nb; ++h) {
    for (int m = 0; m < 16; ++m) setByte(r.a[4 * (m % 8) + 2 * ta + m / 8][4], ba + h, SA[size_t(m * nb + h)]);
    for (int n = 0; n < 8; ++n) setByte(r.b[4 * n + tb][2], bb + h, SB[size_t(n * nb + h)]);
  }
  std::vector<float> C(16 * 8);
  for (float& x : C) x = float(int(rng() % 129) - 64) * 0.5f;
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 8; ++j) r.c[s.C(i, j).lane][s.C(i, j).idx] = C[i * 8 + j];
  const int mode = TESSERA_EMU_MMA_BLOCK_SCALE | (nvf4 ? TESSERA_EMU_MMA_NVF4_K64 : TESSERA_EMU_MMA_MXF4_K64) |
                   TESSERA_EMU_MXF_E2M1 << 16 | TESSERA_EMU_MXF_E2M1 << 19 | ba << 8 | ta << 10 | bb << 12 | tb << 14;
  runWave(r, Vendor::NVIDIA, 32, 1, mode, tessera_emu_mma_sync, nvf4 ? "matrix_nvf4_k64" : "matrix_mxf4_k64");
  auto v = [](uint8_t c) { return double(tessera::mxElementDecode(tessera::DType::F4E2M1, c)); };
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 8; ++j) {
      double ref = C[i * 8 + j];
      for (int k = 0; k < 64; ++k)
        ref += v(A[i * 64 + k]) * scale(SA[size_t(i * nb + k / blk)]) * v(B[k * 8 + j]) *
               scale(SB[size_t(j * nb + k / blk)]);
      Owner o = s.C(i, j);
      INFO("selectors a {" << ba << "," << ta << "} b {" << bb << "," << tb << "} D(" << i << "," << j
                           << ") = " << r.d[o.lane][o.idx] << ", reference " << ref);
      REQUIRE(r.d[o.lane][o.idx] == static_cast<float>(ref));
    }
}

}  // namespace

TEST_CASE("mma.sync m16n8k32 e4m3/e5m2 follows the PTX fragment layouts, decoding fp8 exactly", "[emu][matrix]") {
  Shape s{16, 8, 32, nv8A, nv8B, nvC, 32, 32, 4};
  runFp8Forms(s, Vendor::NVIDIA,
              {TESSERA_EMU_MMA_M16N8K32_E4M3_E4M3, TESSERA_EMU_MMA_M16N8K32_E4M3_E5M2,
               TESSERA_EMU_MMA_M16N8K32_E5M2_E4M3, TESSERA_EMU_MMA_M16N8K32_E5M2_E5M2},
              tessera::DType::F8E4M3, tessera::DType::F8E5M2, 0, tessera_emu_mma_sync, 40);
}

TEST_CASE("MFMA f32 16x16x32 fp8/bf8 follows AMD's wave64 layout, decoding the FNUZ formats exactly", "[emu][matrix]") {
  Shape s{16, 16, 32, mfma32i8A, mfma32i8B, mfma16D, 64, 64, 4};
  runFp8Forms(s, Vendor::AMD,
              {TESSERA_EMU_MFMA_16X16X32_FP8_FP8, TESSERA_EMU_MFMA_16X16X32_FP8_BF8, TESSERA_EMU_MFMA_16X16X32_BF8_FP8,
               TESSERA_EMU_MFMA_16X16X32_BF8_BF8},
              tessera::DType::F8E4M3FNUZ, tessera::DType::F8E5M2FNUZ, 0, tessera_emu_mfma, 60);
}

TEST_CASE("mma.sync m16n8k32 s8 follows the PTX fragment layouts, sums wrap mod 2^32", "[emu][matrix]") {
  Shape s{16, 8, 32, nv8A, nv8B, nvC, 32, 32, 4};
  runIntCase(s, Vendor::NVIDIA, TESSERA_EMU_MMA_M16N8K32_S8, true, true, tessera_emu_mma_sync, 11);
}

TEST_CASE("MFMA i32 16x16x16i8 and 16x16x32_i8 follow AMD's wave64 layouts", "[emu][matrix]") {
  Shape s16{16, 16, 16, mfma16i8A, mfma16i8B, mfma16D, 64, 64, 4};
  Shape s32{16, 16, 32, mfma32i8A, mfma32i8B, mfma16D, 64, 64, 4};
  runIntCase(s16, Vendor::AMD, TESSERA_EMU_MFMA_16X16X16_I8, true, true, tessera_emu_mfma, 12);
  runIntCase(s32, Vendor::AMD, TESSERA_EMU_MFMA_16X16X32_I8, true, true, tessera_emu_mfma, 13);
}

TEST_CASE("WMMA i32 16x16x16 iu8 follows the RDNA3 wave32 layout with either signedness", "[emu][matrix]") {
  Shape s{16, 16, 16, wmmaA, wmmaB, wmmaD, 16, 32, 8};
  for (int sa = 0; sa < 2; ++sa)
    for (int sb = 0; sb < 2; ++sb)
      runIntCase(
          s, Vendor::AMD,
          TESSERA_EMU_WMMA_16X16X16_IU8 | (sa ? TESSERA_EMU_WMMA_A_SIGNED : 0) | (sb ? TESSERA_EMU_WMMA_B_SIGNED : 0),
          sa != 0, sb != 0, tessera_emu_wmma, unsigned(14 + 2 * sa + sb));
}

TEST_CASE("mma.sync m16n8k16 f16 and bf16 follow the PTX fragment layouts", "[emu][matrix]") {
  Shape s{16, 8, 16, nvA, nvB, nvC, 32, 32, 4};
  runCase(s, Vendor::NVIDIA, TESSERA_EMU_MMA_M16N8K16_F16, false, tessera_emu_mma_sync, 1);
  runCase(s, Vendor::NVIDIA, TESSERA_EMU_MMA_M16N8K16_BF16, true, tessera_emu_mma_sync, 2);
}

TEST_CASE("MFMA 32x32x8 and 16x16x16 f16/bf16 follow AMD's wave64 layouts", "[emu][matrix]") {
  Shape s32{32, 32, 8, mfma32A, mfma32B, mfma32D, 64, 64, 16};
  Shape s16{16, 16, 16, mfma16A, mfma16B, mfma16D, 64, 64, 4};
  runCase(s32, Vendor::AMD, TESSERA_EMU_MFMA_32X32X8_F16, false, tessera_emu_mfma, 3);
  runCase(s32, Vendor::AMD, TESSERA_EMU_MFMA_32X32X8_BF16, true, tessera_emu_mfma, 4);
  runCase(s16, Vendor::AMD, TESSERA_EMU_MFMA_16X16X16_F16, false, tessera_emu_mfma, 5);
  runCase(s16, Vendor::AMD, TESSERA_EMU_MFMA_16X16X16_BF16, true, tessera_emu_mfma, 6);
}

TEST_CASE("MFMA 32x32x16 and 16x16x32 f16/bf16 (gfx950) follow AMD's wave64 layouts", "[emu][matrix][gfx950]") {
  Shape s32{32, 32, 16, mfma32x16A, mfma32x16B, mfma32D, 64, 64, 16};
  Shape s16{16, 16, 32, mfma16x32A, mfma16x32B, mfma16D, 64, 64, 4};
  for (bool random : {false, true}) {
    INFO((random ? "random operands" : "exact sums"));
    const unsigned seed = random ? 40 : 30;
    runCase(s32, Vendor::AMD, TESSERA_EMU_MFMA_32X32X16_F16, false, tessera_emu_mfma, seed + 1, random);
    runCase(s32, Vendor::AMD, TESSERA_EMU_MFMA_32X32X16_BF16, true, tessera_emu_mfma, seed + 2, random);
    runCase(s16, Vendor::AMD, TESSERA_EMU_MFMA_16X16X32_F16, false, tessera_emu_mfma, seed + 3, random);
    runCase(s16, Vendor::AMD, TESSERA_EMU_MFMA_16X16X32_BF16, true, tessera_emu_mfma, seed + 4, random);
  }
}

namespace {

// ---- gfx950's OCP fp8 MFMAs (AMD's CDNA4 matrix-core examples) ---------------
// v_mfma_f32_16x16x32_{fp8,bf8}_{fp8,bf8} keeps gfx942's places
// (mfma32i8A/B). The f8f6f4 forms hold 32 codes per lane as two runs of 16
// along K, half the instruction's K apart: 16x16x128's lane r + 16q holds
// k 16q..16q+15 in bytes 0..15 and 64+16q.. in bytes 16..31; 32x32x64's
// lane r + 32q holds k 16q.. and 32+16q...
Owner mfma128A(int r, int k) { return {r + 16 * (k % 64 / 16), k % 16 + 16 * (k / 64)}; }
Owner mfma128B(int k, int n) { return {n + 16 * (k % 64 / 16), k % 16 + 16 * (k / 64)}; }
Owner mfma64A(int r, int k) { return {r + 32 * (k % 32 / 16), k % 16 + 16 * (k / 32)}; }
Owner mfma64B(int k, int n) { return {n + 32 * (k % 32 / 16), k % 16 + 16 * (k / 32)}; }

// The OCP 8-bit floats, decoded here independently of support/Fp8.h: e4m3
// (bias 7, no infinity, NaN only at S.1111.111, largest 448) and e5m2 (bias
// 15, IEEE-style infinities and NaNs).
float ocpDecode(bool e5m2, uint8_t c) {
  const float sign = c & 0x80 ? -1.0f : 1.0f;
  const int mbits = e5m2 ? 2 : 3, bias = e5m2 ? 15 : 7, emax = e5m2 ? 31 : 15;
  const int e = (c & 0x7f) >> mbits, m = c & ((1 << mbits) - 1);
  if (e5m2 && e == emax) return m == 0 ? sign * INFINITY : NAN;
  if (!e5m2 && e == emax && m == 7) return NAN;
  if (e == 0) return sign * std::ldexp(float(m), 1 - bias - mbits);
  return sign * std::ldexp(float((1 << mbits) + m), e - bias - mbits);
}

// Every code of both formats (NaNs, infinities and e4m3's 448 included),
// random f32 C: D must equal, bit for bit (NaN for NaN), the C++ model of
// the emulator's sums: C plus the f32 products (exact) in k order, each
// addition rounded to f32.
void runOcpCase(const Shape& s, int mode, bool aE5m2, bool bE5m2, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> code(0, 255);
  std::vector<uint8_t> A(s.M * s.K), B(s.K * s.N);
  // Finite codes, so that most sums stay finite and their rounding is
  // checked, then the special ones planted: a NaN (0x7f in both formats) in
  // A's row 0, the largest e4m3 (448) or an e5m2 infinity in A's row 1 and
  // B's column 3.
  auto draw = [&](bool e5m2) {
    for (;;) {
      auto c = static_cast<uint8_t>(code(rng));
      if (std::isfinite(ocpDecode(e5m2, c))) return c;
    }
  };
  for (auto& x : A) x = draw(aE5m2);
  for (auto& x : B) x = draw(bE5m2);
  A[0 * s.K + 1] = 0x7f;
  A[1 * s.K + 5] = aE5m2 ? 0xfc : 0xfe;
  B[2 * s.N + 3] = bE5m2 ? 0x7c : 0x7e;
  std::vector<float> C(s.M * s.N);
  for (float& x : C) x = std::ldexp(float(int(rng() % 2001) - 1000), int(rng() % 24) - 12);
  Regs r;
  r.a.assign(s.warp, std::vector<uint32_t>(16, 0));
  r.b.assign(s.warp, std::vector<uint32_t>(16, 0));
  r.c.assign(s.warp, std::vector<float>(16, 0));
  r.d.assign(s.warp, std::vector<float>(16, 0));
  auto setByte = [](std::vector<uint32_t>& regs, int idx, uint8_t v) {
    uint32_t& w = regs[idx / 4];
    const int sh = 8 * (idx % 4);
    w = (w & ~(0xffu << sh)) | static_cast<uint32_t>(v) << sh;
  };
  for (int i = 0; i < s.M; ++i)
    for (int k = 0; k < s.K; ++k) setByte(r.a[s.A(i, k).lane], s.A(i, k).idx, A[i * s.K + k]);
  for (int k = 0; k < s.K; ++k)
    for (int j = 0; j < s.N; ++j) setByte(r.b[s.B(k, j).lane], s.B(k, j).idx, B[k * s.N + j]);
  for (int i = 0; i < s.M; ++i)
    for (int j = 0; j < s.N; ++j) r.c[s.C(i, j).lane][s.C(i, j).idx] = C[i * s.N + j];
  runWave(r, Vendor::AMD, 64, 1, mode, tessera_emu_mfma, "matrix_ocp_fp8");
  int nan = 0, finite = 0;
  for (int i = 0; i < s.M; ++i)
    for (int j = 0; j < s.N; ++j) {
      float want = C[i * s.N + j];
      for (int k = 0; k < s.K; ++k) want += ocpDecode(aE5m2, A[i * s.K + k]) * ocpDecode(bE5m2, B[k * s.N + j]);
      Owner o = s.C(i, j);
      const float got = r.d[o.lane][o.idx];
      INFO("D(" << i << "," << j << ") lane " << o.lane << " reg " << o.idx << " = " << got << ", model " << want);
      if (std::isnan(want)) {
        ++nan;
        REQUIRE(std::isnan(got));
      } else {
        finite += std::isfinite(want);
        uint32_t gb, wb;
        std::memcpy(&gb, &got, 4);
        std::memcpy(&wb, &want, 4);
        REQUIRE(gb == wb);
      }
    }
  // Both kinds of result occur, so neither branch is vacuous.
  CHECK(nan > 0);
  CHECK(finite > 0);
}

}  // namespace

TEST_CASE("the OCP fp8 decoding of the MFMA test model: 448, NaN only at S.1111.111, e5m2 infinities",
          "[emu][matrix][gfx950]") {
  CHECK(ocpDecode(false, 0x7e) == 448.0f);
  CHECK(ocpDecode(false, 0xfe) == -448.0f);
  CHECK(std::isnan(ocpDecode(false, 0x7f)));
  CHECK(std::isnan(ocpDecode(false, 0xff)));
  CHECK(ocpDecode(false, 0x78) == 256.0f);  // S.1111.000 is a number, not infinity
  CHECK(ocpDecode(false, 0x01) == std::ldexp(1.0f, -9));
  CHECK(ocpDecode(true, 0x7c) == INFINITY);
  CHECK(ocpDecode(true, 0xfc) == -INFINITY);
  CHECK(std::isnan(ocpDecode(true, 0x7d)));
  CHECK(ocpDecode(true, 0x7b) == 57344.0f);
  CHECK(ocpDecode(true, 0x01) == std::ldexp(1.0f, -16));
  // The codec every backend and the emulator share agrees on all codes.
  for (int c = 0; c < 256; ++c)
    for (bool e5m2 : {false, true}) {
      const float mine = ocpDecode(e5m2, uint8_t(c));
      const float theirs = tessera::fp8Decode(e5m2 ? tessera::DType::F8E5M2 : tessera::DType::F8E4M3, uint8_t(c));
      INFO((e5m2 ? "e5m2 " : "e4m3 ") << c);
      CHECK(((std::isnan(mine) && std::isnan(theirs)) || mine == theirs));
    }
}

TEST_CASE("MFMA fp8 16x16x32 and f8f6f4 16x16x128 / 32x32x64 (gfx950, OCP) follow AMD's layouts bit for bit",
          "[emu][matrix][gfx950]") {
  Shape s32{16, 16, 32, mfma32i8A, mfma32i8B, mfma16D, 64, 64, 4};
  Shape s128{16, 16, 128, mfma128A, mfma128B, mfma16D, 64, 64, 4};
  Shape s64{32, 32, 64, mfma64A, mfma64B, mfma32D, 64, 64, 16};
  unsigned seed = 90;
  for (bool aE5m2 : {false, true})
    for (bool bE5m2 : {false, true}) {
      INFO((aE5m2 ? "bf8" : "fp8") << " x " << (bE5m2 ? "bf8" : "fp8"));
      const int flags = (aE5m2 ? TESSERA_EMU_MFMA_A_BF8 : 0) | (bE5m2 ? TESSERA_EMU_MFMA_B_BF8 : 0);
      const int formats = (aE5m2 ? TESSERA_EMU_MXF_E5M2 : TESSERA_EMU_MXF_E4M3) << 16 |
                          (bE5m2 ? TESSERA_EMU_MXF_E5M2 : TESSERA_EMU_MXF_E4M3) << 19;
      runOcpCase(s32, TESSERA_EMU_MFMA_16X16X32_OCP_F8 | flags, aE5m2, bE5m2, ++seed);
      runOcpCase(s128, TESSERA_EMU_MFMA_16X16X128_F8F6F4 | formats, aE5m2, bE5m2, ++seed);
      runOcpCase(s64, TESSERA_EMU_MFMA_32X32X64_F8F6F4 | formats, aE5m2, bE5m2, ++seed);
    }
}

// The scaled f8f6f4 forms: fp8 in the runs above, fp4 32 contiguous k two
// a byte (lane r + n q holds k 32q..32q+31, nibble e = k 32q + e, low
// nibble first); lane r + n b's scale word (after the operand's 8 or 4
// registers), byte op_sel, scales row r's (column r's) k 32b..32b+31. Each
// scale is drawn per (row, block) and every other byte of the word is
// garbage, so a scale read from the wrong lane, block or byte shows.
TEST_CASE("MFMA scaled f8f6f4 (gfx950): lane r + n b scales block b of row r, fp4 two a byte",
          "[emu][matrix][gfx950]") {
  std::mt19937 rng(2026);
  for (bool big : {false, true})
    for (auto [fa, fb] :
         {std::pair{TESSERA_EMU_MXF_E4M3, TESSERA_EMU_MXF_E2M1}, std::pair{TESSERA_EMU_MXF_E2M1, TESSERA_EMU_MXF_E5M2},
          std::pair{TESSERA_EMU_MXF_E2M1, TESSERA_EMU_MXF_E2M1}}) {
      const int n = big ? 32 : 16, K = big ? 64 : 128, nb = K / 32, oa = int(rng() % 4), ob = int(rng() % 4);
      INFO((big ? "32x32x64 " : "16x16x128 ") << fa << " x " << fb << " op_sel " << oa << ", " << ob);
      auto value = [](int f, uint8_t c) -> double {
        if (f == TESSERA_EMU_MXF_E2M1) return tessera::mxElementDecode(tessera::DType::F4E2M1, c);
        return ocpDecode(f == TESSERA_EMU_MXF_E5M2, c);
      };
      auto draw = [&](int f) -> uint8_t {
        for (;;) {
          const uint8_t c = f == TESSERA_EMU_MXF_E2M1 ? uint8_t(rng() % 16) : uint8_t(rng() % 256);
          if (std::isfinite(value(f, c))) return c;
        }
      };
      std::vector<uint8_t> A(size_t(n * K)), B(size_t(K * n)), sa(size_t(n * nb)), sb(size_t(n * nb));
      for (auto& x : A) x = draw(fa);
      for (auto& x : B) x = draw(fb);
      for (auto& x : sa) x = uint8_t(120 + rng() % 15);
      for (auto& x : sb) x = uint8_t(120 + rng() % 15);
      Regs r;
      r.a.assign(64, std::vector<uint32_t>(16, 0));
      r.b.assign(64, std::vector<uint32_t>(16, 0));
      r.c.assign(64, std::vector<float>(16, 0));
      r.d.assign(64, std::vector<float>(16, 0));
      // Element (row or column x, k) of an operand in format f into lane
      // registers `regs`.
      auto place = [&](std::vector<std::vector<uint32_t>>& regs, int f, int x, int k, uint8_t c) {
        if (f == TESSERA_EMU_MXF_E2M1) {
          const int lane = x + n * (k / 32), e = k % 32;
          regs[size_t(lane)][size_t(e / 8)] |= uint32_t(c) << (4 * (e % 8));
        } else {
          const Owner o = big ? mfma64A(x, k) : mfma128A(x, k);
          regs[size_t(o.lane)][size_t(o.idx / 4)] |= uint32_t(c) << (8 * (o.idx % 4));
        }
      };
      for (int i = 0; i < n; ++i)
        for (int k = 0; k < K; ++k) {
          place(r.a, fa, i, k, A[size_t(i * K + k)]);
          place(r.b, fb, i, k, B[size_t(k * n + i)]);
        }
      const int wa = fa == TESSERA_EMU_MXF_E2M1 ? 4 : 8, wb = fb == TESSERA_EMU_MXF_E2M1 ? 4 : 8;
      for (int l = 0; l < 64; ++l) {
        const int x = l % n, blk = l / n;
        auto word = [&](uint8_t sc, int sel) {
          uint32_t w = uint32_t(rng());
          return (w & ~(0xffu << (8 * sel))) | uint32_t(sc) << (8 * sel);
        };
        r.a[size_t(l)][size_t(wa)] = word(sa[size_t(x * nb + blk)], oa);
        r.b[size_t(l)][size_t(wb)] = word(sb[size_t(x * nb + blk)], ob);
      }
      std::vector<float> C(size_t(n * n));
      for (float& x : C) x = float(int(rng() % 17) - 8) * 0.5f;
      for (int i = 0; i < n; ++i)
        for (int j = 0; j < n; ++j) {
          const Owner o = big ? mfma32D(i, j) : mfma16D(i, j);
          r.c[size_t(o.lane)][size_t(o.idx)] = C[size_t(i * n + j)];
        }
      const int mode = (big ? TESSERA_EMU_MFMA_32X32X64_F8F6F4 : TESSERA_EMU_MFMA_16X16X128_F8F6F4) | fa << 16 |
                       fb << 19 | TESSERA_EMU_MFMA_SCALED | oa << 8 | ob << 10;
      runWave(r, Vendor::AMD, 64, 1, mode, tessera_emu_mfma, "matrix_mfma_scaled");
      int bad = 0;
      for (int i = 0; i < n; ++i)
        for (int j = 0; j < n; ++j) {
          double ref = C[size_t(i * n + j)], mag = std::fabs(ref);
          for (int k = 0; k < K; ++k) {
            const double p = value(fa, A[size_t(i * K + k)]) * value(fb, B[size_t(k * n + j)]) *
                             std::ldexp(1.0, sa[size_t(i * nb + k / 32)] - 127) *
                             std::ldexp(1.0, sb[size_t(j * nb + k / 32)] - 127);
            ref += p;
            mag += std::fabs(p);
          }
          const Owner o = big ? mfma32D(i, j) : mfma16D(i, j);
          const double got = r.d[size_t(o.lane)][size_t(o.idx)];
          if (!(std::fabs(got - ref) <= 0x1p-23 * mag) && ++bad <= 3)
            FAIL_CHECK("D[" << i << "][" << j << "] = " << got << ", expected " << ref);
        }
      CHECK(bad == 0);
    }
}

TEST_CASE("WMMA 16x16x16 f16/bf16 follow the RDNA3 wave32 layouts", "[emu][matrix]") {
  Shape s{16, 16, 16, wmmaA, wmmaB, wmmaD, 16, 32, 8};
  runCase(s, Vendor::AMD, TESSERA_EMU_WMMA_16X16X16_F16, false, tessera_emu_wmma, 7);
  runCase(s, Vendor::AMD, TESSERA_EMU_WMMA_16X16X16_BF16, true, tessera_emu_wmma, 8);
}

TEST_CASE("WMMA 16x16x16 f16/bf16 (RDNA4) follow the gfx12 wave32 layouts", "[emu][matrix][gfx1200]") {
  Shape s{16, 16, 16, wmma12A, wmma12B, wmma12D, 32, 32, 8};
  for (bool random : {false, true}) {
    INFO((random ? "random operands" : "exact sums"));
    const unsigned seed = random ? 80 : 70;
    runCase(s, Vendor::AMD, TESSERA_EMU_WMMA_16X16X16_F16 | TESSERA_EMU_WMMA_GFX12, false, tessera_emu_wmma, seed + 1,
            random);
    runCase(s, Vendor::AMD, TESSERA_EMU_WMMA_16X16X16_BF16 | TESSERA_EMU_WMMA_GFX12, true, tessera_emu_wmma, seed + 2,
            random);
  }
}

TEST_CASE("WMMA i32 16x16x16 iu8 (RDNA4) follows the gfx12 wave32 layout with either signedness",
          "[emu][matrix][gfx1200]") {
  Shape s{16, 16, 16, wmma12i8A, wmma12i8B, wmma12D, 32, 32, 8};
  for (int sa = 0; sa < 2; ++sa)
    for (int sb = 0; sb < 2; ++sb)
      runIntCase(s, Vendor::AMD,
                 TESSERA_EMU_WMMA_16X16X16_IU8 | TESSERA_EMU_WMMA_GFX12 | (sa ? TESSERA_EMU_WMMA_A_SIGNED : 0) |
                     (sb ? TESSERA_EMU_WMMA_B_SIGNED : 0),
                 sa != 0, sb != 0, tessera_emu_wmma, unsigned(90 + 2 * sa + sb));
}

TEST_CASE("WMMA f32 16x16x16 fp8/bf8 (RDNA4) follows the gfx12 layout, decoding the OCP formats exactly",
          "[emu][matrix][gfx1200]") {
  Shape s{16, 16, 16, wmma12i8A, wmma12i8B, wmma12D, 32, 32, 8};
  runFp8Forms(s, Vendor::AMD,
              {TESSERA_EMU_WMMA_16X16X16_FP8_FP8, TESSERA_EMU_WMMA_16X16X16_FP8_BF8, TESSERA_EMU_WMMA_16X16X16_BF8_FP8,
               TESSERA_EMU_WMMA_16X16X16_BF8_BF8},
              tessera::DType::F8E4M3, tessera::DType::F8E5M2, TESSERA_EMU_WMMA_GFX12, tessera_emu_wmma, 100);
}

TEST_CASE("matrix instructions on the wrong warp or with exited lanes are misuse", "[emu][matrix]") {
  LaunchConfig cfg;
  cfg.vendor = Vendor::AMD;
  cfg.warpSize = 32;  // MFMA needs wave64
  cfg.block[0] = 32;
  cfg.throwOnError = false;
  LaunchReport rep = launch(
      +[](void* const*) {
        uint32_t a[16] = {}, b[16] = {};
        float c[16] = {}, d[16];
        tessera_emu_mfma(TESSERA_EMU_MFMA_16X16X16_F16, a, b, c, d);
      },
      nullptr, cfg);
  CHECK(rep.count(IssueKind::CollectiveMisuse) == 1);
  // The fp8 WMMAs are RDNA4 instructions: without the gfx12 layouts they
  // name no instruction.
  rep = launch(
      +[](void* const*) {
        uint32_t a[16] = {}, b[16] = {};
        float c[16] = {}, d[16];
        tessera_emu_wmma(TESSERA_EMU_WMMA_16X16X16_FP8_FP8, a, b, c, d);
      },
      nullptr, cfg);
  CHECK(rep.count(IssueKind::CollectiveMisuse) == 1);
  cfg.vendor = Vendor::NVIDIA;
  rep = launch(
      +[](void* const*) {
        if (tessera_emu_lane_id() == 5) return;  // one lane leaves before the warp-wide mma
        uint32_t a[16] = {}, b[16] = {};
        float c[16] = {}, d[16];
        tessera_emu_mma_sync(TESSERA_EMU_MMA_M16N8K16_F16, a, b, c, d);
      },
      nullptr, cfg);
  CHECK(rep.count(IssueKind::CollectiveMisuse) == 1);
}

// ---- ldmatrix ---------------------------------------------------------------------
namespace {
struct LdParams {
  int count;
  bool trans;
  int rowBytes;  // distance between consecutive rows of one matrix
  bool swizzle;  // XOR swizzle of the 16-byte chunk by row (as the GEMM staging)
  std::vector<std::vector<uint32_t>> out;
};
// Byte offset of row r of matrix j: matrices side by side in 16-byte chunks
// of a row of rowBytes (chunk j), rows one after another.
uint32_t rowOffset(const LdParams& p, int j, int r) {
  int chunks = p.rowBytes / 16;
  int chunk = j % chunks;
  if (p.swizzle) chunk ^= r % 8 % chunks;
  return uint32_t((r + 8 * (j / chunks)) * p.rowBytes + 16 * chunk);
}
uint16_t elemValue(int j, int r, int c) { return uint16_t(1000 * j + 10 * r + c); }
}  // namespace

TEST_CASE("ldmatrix x1/x2/x4 with and without .trans, and its bank conflicts", "[emu][matrix]") {
  for (int count : {1, 2, 4})
    for (bool trans : {false, true})
      for (auto [rowBytes, swizzle] : {std::pair{16, false}, std::pair{64, false}, std::pair{128, true}}) {
        LdParams p{count, trans, rowBytes, swizzle,
                   std::vector<std::vector<uint32_t>>(32, std::vector<uint32_t>(4, 0))};
        LaunchConfig cfg;
        cfg.block[0] = 32;
        cfg.sharedBytes = 4096;
        cfg.kernelName = "ldmatrix";
        cfg.opNames = {"fill", "ldmatrix"};
        LdParams* pp = &p;
        void* args[] = {&pp};
        LaunchReport rep = launch(
            +[](void* const* a) {
              LdParams& p = **static_cast<LdParams* const*>(a[0]);
              auto* sm = static_cast<unsigned char*>(tessera_emu_shared_base());
              int lane = tessera_emu_lane_id();
              if (lane == 0)
                for (int j = 0; j < p.count; ++j)
                  for (int r = 0; r < 8; ++r)
                    for (int c = 0; c < 8; ++c) {
                      uint16_t v = elemValue(j, r, c);
                      std::memcpy(tessera_emu_shared_access(sm + rowOffset(p, j, r) + 2 * c, 2, TESSERA_EMU_STORE, 0),
                                  &v, 2);
                    }
              tessera_emu_barrier(-1);
              int j = lane / 8 % p.count, r = lane % 8;  // lanes past 8*count repeat (ignored)
              uint32_t out[4] = {0, 0, 0, 0};
              tessera_emu_ldmatrix(p.count | (p.trans ? TESSERA_EMU_LDMATRIX_TRANS : 0), sm + rowOffset(p, j, r), 1,
                                   out);
              std::memcpy(p.out[lane].data(), out, sizeof out);
            },
            args, cfg);
        INFO("x" << count << (trans ? ".trans" : "") << " rows " << rowBytes << " bytes"
                 << (swizzle ? " swizzled" : ""));
        REQUIRE_FALSE(rep.hasErrors());
        // Owner model (PTX ISA, ldmatrix): element (r, c) of matrix j is in
        // lane 4r + c/2, half c%2 of register j; .trans delivers the
        // transpose, so (r, c) is in lane 4c + r/2, half r%2.
        for (int jj = 0; jj < count; ++jj)
          for (int r = 0; r < 8; ++r)
            for (int c = 0; c < 8; ++c) {
              int lane = trans ? 4 * c + r / 2 : 4 * r + c / 2;
              int half = trans ? r % 2 : c % 2;
              uint16_t got = uint16_t(p.out[lane][jj] >> (16 * half));
              REQUIRE(got == elemValue(jj, r, c));
            }
        const BankConflictStat* st = rep.conflictsOf(1);
        REQUIRE(st != nullptr);
        // 16-byte rows back to back and the swizzled 128-byte rows put the
        // eight rows of one matrix in eight different 4-bank groups; 64-byte
        // rows put rows r and r+2 in the same banks (4-way conflicts).
        if (rowBytes == 64)
          CHECK(st->conflicts == uint64_t(3 * count));
        else
          CHECK(st->conflicts == 0);
      }
}

TEST_CASE(
    "block-scaled mma.sync m16n8k64 kind::mxf4 reads two e2m1 a byte and two scales per row, bytes byte-id and "
    "byte-id + 1",
    "[emu][matrix][mx]") {
  unsigned seed = 500;
  for (int ba : {0, 2})
    for (int ta = 0; ta < 2; ++ta)
      for (int tb = 0; tb < 4; ++tb) runMxf4K64Case(ba, ta, 2 - ba, tb, ++seed);
}

TEST_CASE(
    "block-scaled mma.sync m16n8k64 kind::mxf4nvf4 scale_vec::4X reads four UE4M3 scales per row, bytes 0-3, and "
    "gives NaN for a scale with the sign bit set",
    "[emu][matrix][mx]") {
  unsigned seed = 600;
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 4; ++tb) runMxf4K64Case(0, ta, 0, tb, ++seed, true);
  // UE4M3 has no sign: the PTX ISA gives bit 7 no meaning, and Tessera's
  // compiler clears it, so the model makes it visible (NaN in the rows
  // and columns that scale reaches; the others exact).
  std::mt19937 rng(7);
  Regs r = blockScaleRegs(rng);
  for (int l = 0; l < 32; ++l) {
    for (int q = 0; q < 4; ++q) r.a[l][q] = 0x22222222;  // e2m1 1.0 everywhere
    for (int q = 0; q < 2; ++q) r.b[l][q] = 0x22222222;
    r.a[l][4] = r.b[l][2] = 0x38383838;  // UE4M3 1.0 in every byte
    for (int q = 0; q < 4; ++q) r.c[l][q] = 0;
  }
  r.a[0][4] = 0xB8383838;  // row 0's last block: bit 7 set
  runWave(
      r, Vendor::NVIDIA, 32, 1,
      TESSERA_EMU_MMA_BLOCK_SCALE | TESSERA_EMU_MMA_NVF4_K64 | TESSERA_EMU_MXF_E2M1 << 16 | TESSERA_EMU_MXF_E2M1 << 19,
      tessera_emu_mma_sync, "matrix_nvf4_sign");
  const Shape s{16, 8, 32, nv8A, nv8B, nvC, 32, 32, 4};
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 8; ++j) {
      const Owner o = s.C(i, j);
      INFO("D(" << i << "," << j << ") = " << r.d[o.lane][o.idx]);
      if (i == 0)
        CHECK(std::isnan(r.d[o.lane][o.idx]));
      else
        CHECK(r.d[o.lane][o.idx] == 64.0f);
    }
}

TEST_CASE("block-scaled mma.sync m16n8k32 scales each row of A and column of B by the selected e8m0 bytes",
          "[emu][matrix][mx]") {
  // Every element pair with one selector setting, and every selector
  // setting with a few pairs.
  unsigned seed = 300;
  for (const MxElem& fa : kMxElems)
    for (const MxElem& fb : kMxElems) runBlockScaledCase(fa, fb, 1, 0, 2, 0, ++seed);
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 4; ++tb)
      for (int ba = 0; ba < 4; ++ba)
        runBlockScaledCase(kMxElems[(ba + tb) % 5], kMxElems[(ta + 2 * tb + 1) % 5], ba, ta, (ba + tb + ta) % 4, tb,
                           ++seed);
}
