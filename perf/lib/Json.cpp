#include "Json.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "tessera/support/Error.h"

namespace tessera::perf::json {

Value& Value::set(const std::string& key, Value v) {
  for (auto& m : members_)
    if (m.first == key) return m.second = std::move(v);
  members_.emplace_back(key, std::move(v));
  return members_.back().second;
}

const Value* Value::find(const std::string& key) const {
  for (const auto& m : members_)
    if (m.first == key) return &m.second;
  return nullptr;
}

namespace {

void writeString(std::string& out, const std::string& s) {
  out += '"';
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += '"';
}

void writeNumber(std::string& out, double d) {
  if (!std::isfinite(d)) {
    out += "null";
    return;
  }
  if (d == std::floor(d) && std::fabs(d) < 1e15) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.0f", d);
    out += buf;
    return;
  }
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", d);
  out += buf;
}

void writeValue(std::string& out, const Value& v, int indent) {
  const std::string pad(static_cast<size_t>(indent) * 2, ' '), padIn(static_cast<size_t>(indent + 1) * 2, ' ');
  switch (v.kind()) {
    case Value::Kind::Null: out += "null"; return;
    case Value::Kind::Bool: out += v.asBool() ? "true" : "false"; return;
    case Value::Kind::Number: writeNumber(out, v.asNumber()); return;
    case Value::Kind::String: writeString(out, v.asString()); return;
    case Value::Kind::Array: {
      if (v.items().empty()) {
        out += "[]";
        return;
      }
      bool flat = true;
      for (const Value& i : v.items()) flat = flat && !i.isArray() && !i.isObject();
      out += flat ? "[" : "[\n";
      for (size_t i = 0; i < v.items().size(); ++i) {
        if (!flat) out += padIn;
        writeValue(out, v.items()[i], indent + 1);
        if (i + 1 < v.items().size()) out += flat ? ", " : ",\n";
      }
      out += flat ? "]" : "\n" + pad + "]";
      return;
    }
    case Value::Kind::Object: {
      if (v.members().empty()) {
        out += "{}";
        return;
      }
      out += "{\n";
      for (size_t i = 0; i < v.members().size(); ++i) {
        out += padIn;
        writeString(out, v.members()[i].first);
        out += ": ";
        writeValue(out, v.members()[i].second, indent + 1);
        out += i + 1 < v.members().size() ? ",\n" : "\n";
      }
      out += pad + "}";
      return;
    }
  }
}

constexpr int kMaxDepth = 64;

class Parser {
 public:
  Parser(const std::string& text, const std::string& source) : t_(text), source_(source) {}

