// Parser for the textual tile IR: a hand-written lexer and a recursive-descent
// parser over the grammar the Printer writes:
//
//   module  := kernel*
//   kernel  := 'kernel' @name '(' [arg (',' arg)*] ')' [loc] '{' op* '}'
//   arg     := %name ':' type [attrs]
//   op      := [%name [':' N] '='] opname '(' [%v (',' %v)*] ')' [attrs]
//              [':' type (',' type)*] [loc] [region ['else' region]]
//   region  := '{' ['^' '(' [%name ':' type (',' ...)*] ')' ':'] op* '}'
//   attrs   := '{' [key '=' value (',' key '=' value)*] '}'
//   value   := int | float | inf | nan | -inf | -nan | ident | "string" | '[' ints ']'
//   loc     := 'loc' '(' "file" ':' line ':' col ')'
//
// Every malformed input ends in ParseError with "<buffer>:<line>:<col>: ...";
// nothing here may assert, abort or recurse without bound on garbage.
#include "tessera/ir/Parser.h"

#include <cerrno>
#include <cstdlib>
#include <limits>
#include <unordered_map>
#include <unordered_set>

#include "Lexer.h"
#include "tessera/support/Error.h"

namespace tessera::ir {
namespace {

using detail::isDigit;
using detail::Lexer;
using detail::Tok;
using detail::tokDesc;
using detail::Token;

// Nested regions recurse; garbage input must not overflow the stack.

class Parser {
 public:
  Parser(std::string_view text, const std::string& buffer) : lex_(text, buffer) { cur_ = lex_.next(); }

  std::unique_ptr<Module> parseModule() {
    auto m = std::make_unique<Module>();
    while (cur_.kind != Tok::Eof) {
      if (!isIdent("kernel")) errorHere("expected 'kernel', found " + describe(cur_));
      Token kw = cur_;
      auto f = parseKernel();
      if (m->lookup(f->name())) error(kw, "redefinition of kernel @" + f->name());
      m->functions.push_back(std::move(f));
    }
    return m;
  }

 private:
  // ---- token helpers -------------------------------------------------------
  [[noreturn]] void error(const Token& t, const std::string& msg) const { lex_.error(t.line, t.col, msg); }
  [[noreturn]] void errorHere(const std::string& msg) const { error(cur_, msg); }

  static std::string describe(const Token& t) {
    switch (t.kind) {
      case Tok::Ident: return "'" + t.text + "'";
      case Tok::Percent: return "'%" + t.text + "'";
      case Tok::At: return "'@" + t.text + "'";
      case Tok::Int:
      case Tok::Float: return "'" + t.text + "'";
      case Tok::String: return "a string";
      default: return tokDesc(t.kind);
    }
  }

  void advance() { cur_ = lex_.next(); }
  bool is(Tok k) const { return cur_.kind == k; }
  bool isIdent(const char* s) const { return cur_.kind == Tok::Ident && cur_.text == s; }
  Token expect(Tok k, const char* what) {
    if (cur_.kind != k) errorHere(std::string("expected ") + what + ", found " + describe(cur_));
    Token t = cur_;
    advance();
    return t;
  }
  bool accept(Tok k) {
    if (cur_.kind != k) return false;
    advance();
    return true;
  }

  // ---- values ----------------------------------------------------------------
  void define(const Token& name, Value* v) {
    if (!defined_.insert(name.text).second) error(name, "redefinition of value %" + name.text);
    scopes_.back()[name.text] = v;
  }
  Value* lookup(const Token& name) {
    for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
      auto f = it->find(name.text);
      if (f != it->end()) return f->second;
    }
    error(name, "use of undefined value %" + name.text);
  }

  // ---- types ---------------------------------------------------------------
  DType parseDType() {
    Token t = expect(Tok::Ident, "an element type");
    auto d = parseDType(t.text);
    if (!d) error(t, "unknown element type '" + t.text + "'");
    return *d;
  }
  static std::optional<DType> parseDType(const std::string& s) { return ::tessera::parseDType(s); }

  MemSpace parseSpace() {
    Token t = expect(Tok::Ident, "a memory space (global, shared, local)");
    if (t.text == "global") return MemSpace::Global;
    if (t.text == "shared") return MemSpace::Shared;
    if (t.text == "local") return MemSpace::Local;
    error(t, "unknown memory space '" + t.text + "' (expected global, shared or local)");
  }

