#include "cli/CommandLine.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <iostream>

namespace tessera::tools::cli {

std::string joinOr(const std::vector<std::string>& items) {
  std::string r;
  for (size_t i = 0; i < items.size(); ++i) r += (i == 0 ? "" : i + 1 == items.size() ? " or " : ", ") + items[i];
  return r;
}

std::string optionList(const Command& c) {
  std::string r;
  for (const Option& o : c.options)
    r += (r.empty() ? "" : ", ") + std::string(o.name) + (o.alias ? std::string(" (or ") + o.alias + ")" : "");
  return r;
}

std::optional<std::vector<int64_t>> parseShape(const std::string& text) {
  std::vector<int64_t> out;
  size_t start = 0;
  while (true) {
    size_t end = text.find_first_of(",xX", start);
    const std::string part = text.substr(start, end == std::string::npos ? std::string::npos : end - start);
    char* stop = nullptr;
    errno = 0;
    long long v = std::strtoll(part.c_str(), &stop, 10);
    // Digits only: strtoll would take "+3", " 3" or "-0".
    if (part.empty() || part.find_first_not_of("0123456789") != std::string::npos || *stop || errno) return {};
    out.push_back(v);
    if (end == std::string::npos) return out;
    start = end + 1;
  }
}

const Option& Args::declared(const char* flag) const {
  for (const Option& o : cmd_->options)
    if (std::string(o.name) == flag) return o;
  throw std::logic_error("tessera " + path_ + " asks for " + flag + ", which it does not declare");
}

namespace {

[[noreturn]] void programError(const Command& program, const std::string& msg) {
  std::cerr << program.name << ": " << msg << "\nusage:\n"
            << program.synopsis << "(" << program.name << " --help explains the options)\n";
  std::exit(2);
}

}  // namespace

void Args::fail(const std::string& msg) const {
  if (program_) programError(*cmd_, msg);
  throw CommandLineError(path_, msg);
}

bool Args::has(const char* flag) const {
  const std::string name = declared(flag).name;
  for (const auto& [f, v] : given_)
    if (f == name) return true;
  return false;
}

std::optional<std::string> Args::value(const char* flag) const {
  std::vector<std::string> all = values(flag);
  if (all.empty()) return {};
  return all.back();
}

std::vector<std::string> Args::values(const char* flag) const {
  const std::string name = declared(flag).name;
  std::vector<std::string> r;
  for (const auto& [f, v] : given_)
    if (f == name) r.push_back(v);
  return r;
}

namespace {

// One flag's value read with `convert` (strtoll, strtod): the whole text a
// number of T, finite, within [lo, hi]; else "FLAG expects WHAT, got 'TEXT'".
template <typename T, typename Convert>
std::optional<T> read(const Args& a, const char* flag, const std::string& what, T lo, T hi, Convert convert) {
  std::optional<std::string> s = a.value(flag);
  if (!s) return {};
  char* end = nullptr;
  errno = 0;
  const T v = convert(s->c_str(), &end);
  if (s->empty() || *end != '\0' || errno != 0 || !std::isfinite(double(v)) || v < lo || v > hi)
    a.fail(std::string(flag) + " expects " + what + ", got '" + *s + "'");
  return v;
}

}  // namespace

std::optional<int64_t> Args::integer(const char* flag, const std::string& what, int64_t lo, int64_t hi) const {
  return read<int64_t>(*this, flag, what, lo, hi, [](const char* s, char** end) { return std::strtoll(s, end, 10); });
}

std::optional<double> Args::number(const char* flag, const std::string& what, double lo, double hi) const {
  return read<double>(*this, flag, what, lo, hi, [](const char* s, char** end) { return std::strtod(s, end); });
}

std::optional<std::vector<int64_t>> Args::shape(const char* flag) const {
  std::optional<std::string> s = value(flag);
  if (!s) return {};
  std::optional<std::vector<int64_t>> r = parseShape(*s);
  if (!r) fail(std::string(flag) + " expects " + kShapeGrammar + ", got '" + *s + "'");
  return r;
}

namespace {

const Option* findOption(const Command& c, const std::string& flag) {
  for (const Option& o : c.options)
    if (flag == o.name || (o.alias && flag == o.alias)) return &o;
  return nullptr;
}

// Whether any command of the table takes `flag`: then the user meant a
// real flag in the wrong command, and the message says so.
bool takenAnywhere(const std::vector<Command>& table, const std::string& flag) {
  for (const Command& c : table)
    if (findOption(c, flag) || takenAnywhere(c.subcommands, flag)) return true;
  return false;
}

std::string path(const std::vector<const Command*>& chain) {
  std::string r;
  for (const Command* c : chain) r += (r.empty() ? "" : " ") + c->name;
  return r;
}

}  // namespace

// The flags and arguments of `cmd` from words[i...] into a new Args.
Args parseFlags(const std::vector<Command>& table, const Command& cmd, const std::string& name,
                const std::vector<std::string>& words, size_t i, bool& help) {
  Args a(cmd, name);
  a.line_ = "tessera";
  for (const std::string& w : words) a.line_ += " " + w;
  for (; i < words.size(); ++i) {
    std::string s = words[i];
    // "-" is standard input (compile -, opt -), an argument.
    if (s == "-" || s.empty() || s[0] != '-') {
      a.positionals_.push_back(s);
      continue;
    }
    if (s == "--help" || s == "-h") {
      help = true;
      continue;
    }
    std::optional<std::string> inlineValue;  // --flag=value
    if (s.rfind("--", 0) == 0 && s.find('=') != std::string::npos) {
      inlineValue = s.substr(s.find('=') + 1);
      s = s.substr(0, s.find('='));
    }
    const Option* o = findOption(cmd, s);
    if (!o) {
      const std::string takes = cmd.options.empty() ? "it takes no options" : "it takes " + optionList(cmd);
      throw CommandLineError(name,
                             (takenAnywhere(table, s) ? "does not take " : "unknown option ") + s + " (" + takes + ")");
    }
    std::string v;
    if (o->value) {
      if (inlineValue)
        v = *inlineValue;
      else if (i + 1 < words.size())
        v = words[++i];
      else
        throw CommandLineError(name, s + " needs a value: " + o->value);
    } else if (inlineValue) {
      throw CommandLineError(name, s + " takes no value, got '" + s + "=" + *inlineValue + "'");
    }
    a.given_.emplace_back(o->name, v);
  }
  if (!help) {
    const int n = static_cast<int>(a.positionals_.size());
    if (n < cmd.minArgs) throw CommandLineError(name, "needs " + cmd.argsWhat);
    if (cmd.maxArgs >= 0 && n > cmd.maxArgs)
      throw CommandLineError(name, "unexpected argument '" + a.positionals_[cmd.maxArgs] + "' (it takes " +
                                       (cmd.maxArgs == 0 ? std::string("none") : cmd.argsWhat) + ")");
  }
  return a;
}

Parsed parseCommandLine(const std::vector<Command>& table, const std::vector<std::string>& words) {
  Parsed p;
  size_t i = 0;
  if (words.empty()) throw CommandLineError("", "missing command");
  if (words[0] == "--help" || words[0] == "-h") {
    p.help = true;
    return p;
  }
  // The command, then its subcommands for as long as the words name them.
  const std::vector<Command>* level = &table;
  while (true) {
    const Command* found = nullptr;
    if (i < words.size())
      for (const Command& c : *level)
        if (words[i] == c.name) found = &c;
    if (!found) {
      if (p.chain.empty()) throw CommandLineError("", "unknown command '" + words[i] + "'");
      std::vector<std::string> names;
      for (const Command& c : *level) names.push_back(c.name);
      const bool helpAsked = i < words.size() && (words[i] == "--help" || words[i] == "-h");
      if (helpAsked) {
        p.help = true;
        return p;
      }
      if (i >= words.size() || words[i].rfind("-", 0) == 0)
        throw CommandLineError(path(p.chain), "needs a subcommand: " + joinOr(names));
      throw CommandLineError(path(p.chain), "unknown subcommand '" + words[i] + "' (expected " + joinOr(names) + ")");
    }
    p.chain.push_back(found);
    ++i;
    if (found->subcommands.empty()) break;
    level = &found->subcommands;
  }

  p.args = parseFlags(table, *p.chain.back(), path(p.chain), words, i, p.help);
  return p;
}

Args parseProgram(const Command& program, int argc, char** argv) {
  std::vector<std::string> words(argv + 1, argv + argc);
  bool help = false;
  try {
    Args a = parseFlags({program}, program, program.name, words, 0, help);
    a.line_ = program.name + a.line_.substr(std::string("tessera").size());
    a.program_ = true;
    if (!help) return a;
  } catch (const CommandLineError& e) {
    programError(program, e.what());
  }
  std::cout << "usage:\n" << program.synopsis << (program.help ? program.help() : "");
  std::exit(0);
}

}  // namespace tessera::tools::cli
