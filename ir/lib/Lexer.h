// The lexer of the textual tile IR (not a public header): the tokens the
// parser reads, each with its line and column for the error messages.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/support/Error.h"

namespace tessera::ir::detail {

enum class Tok {
  Eof,
  Ident,
  Percent,
  At,
  Int,
  Float,
  String,
  LParen,
  RParen,
  LBrace,
  RBrace,
  LBracket,
  RBracket,
  Less,
  Greater,
  Comma,
  Colon,
  Equal,
  Caret,
  Minus,
};

const char* tokDesc(Tok t);

struct Token {
  Tok kind = Tok::Eof;
  std::string text;  // identifier / name / decoded string / number spelling
  int64_t ival = 0;
  double fval = 0;
  uint32_t line = 1, col = 1;
};

bool identStart(char c);
bool identChar(char c);
bool isDigit(char c);
bool isHex(char c);

class Lexer {
 public:
  Lexer(std::string_view text, const std::string& buffer) : s_(text), buffer_(buffer) {}

  [[noreturn]] void error(uint32_t line, uint32_t col, const std::string& msg) const {
    throw ParseError(buffer_ + ":" + std::to_string(line) + ":" + std::to_string(col) + ": " + msg);
  }

  struct State {
    size_t pos;
    uint32_t line, col;
  };
  State save() const { return {pos_, line_, col_}; }
  void restore(State st) {
    pos_ = st.pos;
    line_ = st.line;
    col_ = st.col;
  }

  Token next();

  /// Reads the dimension prefix of a tile or buffer type, "64x32x", right at
  /// the current position (the lexer cannot tokenize "64x32xf32" usefully).
  std::vector<int64_t> lexDims();

 private:
  char bump();
  void skipTrivia();
  std::string lexString(const Token& t);
  Token lexNumber(Token& t);

  std::string_view s_;
  const std::string& buffer_;
  size_t pos_ = 0;
  uint32_t line_ = 1, col_ = 1;
};

}  // namespace tessera::ir::detail