  // Expects the current token to be '<' and reads the shape right after it
  // (or after the ',' of a buffer type): the lexer sits just past cur_.
  Shape shapeAfterCurrent() {
    Shape s = lex_.lexDims();
    advance();
    return s;
  }

  Type parseType() {
    if (!is(Tok::Ident)) errorHere("expected a type, found " + describe(cur_));
    Token t = cur_;
    if (auto d = parseDType(t.text)) {
      advance();
      return Type::scalar(*d);
    }
    if (t.text == "ptr") {
      advance();
      expect(Tok::Less, "'<' after 'ptr'");
      DType d = parseDType();
      expect(Tok::Comma, "',' in pointer type");
      MemSpace sp = parseSpace();
      expect(Tok::Greater, "'>' closing pointer type");
      return Type::ptr(d, sp);
    }
    if (t.text == "tile") {
      advance();
      if (!is(Tok::Less)) errorHere("expected '<' after 'tile', found " + describe(cur_));
      Shape shape = shapeAfterCurrent();
      Type elem;
      if (isIdent("ptr")) {
        elem = parseType();
      } else {
        elem = Type::scalar(parseDType());
      }
      expect(Tok::Greater, "'>' closing tile type");
      return Type::tile(elem, std::move(shape));
    }
    if (t.text == "buffer") {
      advance();
      expect(Tok::Less, "'<' after 'buffer'");
      MemSpace sp = parseSpace();
      if (!is(Tok::Comma)) errorHere("expected ',' in buffer type, found " + describe(cur_));
      Shape shape = shapeAfterCurrent();
      DType d = parseDType();
      expect(Tok::Greater, "'>' closing buffer type");
      return Type::buffer(d, sp, std::move(shape));
    }
    error(t, "unknown type '" + t.text + "'");
  }

  // ---- attributes and locations ---------------------------------------------
  Attr parseAttrValue() {
    if (is(Tok::Int)) {
      int64_t v = cur_.ival;
      advance();
      return v;
    }
    if (is(Tok::Float)) {
      double v = cur_.fval;
      advance();
      return v;
    }
    if (is(Tok::Minus)) {
      advance();
      if (isIdent("inf")) {
        advance();
        return -std::numeric_limits<double>::infinity();
      }
      if (isIdent("nan")) {
        advance();
        return -std::numeric_limits<double>::quiet_NaN();
      }
      errorHere("expected inf or nan after '-', found " + describe(cur_));
    }
    if (isIdent("inf")) {
      advance();
      return std::numeric_limits<double>::infinity();
    }
    if (isIdent("nan")) {
      advance();
      return std::numeric_limits<double>::quiet_NaN();
    }
    if (is(Tok::Ident) || is(Tok::String)) {
      std::string s = cur_.text;
      advance();
      return s;
    }
    if (accept(Tok::LBracket)) {
      std::vector<int64_t> v;
      if (!accept(Tok::RBracket)) {
        do {
          v.push_back(expect(Tok::Int, "an integer in the list").ival);
        } while (accept(Tok::Comma));
        expect(Tok::RBracket, "']' closing the list");
      }
      return v;
    }
    errorHere("expected an attribute value, found " + describe(cur_));
  }

  std::map<std::string, Attr> parseAttrDict() {
    std::map<std::string, Attr> attrs;
    expect(Tok::LBrace, "'{'");
    if (accept(Tok::RBrace)) return attrs;
    do {
      if (!is(Tok::Ident) && !is(Tok::String)) errorHere("expected an attribute name, found " + describe(cur_));
      Token key = cur_;
      advance();
      expect(Tok::Equal, "'=' after the attribute name");
      Attr v = parseAttrValue();
      if (!attrs.emplace(key.text, std::move(v)).second) error(key, "duplicate attribute '" + key.text + "'");
    } while (accept(Tok::Comma));
    expect(Tok::RBrace, "'}' closing the attributes");
    return attrs;
  }

  // An attribute dictionary after an op's ')' versus the op's first region:
  // attributes start with `{ key =`, regions never do.
  bool atAttrDict(bool opHasRegions) {
    if (!is(Tok::LBrace)) return false;
    auto st = lex_.save();
    Token t1 = lex_.next();
    bool r;
    if (t1.kind == Tok::RBrace) {
      r = !opHasRegions;
    } else if (t1.kind == Tok::Ident || t1.kind == Tok::String) {
      r = lex_.next().kind == Tok::Equal;
    } else {
      r = !opHasRegions;  // let the attribute parser report the error
    }
    lex_.restore(st);
    return r;
  }

