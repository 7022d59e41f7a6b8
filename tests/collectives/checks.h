// One member's share of the collective checks, run the same way by every
// engine's tests: in-process groups (tests/runtime/collectives_test.cpp,
// one thread per member), MPI processes under mpirun
// (tests/collectives/mpi_worker.cpp) and the fake NCCL / RCCL. Every value
// is a small integer, so sums and products of up to 8 ranks are exact in
// f16 and bf16 and the expected results are computed exactly in double.
// Each check returns "" or what went wrong.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "tessera/runtime/Collectives.h"

namespace tessera::collcheck {

using rt::Buffer;
using rt::BufferView;
using rt::Communicator;
using rt::ReduceOp;
using rt::Stream;

inline uint16_t bf16Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return static_cast<uint16_t>(u >> 16);  // exact for the small integers used here
}
inline float bf16Value(uint16_t b) {
  uint32_t u = uint32_t(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline uint16_t f16Bits(float f) {
  _Float16 h = static_cast<_Float16>(f);
  uint16_t u;
  std::memcpy(&u, &h, 2);
  return u;
}
inline float f16Value(uint16_t u) {
  _Float16 h;
  std::memcpy(&h, &u, 2);
  return static_cast<float>(h);
}

/// Host bytes of `v` in `t`.
inline std::vector<uint8_t> encode(DType t, const std::vector<double>& v) {
  std::vector<uint8_t> b(v.size() * byteSize(t));
  for (size_t i = 0; i < v.size(); ++i) {
    uint8_t* p = b.data() + i * byteSize(t);
    switch (t) {
      case DType::F32: {
        float f = float(v[i]);
        std::memcpy(p, &f, 4);
        break;
      }
      case DType::F64: std::memcpy(p, &v[i], 8); break;
      case DType::F16: {
        uint16_t u = f16Bits(float(v[i]));
        std::memcpy(p, &u, 2);
        break;
      }
      case DType::BF16: {
        uint16_t u = bf16Bits(float(v[i]));
        std::memcpy(p, &u, 2);
        break;
      }
      case DType::I32: {
        int32_t x = int32_t(v[i]);
        std::memcpy(p, &x, 4);
        break;
      }
      case DType::I64: {
        int64_t x = int64_t(v[i]);
        std::memcpy(p, &x, 8);
        break;
      }
      case DType::I16: {
        int16_t x = int16_t(v[i]);
        std::memcpy(p, &x, 2);
        break;
      }
      default: {
        int8_t x = int8_t(v[i]);
        std::memcpy(p, &x, 1);
      }
    }
  }
  return b;
}

inline std::vector<double> decode(DType t, const std::vector<uint8_t>& b) {
  std::vector<double> v(b.size() / byteSize(t));
  for (size_t i = 0; i < v.size(); ++i) {
    const uint8_t* p = b.data() + i * byteSize(t);
    switch (t) {
      case DType::F32: {
        float f;
        std::memcpy(&f, p, 4);
        v[i] = f;
        break;
      }
      case DType::F64: std::memcpy(&v[i], p, 8); break;
      case DType::F16: {
        uint16_t u;
        std::memcpy(&u, p, 2);
        v[i] = f16Value(u);
        break;
      }
      case DType::BF16: {
        uint16_t u;
        std::memcpy(&u, p, 2);
        v[i] = bf16Value(u);
        break;
      }
      case DType::I32: {
        int32_t x;
        std::memcpy(&x, p, 4);
        v[i] = x;
        break;
      }
      case DType::I64: {
        int64_t x;
        std::memcpy(&x, p, 8);
        v[i] = double(x);
        break;
      }
      case DType::I16: {
        int16_t x;
        std::memcpy(&x, p, 2);
        v[i] = x;
        break;
      }
      default: {
        int8_t x;
        std::memcpy(&x, p, 1);
        v[i] = x;
      }
    }
  }
  return v;
}

inline Buffer upload(const Communicator& c, DType t, const std::vector<double>& v) {
  Buffer b = c.device().alloc(t, v.size());
  auto bytes = encode(t, v);
  b.copyFromHost(bytes.data(), bytes.size());
  return b;
}

inline std::vector<double> download(const Buffer& b) {
  std::vector<uint8_t> bytes(b.bytes());
  b.copyToHost(bytes.data(), bytes.size());
  return decode(b.dtype(), bytes);
}

/// Rank r's element i: a small integer; products use {-1, 1, 2} (no zero).
inline double value(int rank, size_t i, ReduceOp op) {
  if (op == ReduceOp::Prod) {
    static const double kProd[] = {1, 2, -1};
    return kProd[(size_t(rank) * 5 + i) % 3];
  }
  return double(int((size_t(rank) + 1) * (i % 7 + 1) % 9) - 4);
}

inline double combine(ReduceOp op, double a, double b) {
  switch (op) {
    case ReduceOp::Sum: return a + b;
    case ReduceOp::Prod: return a * b;
    case ReduceOp::Max: return std::max(a, b);
    case ReduceOp::Min: return std::min(a, b);
  }
  return a;
}

inline std::string compare(const std::vector<double>& got, const std::vector<double>& want, const std::string& what) {
  if (got.size() != want.size())
    return what + ": " + std::to_string(got.size()) + " values, want " + std::to_string(want.size());
  for (size_t i = 0; i < got.size(); ++i)
    if (got[i] != want[i])
      return what + ": element " + std::to_string(i) + " is " + std::to_string(got[i]) + ", want " +
             std::to_string(want[i]);
  return {};
}

inline void sync(const Stream& s) {
  if (s) s.synchronize();
}

inline std::string allReduce(const Communicator& c, DType t, ReduceOp op, size_t n, bool inPlace, const Stream& s) {
  const int P = c.size(), r = c.rank();
  std::vector<double> mine(n), want(n);
  for (size_t i = 0; i < n; ++i) {
    mine[i] = value(r, i, op);
    want[i] = value(0, i, op);
    for (int q = 1; q < P; ++q) want[i] = combine(op, want[i], value(q, i, op));
  }
  Buffer send = upload(c, t, mine);
  Buffer recv = inPlace ? send : c.device().alloc(t, n);
  c.allReduce(send, recv, op, s);
  sync(s);
  return compare(download(recv), want,
                 std::string("all_reduce ") + name(t) + " " + rt::name(op) + (inPlace ? " in place" : ""));
}

inline std::string allGather(const Communicator& c, size_t n, bool inPlace, const Stream& s) {
  const int P = c.size(), r = c.rank();
  std::vector<double> want;
  for (int q = 0; q < P; ++q)
    for (size_t i = 0; i < n; ++i) want.push_back(q * 100 + double(i));
  std::vector<double> mine(want.begin() + r * ptrdiff_t(n), want.begin() + (r + 1) * ptrdiff_t(n));
  if (inPlace) {
    std::vector<double> init(size_t(P) * n, -7);
    std::copy(mine.begin(), mine.end(), init.begin() + r * ptrdiff_t(n));
    Buffer all = upload(c, DType::F32, init);
    c.allGather(BufferView(all, size_t(r) * n, n), all, s);
    sync(s);
    return compare(download(all), want, "all_gather in place");
  }
  Buffer send = upload(c, DType::F32, mine), recv = c.device().alloc(DType::F32, size_t(P) * n);
  c.allGather(send, recv, s);
  sync(s);
  return compare(download(recv), want, "all_gather");
}

inline std::string reduceScatter(const Communicator& c, DType t, size_t n, const Stream& s) {
  const int P = c.size(), r = c.rank();
  std::vector<double> mine(size_t(P) * n), want(n, 0);
  for (size_t i = 0; i < mine.size(); ++i) mine[i] = value(r, i, ReduceOp::Sum);
  for (size_t i = 0; i < n; ++i)
    for (int q = 0; q < P; ++q) want[i] += value(q, size_t(r) * n + i, ReduceOp::Sum);
  Buffer send = upload(c, t, mine), recv = c.device().alloc(t, n);
  c.reduceScatter(send, recv, ReduceOp::Sum, s);
  sync(s);
  std::string e = compare(download(recv), want, std::string("reduce_scatter ") + name(t));
  if (!e.empty()) return e;
  // In place: the result lands on this rank's block of the input.
  Buffer both = upload(c, t, mine);
  c.reduceScatter(both, BufferView(both, size_t(r) * n, n), ReduceOp::Sum, s);
  sync(s);
  std::vector<double> got = download(both);
  return compare(std::vector<double>(got.begin() + r * ptrdiff_t(n), got.begin() + (r + 1) * ptrdiff_t(n)), want,
                 std::string("reduce_scatter in place ") + name(t));
}

inline std::string broadcast(const Communicator& c, size_t n, const Stream& s) {
  for (int root = 0; root < c.size(); ++root) {
    std::vector<double> mine(n), want(n);
    for (size_t i = 0; i < n; ++i) {
      mine[i] = c.rank() * 1000 + double(i);
      want[i] = root * 1000 + double(i);
    }
    Buffer b = upload(c, DType::I32, mine);
    c.broadcast(b, root, s);
    sync(s);
    if (auto e = compare(download(b), want, "broadcast from rank " + std::to_string(root)); !e.empty()) return e;
  }
  return {};
}

/// Per-peer counts: rank r sends (r + p) % 3 + 1 elements to rank p (so
/// what p expects from r is the same formula), each naming its source,
/// destination and position.
inline std::string allToAll(const Communicator& c, const Stream& s) {
  const int P = c.size(), r = c.rank();
  auto count = [](int a, int b) { return size_t((a + b) % 3 + 1); };
  std::vector<size_t> sc(static_cast<size_t>(P)), rc(static_cast<size_t>(P));
  std::vector<double> mine, want;
  for (int p = 0; p < P; ++p) {
    sc[size_t(p)] = count(r, p);
    rc[size_t(p)] = count(p, r);
    for (size_t j = 0; j < sc[size_t(p)]; ++j) mine.push_back(r * 100 + p * 10 + double(j));
    for (size_t j = 0; j < rc[size_t(p)]; ++j) want.push_back(p * 100 + r * 10 + double(j));
  }
  Buffer send = upload(c, DType::I16, mine), recv = c.device().alloc(DType::I16, want.size() + 3);
  c.allToAll(send, sc, recv, rc, s);
  sync(s);
  std::vector<double> got = download(recv);
  got.resize(want.size());
  return compare(got, want, "all_to_all with per-peer counts");
}

/// A ring in one group: every rank sends to the next and receives from the
/// previous (without the group, with large messages, every send would wait
/// for a receive that is never posted).
inline std::string ring(const Communicator& c, size_t n, const Stream& s) {
  const int P = c.size(), r = c.rank();
  std::vector<double> mine(n), want(n);
  for (size_t i = 0; i < n; ++i) {
    mine[i] = r * 7 + double(i % 50);
    want[i] = ((r + P - 1) % P) * 7 + double(i % 50);
  }
  Buffer out = upload(c, DType::F64, mine), in = c.device().alloc(DType::F64, n);
  Communicator::groupStart();
  c.send(out, (r + 1) % P, s);
  c.recv(in, (r + P - 1) % P, s);
  Communicator::groupEnd();
  sync(s);
  return compare(download(in), want, "send / recv ring");
}

/// Everything above, on `s` (null: synchronous calls).
inline std::string all(const Communicator& c, const Stream& s, size_t n = 1000) {
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::I32})
    for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Max, ReduceOp::Min})
      if (auto e = allReduce(c, t, op, n, false, s); !e.empty()) return e;
  for (DType t : {DType::F64, DType::I64})
    if (auto e = allReduce(c, t, ReduceOp::Sum, n, false, s); !e.empty()) return e;
  if (auto e = allReduce(c, DType::F32, ReduceOp::Sum, n, true, s); !e.empty()) return e;
  if (auto e = allReduce(c, DType::F32, ReduceOp::Sum, 0, false, s); !e.empty()) return e;
  if (auto e = allGather(c, 5, false, s); !e.empty()) return e;
  if (auto e = allGather(c, 5, true, s); !e.empty()) return e;
  for (DType t : {DType::F32, DType::BF16})
    if (auto e = reduceScatter(c, t, 4, s); !e.empty()) return e;
  if (auto e = broadcast(c, 3, s); !e.empty()) return e;
  if (auto e = allToAll(c, s); !e.empty()) return e;
  if (auto e = ring(c, n, s); !e.empty()) return e;
  return {};
}

}  // namespace tessera::collcheck
