#include "tessera/ir/Printer.h"

#include <cctype>
#include <set>

#include "PrinterDetail.h"

namespace tessera::ir {
namespace detail {

namespace {
bool isIdentStart(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool isIdentChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// Kernel argument names come from user code and may hold any characters;
// only [A-Za-z0-9_] survives so the name lexes back as one token. A name that
// starts with a digit would collide with the numbered values, so it is not
// used at all.
// Built by append: `"%" + std::string` trips a GCC 12 -Wrestrict false positive.
std::string pct(const std::string& s) {
  std::string r = "%";
  r += s;
  return r;
}

std::string sanitize(const std::string& s) {
  std::string r;
  for (char c : s) r += isIdentChar(c) ? c : '_';
  if (r.empty() || !isIdentStart(r[0])) return {};
  return r;
}
}  // namespace

ValueNames::ValueNames(const Function& f) {
  const Block& body = f.body();
  // Argument names first: a hint is used only if it is unique among the
  // arguments after sanitizing, otherwise the argument is numbered like any
  // other value (so the text stays unambiguous).
  std::map<std::string, int> count;
  std::vector<std::string> hinted;
  for (auto& a : body.args()) {
    hinted.push_back(sanitize(a->nameHint));
    if (!hinted.back().empty()) ++count[hinted.back()];
  }
  for (size_t i = 0; i < body.args().size(); ++i) {
    const Value* a = body.args()[i].get();
    if (!hinted[i].empty() && count[hinted[i]] == 1)
      names_[a] = pct(hinted[i]);
    else
      names_[a] = pct(std::to_string(next_++));
  }
  for (auto& op : body.ops()) {
    for (auto& r : op->results()) names_[r.get()] = pct(std::to_string(next_++));
    for (auto& reg : op->regions()) numberBlock(reg->block());
  }
}

void ValueNames::numberBlock(const Block& root) {
  // Pre-order (block arguments, then each op's results before its regions),
  // with an explicit stack: names are made for messages about IR that may be
  // nested too deeply to recurse over (the verifier reports it with them).
  struct Frame {
    const Block* b;
    size_t op = 0;      // next op of b
    size_t region = 0;  // next region of op - 1 (once its results are named)
  };
  std::vector<Frame> stack{{&root}};
  for (auto& a : root.args()) names_[a.get()] = pct(std::to_string(next_++));
  while (!stack.empty()) {
    Frame& f = stack.back();
    if (f.region > 0) {
      const Op& cur = *f.b->ops()[f.op - 1];
      if (f.region <= cur.regions().size()) {
        const Block& inner = cur.regions()[f.region++ - 1]->block();
        for (auto& a : inner.args()) names_[a.get()] = pct(std::to_string(next_++));
        stack.push_back({&inner});
        continue;
      }
      f.region = 0;
    }
    if (f.op == f.b->ops().size()) {
      stack.pop_back();
      continue;
    }
    const Op& op = *f.b->ops()[f.op++];
    for (auto& r : op.results()) names_[r.get()] = pct(std::to_string(next_++));
    f.region = 1;
  }
}

std::string ValueNames::name(const Value* v) const {
  auto it = names_.find(v);
  return it == names_.end() ? std::string("%<?>") : it->second;
}

bool isBareIdentifier(const std::string& s) {
  if (s.empty() || !isIdentStart(s[0])) return false;
  for (char c : s)
    if (!isIdentChar(c)) return false;
  // These spell float values in attribute position; as strings they are quoted.
  return s != "inf" && s != "nan";
}

std::string quote(const std::string& s) {
  static const char* hex = "0123456789abcdef";
  std::string r = "\"";
  for (char ch : s) {
    auto c = static_cast<unsigned char>(ch);
    if (c == '"' || c == '\\') {
      r += '\\';
      r += ch;
    } else if (c < 0x20 || c >= 0x7f) {
      r += '\\';
      r += hex[c >> 4];
      r += hex[c & 15];
    } else {
      r += ch;
    }
  }
  return r + "\"";
}

std::string attrText(const Attr& a) {
  if (auto* s = std::get_if<std::string>(&a)) return isBareIdentifier(*s) ? *s : quote(*s);
  return attrStr(a);
}

namespace {
std::string attrDict(const std::map<std::string, Attr>& attrs) {
  if (attrs.empty()) return {};
  std::string r = " {";
  bool first = true;
  for (auto& [k, v] : attrs) {  // std::map: sorted by key, so deterministic
    if (!first) r += ", ";
    first = false;
    r += (isBareIdentifier(k) ? k : quote(k)) + " = " + attrText(v);
  }
  return r + "}";
}

std::string locText(const Location& l) {
  return " loc(" + quote(l.file) + ":" + std::to_string(l.line) + ":" + std::to_string(l.column) + ")";
}
}  // namespace

std::string opHeader(const Op& op, const ValueNames& names, bool locations) {
  std::string r;
  if (op.numResults() > 0) {
    r += names.name(op.result(0));
    if (op.numResults() > 1) {
      r += ':';
      r += std::to_string(op.numResults());
    }
    r += " = ";
  }
  r += op.name();
  r += '(';
  for (unsigned i = 0; i < op.numOperands(); ++i) {
    if (i) r += ", ";
    r += names.name(op.operand(i));
  }
  r += ')';
  r += attrDict(op.attrs());
  if (op.numResults() > 0) {
    r += " : ";
    for (unsigned i = 0; i < op.numResults(); ++i) {
      if (i) r += ", ";
      r += op.result(i)->type().str();
    }
  }
  if (locations && op.loc().known()) r += locText(op.loc());
  return r;
}

namespace {
class Printer {
 public:
  Printer(const Function& f, const PrintOptions& o) : f_(f), opts_(o), names_(f) {}

