// A small JSON value, writer and reader for the perf tools' reports
// (benchmark results, the remembered host peaks). Private to perf/.
// The reader is strict (RFC 8259; no comments, no trailing commas), bounded
// in depth, and reports the line and column of the first error.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace tessera::perf::json {

class Value {
 public:
  enum class Kind { Null, Bool, Number, String, Array, Object };
  Value() = default;
  Value(std::nullptr_t) {}                                           // NOLINT
  Value(bool b) : kind_(Kind::Bool), bool_(b) {}                     // NOLINT
  Value(double d) : kind_(Kind::Number), num_(d) {}                  // NOLINT
  Value(int v) : Value(static_cast<double>(v)) {}                    // NOLINT
  Value(int64_t v) : Value(static_cast<double>(v)) {}                // NOLINT
  Value(uint64_t v) : Value(static_cast<double>(v)) {}               // NOLINT
  Value(unsigned v) : Value(static_cast<double>(v)) {}               // NOLINT
  Value(std::string s) : kind_(Kind::String), str_(std::move(s)) {}  // NOLINT
  Value(const char* s) : Value(std::string(s)) {}                    // NOLINT
  static Value array() {
    Value v;
    v.kind_ = Kind::Array;
    return v;
  }
  static Value object() {
    Value v;
    v.kind_ = Kind::Object;
    return v;
  }

  Kind kind() const { return kind_; }
  bool isNull() const { return kind_ == Kind::Null; }
  bool isNumber() const { return kind_ == Kind::Number; }
  bool isString() const { return kind_ == Kind::String; }
  bool isArray() const { return kind_ == Kind::Array; }
  bool isObject() const { return kind_ == Kind::Object; }
  bool asBool() const { return bool_; }
  double asNumber() const { return num_; }
  const std::string& asString() const { return str_; }
  const std::vector<Value>& items() const { return items_; }
  /// Object members in insertion order.
  const std::vector<std::pair<std::string, Value>>& members() const { return members_; }

  Value& push(Value v) {
    items_.push_back(std::move(v));
    return items_.back();
  }
  /// Sets (or replaces) member `key` of an object.
  Value& set(const std::string& key, Value v);
  /// Member `key`, or nullptr.
  const Value* find(const std::string& key) const;

 private:
  Kind kind_ = Kind::Null;
  bool bool_ = false;
  double num_ = 0;
  std::string str_;
  std::vector<Value> items_;
  std::vector<std::pair<std::string, Value>> members_;
};

/// Writes `v` indented by two spaces per level; arrays of numbers stay on
/// one line. Numbers are written with 17 significant digits (round trip);
/// non-finite numbers become null.
std::string write(const Value& v);
/// Parses `text`; throws UsageError "SOURCE:LINE:COL: WHAT" when malformed.
Value parse(const std::string& text, const std::string& source);

}  // namespace tessera::perf::json
