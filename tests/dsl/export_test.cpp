// Ahead-of-time export through the API (tessera/Export.h): the files each
// target gets, what the generated header embeds, and the refusals. The
// exported code run by a program linked with the runtime alone is
// tests/aot_test.sh.
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <catch2/catch.hpp>
#include <unistd.h>

#include "tessera/tessera.h"

namespace ts = tessera;
namespace fs = std::filesystem;
using Catch::Matchers::Contains;

namespace {
ts::Kernel saxpy() {
  return ts::kernel("saxpy", {"y", "x", "a", "n"},
                    [](ts::Ptr<float> y, ts::Ptr<const float> x, ts::Float a, ts::Int n) {
                      auto i = ts::program_id(0) * 128 + ts::arange(128);
                      auto m = i < n;
                      ts::store(y + i, a * ts::load(x + i, m) + ts::load(y + i, m), m);
                    });
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct TempDir {
  fs::path path = fs::temp_directory_path() / ("tessera_export_test." + std::to_string(getpid()));
  TempDir() { fs::remove_all(path); }
  ~TempDir() { fs::remove_all(path); }
};
}  // namespace

TEST_CASE("a cpu export writes an object and a header with the signature and ISA", "[dsl][export]") {
  TempDir dir;
  ts::ExportResult r = ts::exportKernel(saxpy(), ts::Target::parse("cpu:x86-64-v3"), dir.path.string());
  REQUIRE(r.files.size() == 2);
  CHECK(r.files[0] == (dir.path / "saxpy.o").string());
  CHECK(r.header == (dir.path / "saxpy.h").string());
  CHECK(r.files[1] == r.header);
  CHECK(r.skipped.empty());
  CHECK(slurp(r.files[0]).substr(0, 4) ==
        "\x7f"
        "ELF");
  std::string h = slurp(r.header);
  CHECK_THAT(h, Contains("// saxpy(ptr<f32> y, ptr<f32> x, f32 a, i32 n) for cpu:x86-64-v3"));
  CHECK_THAT(h, Contains("extern \"C\" void tessera_entry_saxpy("));
  CHECK_THAT(h, Contains("kHostCpu = \"x86-64-v3\""));
  CHECK_THAT(h, Contains("\"avx2\""));
  CHECK_THAT(h, Contains("\"fma\""));
  CHECK(h.find("avx512") == std::string::npos);
  CHECK_THAT(h, Contains("tessera::rt::Buffer& y, const tessera::rt::Buffer& x, float a, int32_t n,"));
  CHECK_THAT(h, Contains("s.args.push_back({tessera::ArgSpec::Kind::Scalar, tessera::DType::F32, \"a\"});"));
}

TEST_CASE("an nvptx export writes the compile's PTX and embeds it", "[dsl][export]") {
  TempDir dir;
  ts::Target t = ts::Target::parse("nvptx:sm_80");
  ts::ExportResult r = ts::exportKernel(saxpy(), t, dir.path.string());
  std::string ptx = ts::compile(saxpy(), t).dump(ts::Stage::PTX);
  CHECK(slurp((dir.path / "saxpy.ptx").string()) == ptx);
  // The cubin is there exactly when ptxas is (a note otherwise).
  CHECK(fs::exists(dir.path / "saxpy.cubin") == r.skipped.empty());
  std::string h = slurp(r.header);
  CHECK_THAT(h, Contains("tessera::KernelBinary::Format::PTX"));
  CHECK_THAT(h, Contains("b.symbol = \"saxpy\";"));
  CHECK(h.find("HostFeatures") == std::string::npos);
}

TEST_CASE("exports that cannot be made are refused with a UsageError", "[dsl][export]") {
  TempDir dir;
  CHECK_THROWS_WITH(ts::exportKernel(saxpy(), ts::Target::parse("emu:nvptx:sm_80"), dir.path.string()),
                    Contains("runs only inside the SIMT emulator"));
  ts::CompileOptions checked;
  checked.checkBounds = true;
  CHECK_THROWS_AS(ts::exportKernel(saxpy(), ts::Target::cpu(), dir.path.string(), checked), ts::UsageError);
  fs::create_directories(dir.path);
  std::ofstream(dir.path / "file") << "x";
  CHECK_THROWS_WITH(ts::exportKernel(saxpy(), ts::Target::cpu(), (dir.path / "file" / "sub").string()),
                    Contains("cannot create the directory"));
}

TEST_CASE("an export's stem is a usable C++ name", "[dsl][export]") {
  CHECK(ts::codegen::exportStem("vector_add") == "vector_add");
  CHECK(ts::codegen::exportStem("my-kernel.v2") == "my_kernel_v2");
  CHECK(ts::codegen::exportStem("2d") == "k_2d");
  CHECK(ts::codegen::exportStem("launch") == "launch_kernel");  // the launcher's member
  CHECK(ts::codegen::exportStem("int") == "int_kernel");
}