  Location parseLoc() {
    advance();  // 'loc'
    expect(Tok::LParen, "'(' after 'loc'");
    Location l;
    l.file = expect(Tok::String, "a quoted file name").text;
    expect(Tok::Colon, "':' after the file name");
    l.line = parseU32("a line number");
    expect(Tok::Colon, "':' after the line number");
    l.column = parseU32("a column number");
    expect(Tok::RParen, "')' closing the location");
    return l;
  }
  uint32_t parseU32(const char* what) {
    Token t = expect(Tok::Int, what);
    if (t.ival < 0 || t.ival > std::numeric_limits<uint32_t>::max()) error(t, std::string(what) + " out of range");
    return static_cast<uint32_t>(t.ival);
  }

  // ---- kernels, ops, regions -------------------------------------------------
  std::unique_ptr<Function> parseKernel() {
    advance();  // 'kernel'
    Token name = expect(Tok::At, "a kernel name such as @softmax");
    defined_.clear();
    scopes_.assign(1, {});
    struct Arg {
      Token name;
      Type type;
      std::map<std::string, Attr> attrs;
    };
    std::vector<Arg> args;
    expect(Tok::LParen, "'(' after the kernel name");
    if (!accept(Tok::RParen)) {
      do {
        Arg a;
        a.name = expect(Tok::Percent, "an argument name such as %x");
        expect(Tok::Colon, "':' after the argument name");
        a.type = parseType();
        if (is(Tok::LBrace)) a.attrs = parseAttrDict();
        args.push_back(std::move(a));
      } while (accept(Tok::Comma));
      expect(Tok::RParen, "')' closing the argument list");
    }
    Location loc;
    if (isIdent("loc")) loc = parseLoc();
    auto f = std::make_unique<Function>(name.text, loc);
    for (auto& a : args) {
      // Numbered arguments (%0) carry no name; named ones keep it.
      std::string hint = isDigit(a.name.text[0]) ? std::string() : a.name.text;
      Value* v = f->addArgument(a.type, hint);
      f->argAttrs().back() = std::move(a.attrs);
      define(a.name, v);
    }
    expect(Tok::LBrace, "'{' opening the kernel body");
    parseOps(f->body(), 0);
    expect(Tok::RBrace, "'}' closing the kernel body");
    return f;
  }

  void parseOps(Block& b, int depth) {
    while (!is(Tok::RBrace)) {
      if (is(Tok::Eof)) errorHere("unexpected end of input: expected an op or '}'");
      parseOp(b, depth);
    }
  }

  static bool variadicResults(OpCode c) {
    return c == OpCode::For || c == OpCode::If || c == OpCode::While || c == OpCode::DotWait;
  }
  static bool noResults(OpCode c) {
    switch (c) {
      case OpCode::Store:
      case OpCode::LocalStore:
      case OpCode::Copy:
      case OpCode::Barrier:
      case OpCode::ClusterBarrier:
      case OpCode::Probe:
      case OpCode::Assert:
      case OpCode::Fence:
      case OpCode::AsyncCommit:
      case OpCode::AsyncWait:
      case OpCode::WarpSpecialize:
      case OpCode::StageAcquire:
      case OpCode::StageCommit:
      case OpCode::StageWait:
      case OpCode::StageRelease:
      case OpCode::Yield:
      case OpCode::Return: return true;
      default: return false;
    }
  }

