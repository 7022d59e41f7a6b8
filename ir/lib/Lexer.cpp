// The lexer of the textual tile IR: identifiers, value and kernel names,
// numbers (decimal and hex floats), quoted strings and punctuation.
#include "Lexer.h"

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>

namespace tessera::ir::detail {

const char* tokDesc(Tok t) {
  switch (t) {
    case Tok::Eof: return "end of input";
    case Tok::Ident: return "identifier";
    case Tok::Percent: return "value name";
    case Tok::At: return "kernel name";
    case Tok::Int: return "integer";
    case Tok::Float: return "float";
    case Tok::String: return "string";
    case Tok::LParen: return "'('";
    case Tok::RParen: return "')'";
    case Tok::LBrace: return "'{'";
    case Tok::RBrace: return "'}'";
    case Tok::LBracket: return "'['";
    case Tok::RBracket: return "']'";
    case Tok::Less: return "'<'";
    case Tok::Greater: return "'>'";
    case Tok::Comma: return "','";
    case Tok::Colon: return "':'";
    case Tok::Equal: return "'='";
    case Tok::Caret: return "'^'";
    case Tok::Minus: return "'-'";
  }
  return "token";
}

bool identStart(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool identChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }
bool isDigit(char c) { return c >= '0' && c <= '9'; }
bool isHex(char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; }

Token Lexer::next() {
  skipTrivia();
  Token t;
  t.line = line_;
  t.col = col_;
  if (pos_ >= s_.size()) return t;
  char c = s_[pos_];
  auto single = [&](Tok k) {
    bump();
    t.kind = k;
    return t;
  };
  switch (c) {
    case '(': return single(Tok::LParen);
    case ')': return single(Tok::RParen);
    case '{': return single(Tok::LBrace);
    case '}': return single(Tok::RBrace);
    case '[': return single(Tok::LBracket);
    case ']': return single(Tok::RBracket);
    case '<': return single(Tok::Less);
    case '>': return single(Tok::Greater);
    case ',': return single(Tok::Comma);
    case ':': return single(Tok::Colon);
    case '=': return single(Tok::Equal);
    case '^': return single(Tok::Caret);
    default: break;
  }
  if (c == '%') {
    bump();
    if (pos_ >= s_.size() || !identChar(s_[pos_])) error(t.line, t.col, "expected a value name after '%'");
    t.kind = Tok::Percent;
    while (pos_ < s_.size() && identChar(s_[pos_])) t.text += bump();
    return t;
  }
  if (c == '@') {
    bump();
    t.kind = Tok::At;
    if (pos_ < s_.size() && s_[pos_] == '"') {
      t.text = lexString(t);
      return t;
    }
    if (pos_ >= s_.size() || !identChar(s_[pos_])) error(t.line, t.col, "expected a kernel name after '@'");
    while (pos_ < s_.size() && identChar(s_[pos_])) t.text += bump();
    return t;
  }
  if (c == '"') {
    t.kind = Tok::String;
    t.text = lexString(t);
    return t;
  }
  if (isDigit(c) || (c == '-' && pos_ + 1 < s_.size() && isDigit(s_[pos_ + 1]))) return lexNumber(t);
  if (c == '-') return single(Tok::Minus);
  if (identStart(c)) {
    t.kind = Tok::Ident;
    while (pos_ < s_.size() && identChar(s_[pos_])) t.text += bump();
    return t;
  }
  if (std::isprint(static_cast<unsigned char>(c)))
    error(t.line, t.col, std::string("unexpected character '") + c + "'");
  error(t.line, t.col, "unexpected byte " + std::to_string(static_cast<unsigned char>(c)));
}

/// Reads the dimension prefix of a tile or buffer type, "64x32x", right at
/// the current position (the lexer cannot tokenize "64x32xf32" usefully).
std::vector<int64_t> Lexer::lexDims() {
  skipTrivia();
  std::vector<int64_t> dims;
  while (pos_ < s_.size() && isDigit(s_[pos_])) {
    uint32_t l = line_, c = col_;
    int64_t v = 0;
    while (pos_ < s_.size() && isDigit(s_[pos_])) {
      int d = bump() - '0';
      if (v > (std::numeric_limits<int64_t>::max() - d) / 10) error(l, c, "dimension is too large");
      v = v * 10 + d;
    }
    if (pos_ >= s_.size() || s_[pos_] != 'x') error(line_, col_, "expected 'x' after a dimension in a shape");
    bump();
    dims.push_back(v);
  }
  if (dims.empty()) error(line_, col_, "expected a shape such as 64x32x before the element type");
  return dims;
}

char Lexer::bump() {
  char c = s_[pos_++];
  if (c == '\n') {
    ++line_;
    col_ = 1;
  } else {
    ++col_;
  }
  return c;
}

void Lexer::skipTrivia() {
  while (pos_ < s_.size()) {
    char c = s_[pos_];
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      bump();
    } else if (c == '/' && pos_ + 1 < s_.size() && s_[pos_ + 1] == '/') {
      while (pos_ < s_.size() && s_[pos_] != '\n') bump();
    } else {
      break;
    }
  }
}

