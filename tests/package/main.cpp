// A user's program: traces a kernel, runs it on the CPU and on the emulated
// NVIDIA GPU, and checks the result against plain C++.
#include <cmath>
#include <cstdio>
#include <vector>

#include "tessera/tessera.h"

namespace ts = tessera;

int main() {
  ts::Kernel k = ts::kernel("saxpy", [](ts::Ptr<float> y, ts::Ptr<const float> x, ts::Float a, ts::Int n) {
    auto i = ts::program_id(0) * 128 + ts::arange(128);
    auto m = i < n;
    ts::store(y + i, a * ts::load(x + i, m) + ts::load(y + i, m), m);
  });
  const int n = 1000;
  std::vector<float> x(n), y(n);
  for (int i = 0; i < n; ++i) x[i] = 0.5f * i, y[i] = 1.0f - i;
  int bad = 0;
  for (ts::Device dev : {ts::Device::cpu(), ts::Device::emulator("nvptx:sm_80")}) {
    ts::CompiledKernel c = ts::compile(k, dev);
    ts::Buffer dy = dev.upload(ts::DType::F32, y), dx = dev.upload(ts::DType::F32, x);
    c.launch({(n + 127) / 128}, dy, dx, 2.0f, n);
    std::vector<float> got = dy.read<float>();
    for (int i = 0; i < n; ++i)
      if (std::fabs(got[i] - (2.0f * x[i] + y[i])) > 1e-6f * std::fabs(2.0f * x[i] + y[i])) ++bad;
    std::printf("saxpy on %s: %s\n", dev.name().c_str(), bad ? "MISMATCH" : "OK");
  }
  return bad ? 1 : 0;
}