  std::string run() {
    out_ += "kernel @";
    out_ += isBareIdentifier(f_.name()) ? f_.name() : quote(f_.name());
    out_ += '(';
    for (unsigned i = 0; i < f_.numArgs(); ++i) {
      if (i) out_ += ", ";
      const Value* a = f_.arg(i);
      out_ += names_.name(a) + ": " + a->type().str();
      if (i < f_.argAttrs().size()) out_ += attrDict(f_.argAttrs()[i]);
    }
    out_ += ')';
    if (opts_.locations && f_.loc().known()) out_ += locText(f_.loc());
    out_ += " {\n";
    printOps(f_.body(), 1);
    out_ += "}\n";
    return std::move(out_);
  }

 private:
  void indent(int depth) { out_.append(static_cast<size_t>(depth) * 2, ' '); }

  void printOps(const Block& b, int depth) {
    for (auto& op : b.ops()) {
      indent(depth);
      out_ += opHeader(*op, names_, opts_.locations);
      for (unsigned i = 0; i < op->numRegions(); ++i) {
        out_ += i == 0 ? " {\n" : " else {\n";
        const Block& rb = op->region(i).block();
        if (rb.numArgs() > 0) {
          indent(depth);
          out_ += "^(";
          for (unsigned j = 0; j < rb.numArgs(); ++j) {
            if (j) out_ += ", ";
            out_ += names_.name(rb.arg(j)) + ": " + rb.arg(j)->type().str();
          }
          out_ += "):\n";
        }
        printOps(rb, depth + 1);
        indent(depth);
        out_ += '}';
      }
      out_ += '\n';
    }
  }

  const Function& f_;
  const PrintOptions& opts_;
  ValueNames names_;
  std::string out_;
};
}  // namespace

}  // namespace detail

std::string print(const Function& f, const PrintOptions& opts) { return detail::Printer(f, opts).run(); }

std::string print(const Module& m, const PrintOptions& opts) {
  std::string r;
  for (size_t i = 0; i < m.functions.size(); ++i) {
    if (i) r += '\n';
    r += print(*m.functions[i], opts);
  }
  return r;
}

}  // namespace tessera::ir
