// Little-endian, length-prefixed encoding for the persistent cache's files
// (codegen/cache/). A Reader never reads past its buffer: a short buffer
// makes ok() false and every later read return zero or empty. Private to
// codegen.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace tessera::codegen::cache {

class Writer {
 public:
  void u8(uint8_t v) { out_.push_back(static_cast<char>(v)); }
  void u32(uint32_t v) { le(v, 4); }
  void u64(uint64_t v) { le(v, 8); }
  void bytes(const void* p, size_t n) { out_.append(static_cast<const char*>(p), n); }
  void str(std::string_view s) {
    u64(s.size());
    out_.append(s.data(), s.size());
  }
  std::string& data() { return out_; }

 private:
  void le(uint64_t v, int n) {
    for (int i = 0; i < n; ++i) out_.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  }
  std::string out_;
};

class Reader {
 public:
  Reader(const char* p, size_t n) : p_(p), n_(n) {}
  explicit Reader(std::string_view s) : Reader(s.data(), s.size()) {}
  uint8_t u8() { return static_cast<uint8_t>(le(1)); }
  uint32_t u32() { return static_cast<uint32_t>(le(4)); }
  uint64_t u64() { return le(8); }
  /// `n` raw bytes (a view into the buffer); empty once past the end.
  std::string_view bytes(size_t n) {
    if (!take(n)) return {};
    std::string_view r(p_ + at_ - n, n);
    return r;
  }
  std::string str() { return std::string(bytes(u64Bounded())); }
  bool ok() const { return ok_; }
  size_t offset() const { return at_; }
  size_t left() const { return ok_ ? n_ - at_ : 0; }

 private:
  // A length read from the buffer: never more than what is left.
  size_t u64Bounded() {
    uint64_t v = u64();
    if (v > left()) {
      ok_ = false;
      return 0;
    }
    return static_cast<size_t>(v);
  }
  bool take(size_t n) {
    if (!ok_ || n > n_ - at_) {
      ok_ = false;
      return false;
    }
    at_ += n;
    return true;
  }
  uint64_t le(int n) {
    if (!take(static_cast<size_t>(n))) return 0;
    uint64_t v = 0;
    for (int i = 0; i < n; ++i) v |= uint64_t(static_cast<unsigned char>(p_[at_ - n + i])) << (8 * i);
    return v;
  }
  const char* p_;
  size_t n_;
  size_t at_ = 0;
  bool ok_ = true;
};

}  // namespace tessera::codegen::cache
