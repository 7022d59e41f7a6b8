// The command-line framework of the `tessera` tool: one table of commands
// (name, synopsis, options, positional arguments, nested subcommands, the
// function that runs it) drives dispatch, parsing, help and the messages
// about a bad command line, in the manner of LLVM's cl::SubCommand tools.
//
// Parsing is structural only (which flags, which values, how many
// arguments); each command turns values into numbers, shapes, targets with
// the helpers of Args, whose errors name the flag and what it expected.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace tessera::tools::cli {

/// A bad command line: printed as `tessera: COMMAND: MESSAGE` (`tessera:
/// MESSAGE` when no command applies), then the command's synopsis; exit
/// status 2. The only error type of the tool's argument handling.
struct CommandLineError : std::runtime_error {
  CommandLineError(std::string cmd, const std::string& msg) : std::runtime_error(msg), command(std::move(cmd)) {}
  std::string command;  // "bench", "cache explain"; empty: none
};

/// One option of a command. `value` describes what follows it ("a target
/// T"); null for a switch, which takes no value.
struct Option {
  const char* name;             // "--target", "-o"
  const char* value = nullptr;  // for "--json needs a value: ..." and the option list
  const char* alias = nullptr;  // another spelling ("--device", "-q")
  // Given more than once, each value is kept (Args::values); value() is the last.
};

class Args;
struct Parsed;

/// A command of the table; `subcommands` make it a group (`cache
/// stats|explain|clear`), whose members run and it does not.
struct Command {
  std::string name;
  std::string synopsis = {};  // the lines `tessera help` lists, each "  tessera ...\n"
  std::vector<Option> options = {};
  int minArgs = 0, maxArgs = 0;  // positional arguments; maxArgs -1: any number
  std::string argsWhat = {};     // what they are, for "needs ..." ("a KERNEL name or a FILE.tir")
  int (*run)(const Args&) = nullptr;
  std::string (*help)() = nullptr;  // what `tessera help NAME` adds to the synopsis
  std::vector<Command> subcommands = {};
};

/// A parsed command line of one command: its flags' values and its
/// positional arguments. Asking for a flag the command does not declare is
/// a bug in the tool (std::logic_error), never a user's mistake.
class Args {
 public:
  Args(const Command& cmd, std::string path) : cmd_(&cmd), path_(std::move(path)) {}

  /// "bench", "cache explain".
  const std::string& command() const { return path_; }
  const std::vector<std::string>& positionals() const { return positionals_; }
  std::string positional(size_t i) const { return i < positionals_.size() ? positionals_[i] : std::string(); }
  /// "tessera bench vector_add --json -": the words as given (bench's report).
  const std::string& commandLine() const { return line_; }

  bool has(const char* flag) const;
  /// The last value given, or nothing.
  std::optional<std::string> value(const char* flag) const;
  std::string value(const char* flag, const std::string& otherwise) const { return value(flag).value_or(otherwise); }
  /// Every value given, in order (an option that repeats).
  std::vector<std::string> values(const char* flag) const;

  /// Typed values; a bad one is "FLAG expects WHAT, got 'TEXT'".
  std::optional<int64_t> integer(const char* flag, const std::string& what, int64_t lo, int64_t hi) const;
  std::optional<double> number(const char* flag, const std::string& what, double lo, double hi) const;
  /// --shape in the one grammar of every command (parseShape).
  std::optional<std::vector<int64_t>> shape(const char* flag) const;

  /// A CommandLineError for the command; for a program of its own
  /// (parseProgram) the message and its synopsis, then exit status 2.
  [[noreturn]] void fail(const std::string& msg) const;

 private:
  friend Args parseFlags(const std::vector<Command>&, const Command&, const std::string&,
                         const std::vector<std::string>&, size_t, bool&);
  friend Args parseProgram(const Command& program, int argc, char** argv);
  const Option& declared(const char* flag) const;

  const Command* cmd_;
  std::string path_, line_;
  std::vector<std::string> positionals_;
  std::vector<std::pair<std::string, std::string>> given_;  // canonical flag name, value ("" for a switch)
  bool program_ = false;                                    // from parseProgram
};

/// The result of reading argv against the table: the command (the chain
/// from the top level to it in `chain`), its arguments, and whether --help
/// was asked for.
struct Parsed {
  std::vector<const Command*> chain;  // empty: no command (tessera --help)
  std::optional<Args> args;
  bool help = false;
};

/// Reads `words` (argv without the program) against `table`. Throws
/// CommandLineError for an unknown command or subcommand, a flag the
/// command does not take (naming the flags it does), a missing value, or
/// too few or too many positional arguments.
Parsed parseCommandLine(const std::vector<Command>& table, const std::vector<std::string>& words);

/// A program of its own (the benchmarks in bench/): `program` (its name,
/// synopsis, options and help) read from argv. --help prints the usage and
/// the help and exits 0; a bad command line prints `PROGRAM: MESSAGE` and
/// the synopsis and exits 2.
Args parseProgram(const Command& program, int argc, char** argv);

/// The one shape grammar of every command: `A,B,C` or `AxBxC` (`X` too),
/// non-negative integers. Nothing for a malformed one.
std::optional<std::vector<int64_t>> parseShape(const std::string& text);
/// How the grammar is described in messages and help.
inline constexpr const char* kShapeGrammar = "A,B,... or AxBx... (non-negative integers)";

/// "a, b or c".
std::string joinOr(const std::vector<std::string>& items);
/// The flags of a command, as its messages list them: "--target T, -o FILE".
std::string optionList(const Command& c);

}  // namespace tessera::tools::cli