std::string Lexer::lexString(const Token& t) {
  bump();  // opening quote
  std::string r;
  while (true) {
    if (pos_ >= s_.size() || s_[pos_] == '\n') error(t.line, t.col, "unterminated string");
    char c = bump();
    if (c == '"') return r;
    if (c != '\\') {
      r += c;
      continue;
    }
    if (pos_ >= s_.size()) error(t.line, t.col, "unterminated string");
    char e = s_[pos_];
    if (e == '"' || e == '\\') {
      r += bump();
    } else if (pos_ + 1 < s_.size() && isHex(e) && isHex(s_[pos_ + 1])) {
      char h[3] = {bump(), bump(), 0};
      r += static_cast<char>(std::strtol(h, nullptr, 16));
    } else {
      error(line_, col_, "invalid escape in string (expected \\\", \\\\ or two hex digits)");
    }
  }
}

Token Lexer::lexNumber(Token& t) {
  size_t start = pos_;
  if (s_[pos_] == '-') bump();
  bool isFloat = false;
  if (s_[pos_] == '0' && pos_ + 1 < s_.size() && (s_[pos_ + 1] == 'x' || s_[pos_ + 1] == 'X')) {
    // Hex float as written by %a: 0x1.8p+3. A hex literal needs the exponent.
    bump();
    bump();
    bool digits = false;
    while (pos_ < s_.size() && isHex(s_[pos_])) {
      bump();
      digits = true;
    }
    if (pos_ < s_.size() && s_[pos_] == '.') {
      bump();
      while (pos_ < s_.size() && isHex(s_[pos_])) {
        bump();
        digits = true;
      }
    }
    if (!digits || pos_ >= s_.size() || (s_[pos_] != 'p' && s_[pos_] != 'P'))
      error(t.line, t.col, "malformed hex float (expected e.g. 0x1.8p+3)");
    bump();
    if (pos_ < s_.size() && (s_[pos_] == '+' || s_[pos_] == '-')) bump();
    if (pos_ >= s_.size() || !isDigit(s_[pos_])) error(t.line, t.col, "malformed hex float exponent");
    while (pos_ < s_.size() && isDigit(s_[pos_])) bump();
    isFloat = true;
  } else {
    while (pos_ < s_.size() && isDigit(s_[pos_])) bump();
    if (pos_ < s_.size() && s_[pos_] == '.') {
      isFloat = true;
      bump();
      while (pos_ < s_.size() && isDigit(s_[pos_])) bump();
    }
    if (pos_ < s_.size() && (s_[pos_] == 'e' || s_[pos_] == 'E')) {
      isFloat = true;
      bump();
      if (pos_ < s_.size() && (s_[pos_] == '+' || s_[pos_] == '-')) bump();
      if (pos_ >= s_.size() || !isDigit(s_[pos_])) error(t.line, t.col, "malformed float exponent");
      while (pos_ < s_.size() && isDigit(s_[pos_])) bump();
    }
  }
  if (pos_ < s_.size() && identChar(s_[pos_]))
    error(line_, col_, std::string("unexpected '") + s_[pos_] + "' in a number");
  t.text = std::string(s_.substr(start, pos_ - start));
  errno = 0;
  if (isFloat) {
    t.kind = Tok::Float;
    t.fval = std::strtod(t.text.c_str(), nullptr);
    if (errno == ERANGE && std::isinf(t.fval)) error(t.line, t.col, "float literal " + t.text + " is out of range");
  } else {
    t.kind = Tok::Int;
    t.ival = std::strtoll(t.text.c_str(), nullptr, 10);
    if (errno == ERANGE) error(t.line, t.col, "integer literal " + t.text + " does not fit in 64 bits");
  }
  return t;
}

}  // namespace tessera::ir::detail
