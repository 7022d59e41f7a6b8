// Listing analysis (CodeProfile.h): the main loop and the instruction mix.
#include "tessera/perf/CodeProfile.h"

#include <algorithm>
#include <regex>
#include <sstream>
#include <utility>
#include <vector>

namespace tessera::perf {

const char* name(Listing l) {
  switch (l) {
    case Listing::SASS: return "sass";
    case Listing::PTX: return "ptx";
    case Listing::AMDGCN: return "amdgcn";
  }
  return "?";
}

const char* name(InstrClass c) {
  switch (c) {
#define TS_INSTR_CLASS(id, name, sass, ptx, amdgcn) \
  case InstrClass::id: return name;
#include "tessera/perf/InstrClasses.def"
  }
  return "?";
}

int InstrMix::total() const {
  int s = 0;
  for (int n : counts) s += n;
  return s;
}

std::string InstrMix::str() const {
  std::string s;
  for (size_t i = 0; i < kNumInstrClasses; ++i)
    if (counts[i]) s += (s.empty() ? "" : ", ") + std::to_string(counts[i]) + " " + name(static_cast<InstrClass>(i));
  return s.empty() ? "none" : s;
}

namespace {

/// The class patterns of one listing, compiled once.
const std::vector<std::regex>& classPatterns(Listing kind) {
  static const std::array<std::vector<std::regex>, 3> patterns = [] {
    std::array<std::vector<std::regex>, 3> p;
#define TS_INSTR_CLASS(id, name, sass, ptx, amdgcn) \
  p[0].emplace_back(sass);                          \
  p[1].emplace_back(ptx);                           \
  p[2].emplace_back(amdgcn);
#include "tessera/perf/InstrClasses.def"
    return p;
  }();
  return patterns[static_cast<size_t>(kind)];
}

InstrClass classify(const std::string& instr, Listing kind) {
  const std::vector<std::regex>& ps = classPatterns(kind);
  for (size_t i = 0; i < ps.size(); ++i)
    if (std::regex_search(instr, ps[i])) return static_cast<InstrClass>(i);
  return InstrClass::Other;
}

}  // namespace

CodeProfile profileListing(const std::string& text, Listing kind) {
  static const std::regex sassLabel(R"(^\s*(\.L_x_\d+):)"), ptxLabel(R"(^\s*(\$L__BB\d+_\d+):)"),
      gcnLabel(R"(^\s*(\.LBB\d+_\d+):)");
  static const std::regex sassBranch(R"(\bBRA\b[^;]*\((\.L_x_\d+)\))"),
      ptxBranch(R"(\bbra(?:\.uni)?\s+(\$L__BB\d+_\d+))"), gcnBranch(R"(\bs_(?:c)?branch\w*\s+(\.LBB\d+_\d+))");
  static const std::regex sassInstr(R"(/\*[0-9a-f]{4,}\*/\s+\S)"), nop(R"(\bNOP\b|\bs_nop\b)"),
      end(R"(^\s*(/\*[0-9a-f]+\*/\s+)?(EXIT\b|ret;|s_endpgm\b))"), symbol(R"(^[A-Za-z_][\w$]*:)");
  const std::regex& label = kind == Listing::SASS ? sassLabel : kind == Listing::PTX ? ptxLabel : gcnLabel;
  const std::regex& branch = kind == Listing::SASS ? sassBranch : kind == Listing::PTX ? ptxBranch : gcnBranch;

  std::vector<std::string> targets;                 // per instruction: the branch target label, or ""
  std::vector<InstrClass> classes;                  // per instruction
  std::vector<int> ends;                            // indices of unpredicated program ends
  std::vector<std::pair<std::string, int>> labels;  // label -> index of the next instruction
  std::istringstream in(text);
  bool inKernel = kind != Listing::AMDGCN;
  std::string pending;  // PTX: a statement's lines so far
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (kind == Listing::AMDGCN) {
      // The kernel's code runs from its symbol's label to .Lfunc_end.
      if (!inKernel) {
        inKernel = std::regex_search(line, symbol);
        continue;
      }
      if (line.rfind(".Lfunc_end", 0) == 0) break;
    }
    if (std::regex_search(line, m, label)) {
      labels.emplace_back(m[1], int(targets.size()));
      continue;
    }
    size_t first = line.find_first_not_of(" \t");
    std::string t = first == std::string::npos ? std::string() : line.substr(first);
    bool instr = false;
    switch (kind) {
      case Listing::SASS: instr = std::regex_search(line, sassInstr); break;
      case Listing::PTX:
        // A statement may run over several lines (mma.sync's operands):
        // it is one instruction, classified by its whole text.
        if (t.empty() || t[0] == '.' || t[0] == '/' || (pending.empty() && (t[0] == '{' || t[0] == '}'))) break;
        pending += (pending.empty() ? "" : " ") + t;
        if (t.back() != ';') break;
        t = line = pending;
        pending.clear();
        instr = true;
        break;
      case Listing::AMDGCN: instr = !t.empty() && t[0] != '.' && t[0] != ';' && t.back() != ':'; break;
    }
    if (!instr || std::regex_search(line, nop)) continue;
    if (std::regex_search(line, end)) ends.push_back(int(targets.size()));
    targets.push_back(std::regex_search(line, m, branch) ? std::string(m[1]) : std::string());
    // SASS lines carry an address comment and encodings; classify the mnemonic text.
    classes.push_back(classify(kind == Listing::SASS ? t.substr(std::min(t.size(), t.find("*/") + 2)) : t, kind));
  }
  CodeProfile p;
  p.listing = kind;
  for (InstrClass c : classes) ++p.all[c];
  // Every loop [label, backward branch]; the main one is the longest that
  // issues matrix instructions where any does (a warp-specialised kernel's
  // producer loop of copies may be longer), else the longest.
  std::vector<std::pair<int, int>> loops;
  for (int i = 0; i < int(targets.size()); ++i) {
    if (targets[size_t(i)].empty()) continue;
    for (auto& [name, at] : labels)
      if (name == targets[size_t(i)] && at < i &&
          std::none_of(ends.begin(), ends.end(), [&](int e) { return e >= at && e <= i; }))
        loops.emplace_back(at, i);
  }
  auto holds = [&](std::pair<int, int> l, InstrClass c) {
    for (int k = l.first; k <= l.second; ++k)
      if (classes[size_t(k)] == c) return true;
    return false;
  };
  auto matrix = [&](std::pair<int, int> l) { return holds(l, InstrClass::Mma) || holds(l, InstrClass::AsyncMma); };
  const bool anyMatrix = std::any_of(loops.begin(), loops.end(), matrix);
  std::pair<int, int> longest{-1, -1}, producer{-1, -1};
  for (auto l : loops)
    if ((!anyMatrix || matrix(l)) && l.second - l.first > longest.second - longest.first) longest = l;
  // The producer loop: the longest other loop, outside the main one, that
  // issues async copies and no matrix instruction.
  for (auto l : loops)
    if ((l.second < longest.first || l.first > longest.second) && !matrix(l) && holds(l, InstrClass::AsyncCopy) &&
        l.second - l.first > producer.second - producer.first)
      producer = l;
  if (anyMatrix && producer.first >= 0) {
    p.hasProducerLoop = true;
    for (int i = producer.first; i <= producer.second; ++i) ++p.producerLoop[classes[size_t(i)]];
  }
  if (longest.first >= 0) {
    p.hasLoop = true;
    for (int i = longest.first; i <= longest.second; ++i) ++p.loop[classes[size_t(i)]];
    // Regions of the loop a forward branch skips that hold an async copy.
    std::vector<bool> issueOnly(targets.size(), false);
    for (int i = longest.first; i < longest.second; ++i) {
      if (targets[size_t(i)].empty()) continue;
      for (auto& [name, at] : labels) {
        if (name != targets[size_t(i)] || at <= i + 1 || at > longest.second) continue;
        bool copies = false;
        for (int k = i + 1; k < at; ++k) copies = copies || classes[size_t(k)] == InstrClass::AsyncCopy;
        if (copies)
          for (int k = i + 1; k < at; ++k) issueOnly[size_t(k)] = true;
      }
    }
    p.loopIssueOnly = int(std::count(issueOnly.begin(), issueOnly.end(), true));
    for (size_t k = 0; k < issueOnly.size(); ++k)
      if (issueOnly[k]) ++p.loopIssue[classes[k]];
  }
  return p;
}

}  // namespace tessera::perf