  void parseOp(Block& b, int depth) {
    Token first = cur_;
    std::optional<Token> resName;
    int64_t count = 0;
    if (is(Tok::Percent)) {
      resName = cur_;
      advance();
      count = 1;
      if (accept(Tok::Colon)) {
        Token n = expect(Tok::Int, "a result count after ':'");
        if (n.ival < 2 || n.ival > 4096) error(n, "result count must be between 2 and 4096");
        count = n.ival;
      }
      expect(Tok::Equal, "'=' after the result name");
    }
    if (!is(Tok::Ident)) errorHere("expected an op name, found " + describe(cur_));
    Token opTok = cur_;
    auto code = parseOpName(opTok.text);
    if (!code) error(opTok, "unknown op name '" + opTok.text + "'");
    advance();

    std::vector<Value*> operands;
    expect(Tok::LParen, "'(' after the op name");
    if (!accept(Tok::RParen)) {
      do {
        Token v = expect(Tok::Percent, "an operand such as %3");
        operands.push_back(lookup(v));
      } while (accept(Tok::Comma));
      expect(Tok::RParen, "')' closing the operands");
    }
    std::map<std::string, Attr> attrs;
    if (atAttrDict(hasRegions(*code))) attrs = parseAttrDict();
    std::vector<Type> types;
    Token typesTok = cur_;
    if (accept(Tok::Colon)) {
      do {
        types.push_back(parseType());
      } while (accept(Tok::Comma));
    }
    if (static_cast<int64_t>(types.size()) != count) {
      error(resName ? *resName : typesTok, "wrong result count: " + std::to_string(count) + " result name(s) but " +
                                               std::to_string(types.size()) + " result type(s) for '" + opTok.text +
                                               "'");
    }
    if (noResults(*code) && count != 0) error(first, "wrong result count: '" + opTok.text + "' has no results");
    if (*code == OpCode::Split && count != 2)
      error(resName ? *resName : opTok, "wrong result count: '" + opTok.text + "' has exactly two results");
    if (!noResults(*code) && !variadicResults(*code) && *code != OpCode::Split && count != 1)
      error(resName ? *resName : opTok, "wrong result count: '" + opTok.text + "' has exactly one result");
    Location loc;
    if (isIdent("loc")) loc = parseLoc();

    auto op = std::make_unique<Op>(*code, std::move(operands), types, std::move(attrs), loc);
    // Result names are taken now (so a region cannot reuse them) but become
    // visible only after the regions: region values cannot see the results.
    if (resName && !defined_.insert(resName->text).second) error(*resName, "redefinition of value %" + resName->text);

    if (hasRegions(*code)) {
      if (depth >= kMaxRegionDepth)
        error(opTok, "regions nested more than " + std::to_string(kMaxRegionDepth) + " deep");
      parseRegion(*op->addRegion(), depth + 1);
      if (*code == OpCode::If) {
        if (!isIdent("else")) errorHere("expected 'else' and the second region of 'if', found " + describe(cur_));
        advance();
        parseRegion(*op->addRegion(), depth + 1);
      }
    } else if (is(Tok::LBrace)) {
      errorHere("'" + opTok.text + "' takes no region");
    }

    if (resName) {
      // "%4:2" names results %4 and %5 when they are numbered; a named
      // multi-result op gets its first result named and the rest numbered
      // after it, exactly as the printer writes them.
      const std::string& base = resName->text;
      scopes_.back()[base] = op->result(0);
      if (count > 1) {
        if (!isDigit(base[0])) error(*resName, "a multi-result op must use a numbered name such as %4:2");
        errno = 0;
        unsigned long long n = std::strtoull(base.c_str(), nullptr, 10);
        if (errno == ERANGE || n > (1ull << 40)) error(*resName, "value number too large");
        for (unsigned i = 1; i < op->numResults(); ++i) {
          Token t = *resName;
          t.text = std::to_string(n + i);
          define(t, op->result(i));
        }
      }
    }
    b.push(std::move(op));
  }

  void parseRegion(Region& r, int depth) {
    expect(Tok::LBrace, "'{' opening a region");
    scopes_.emplace_back();
    Block& b = r.block();
    if (accept(Tok::Caret)) {
      expect(Tok::LParen, "'(' after '^'");
      if (!accept(Tok::RParen)) {
        do {
          Token n = expect(Tok::Percent, "a block argument such as %4");
          expect(Tok::Colon, "':' after the block argument");
          define(n, b.addArgument(parseType()));
        } while (accept(Tok::Comma));
        expect(Tok::RParen, "')' closing the block arguments");
      }
      expect(Tok::Colon, "':' after the block arguments");
    }
    parseOps(b, depth);
    expect(Tok::RBrace, "'}' closing a region");
    scopes_.pop_back();
  }

  Lexer lex_;
  Token cur_;
  std::vector<std::unordered_map<std::string, Value*>> scopes_;
  std::unordered_set<std::string> defined_;
};

}  // namespace

std::unique_ptr<Module> parseModule(std::string_view text, const std::string& bufferName) {
  return Parser(text, bufferName).parseModule();
}

}  // namespace tessera::ir