  Value run() {
    Value v = value(0);
    skipSpace();
    if (p_ != t_.size()) fail("unexpected text after the JSON value");
    return v;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    size_t line = 1, col = 1;
    for (size_t i = 0; i < p_ && i < t_.size(); ++i) {
      if (t_[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    throw UsageError(source_ + ":" + std::to_string(line) + ":" + std::to_string(col) + ": " + what);
  }

  void skipSpace() {
    while (p_ < t_.size() && (t_[p_] == ' ' || t_[p_] == '\t' || t_[p_] == '\n' || t_[p_] == '\r')) ++p_;
  }

  bool consume(const char* word) {
    size_t n = std::strlen(word);
    if (t_.compare(p_, n, word) != 0) return false;
    p_ += n;
    return true;
  }

  Value value(int depth) {
    if (depth > kMaxDepth) fail("nested deeper than " + std::to_string(kMaxDepth) + " levels");
    skipSpace();
    if (p_ >= t_.size()) fail("unexpected end of input, expected a value");
    char c = t_[p_];
    if (c == '{') return object(depth);
    if (c == '[') return array(depth);
    if (c == '"') return Value(string());
    if (consume("true")) return Value(true);
    if (consume("false")) return Value(false);
    if (consume("null")) return Value();
    if (c == '-' || (c >= '0' && c <= '9')) return Value(number());
    fail(std::string("unexpected character '") + c + "', expected a value");
  }

  Value object(int depth) {
    ++p_;  // {
    Value v = Value::object();
    skipSpace();
    if (p_ < t_.size() && t_[p_] == '}') {
      ++p_;
      return v;
    }
    while (true) {
      skipSpace();
      if (p_ >= t_.size() || t_[p_] != '"') fail("expected a member name in double quotes");
      std::string key = string();
      skipSpace();
      if (p_ >= t_.size() || t_[p_] != ':') fail("expected ':' after the member name");
      ++p_;
      v.set(key, value(depth + 1));
      skipSpace();
      if (p_ < t_.size() && t_[p_] == ',') {
        ++p_;
        continue;
      }
      if (p_ < t_.size() && t_[p_] == '}') {
        ++p_;
        return v;
      }
      fail("expected ',' or '}' in an object");
    }
  }

  Value array(int depth) {
    ++p_;  // [
    Value v = Value::array();
    skipSpace();
    if (p_ < t_.size() && t_[p_] == ']') {
      ++p_;
      return v;
    }
    while (true) {
      v.push(value(depth + 1));
      skipSpace();
      if (p_ < t_.size() && t_[p_] == ',') {
        ++p_;
        continue;
      }
      if (p_ < t_.size() && t_[p_] == ']') {
        ++p_;
        return v;
      }
      fail("expected ',' or ']' in an array");
    }
  }

  std::string string() {
    ++p_;  // "
    std::string s;
    while (true) {
      if (p_ >= t_.size()) fail("unterminated string");
      char c = t_[p_++];
      if (c == '"') return s;
      if (static_cast<unsigned char>(c) < 0x20) fail("control character in a string");
      if (c != '\\') {
        s += c;
        continue;
      }
      if (p_ >= t_.size()) fail("unterminated string");
      char e = t_[p_++];
      switch (e) {
        case '"': s += '"'; break;
        case '\\': s += '\\'; break;
        case '/': s += '/'; break;
        case 'b': s += '\b'; break;
        case 'f': s += '\f'; break;
        case 'n': s += '\n'; break;
        case 'r': s += '\r'; break;
        case 't': s += '\t'; break;
        case 'u': {
          if (p_ + 4 > t_.size()) fail("truncated \\u escape");
          unsigned cp = 0;
          for (int i = 0; i < 4; ++i) {
            char h = t_[p_++];
            cp <<= 4;
            if (h >= '0' && h <= '9')
              cp |= static_cast<unsigned>(h - '0');
            else if (h >= 'a' && h <= 'f')
              cp |= static_cast<unsigned>(h - 'a' + 10);
            else if (h >= 'A' && h <= 'F')
              cp |= static_cast<unsigned>(h - 'A' + 10);
            else
              fail("bad hex digit in a \\u escape");
          }
          // UTF-8 (surrogate pairs are kept as two code units: names here are ASCII).
          if (cp < 0x80) {
            s += static_cast<char>(cp);
          } else if (cp < 0x800) {
            s += static_cast<char>(0xc0 | (cp >> 6));
            s += static_cast<char>(0x80 | (cp & 0x3f));
          } else {
            s += static_cast<char>(0xe0 | (cp >> 12));
            s += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
            s += static_cast<char>(0x80 | (cp & 0x3f));
          }
          break;
        }
        default: fail(std::string("unknown escape '\\") + e + "'");
      }
    }
  }

  double number() {
    size_t start = p_;
    if (t_[p_] == '-') ++p_;
    auto digits = [&] {
      size_t s = p_;
      while (p_ < t_.size() && t_[p_] >= '0' && t_[p_] <= '9') ++p_;
      return p_ - s;
    };
    if (digits() == 0) fail("expected digits in a number");
    if (p_ < t_.size() && t_[p_] == '.') {
      ++p_;
      if (digits() == 0) fail("expected digits after '.'");
    }
    if (p_ < t_.size() && (t_[p_] == 'e' || t_[p_] == 'E')) {
      ++p_;
      if (p_ < t_.size() && (t_[p_] == '+' || t_[p_] == '-')) ++p_;
      if (digits() == 0) fail("expected digits in an exponent");
    }
    return std::strtod(t_.substr(start, p_ - start).c_str(), nullptr);
  }

  const std::string& t_;
  const std::string& source_;
  size_t p_ = 0;
};

}  // namespace

std::string write(const Value& v) {
  std::string out;
  writeValue(out, v, 0);
  out += '\n';
  return out;
}

Value parse(const std::string& text, const std::string& source) { return Parser(text, source).run(); }

}  // namespace tessera::perf::json
