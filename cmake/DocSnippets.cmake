# Extracts the code blocks of one Markdown page into a C++ translation unit,
# so that the tests compile and run every snippet of the documentation.
#
#   cmake -DPAGE=docs/dsl.md -DREL=docs/dsl.md -DOUT=gen.cpp -DSOURCE_DIR=<root> -P DocSnippets.cmake
#
# Fenced ```cpp and ```tir blocks are taken; other languages (sh, cmake,
# text) are left alone. An HTML comment on the line right before the fence
# says what a block is (docs/README.md, "Snippets", is the user's guide):
#
#   (none)                   cpp: `program` if it defines `int main(`, else `tu`;
#                            tir: parsed, verified and compiled for the CPU
#   <!-- snippet: program -->      a whole program: compiled, and its main run (it must return 0)
#   <!-- snippet: tu -->           namespace-scope declarations: compiled only
#   <!-- snippet: kernel-body -->  the body of a kernel taking (Ptr<float> out,
#                                  Ptr<const float> in, Int n): traced and compiled for the CPU
#   <!-- snippet: fragment -->     host statements with `kernel` (a ts::Kernel of that
#                                  signature), `k` (it compiled for the CPU) and `dev`
#                                  (the CPU device) in scope: compiled and run
#   <!-- snippet: error TEXT -->   a kernel body (cpp) or IR (tir) that must fail with a
#                                  tessera::Error whose message contains TEXT
#   <!-- snippet: excerpt PATH --> cpp: the block is a verbatim excerpt of PATH (a file the
#                                  build compiles and the tests run, e.g. an example)
#   <!-- snippet: skip REASON -->  not checked; the reason is required
#
# Every block is wrapped in a namespace of its own and preceded by a #line
# directive, so a compiler error names the page and line of the snippet.
# Anything malformed (unknown marker, a marker before no block, an excerpt
# that is not in its file, an unterminated block) stops with an error.
cmake_minimum_required(VERSION 3.25)

foreach(v PAGE REL OUT SOURCE_DIR)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "DocSnippets.cmake: -D${v}= is required")
  endif()
endforeach()

file(READ "${PAGE}" text)
# Lines as a CMake list: semicolons and backslashes are escaped first so the
# code survives the list splitting, and restored when written out.
string(REPLACE "\\" "@TS_BS@" text "${text}")
string(REPLACE ";" "@TS_SEMI@" text "${text}")
string(REPLACE "[" "@TS_LB@" text "${text}")
string(REPLACE "]" "@TS_RB@" text "${text}")
string(REPLACE "\n" ";" lines "${text}")

function(restore out in)
  string(REPLACE "@TS_SEMI@" ";" s "${in}")
  string(REPLACE "@TS_BS@" "\\" s "${s}")
  string(REPLACE "@TS_LB@" "[" s "${s}")
  string(REPLACE "@TS_RB@" "]" s "${s}")
  set(${out} "${s}" PARENT_SCOPE)
endfunction()

function(page_error line msg)
  message(FATAL_ERROR "${REL}:${line}: error: ${msg}")
endfunction()

set(includes "")
set(body "")
set(registrations "")
set(n_blocks 0)

set(lineno 0)
set(in_block FALSE)
set(marker "")
set(marker_line 0)
foreach(raw IN LISTS lines)
  math(EXPR lineno "${lineno} + 1")
  if(in_block)
    if(raw MATCHES "^ *```[ \t]*$")
      set(in_block FALSE)
      # ---- one block: lang, kind, arg, start (line of its first code line), code
      set(kind "${block_kind}")
      set(arg "${block_arg}")
      restore(code "${block_code}")
      set(code_esc "${block_code}")
      math(EXPR n_blocks "${n_blocks} + 1")
      # The page's name is part of the namespace: pages are linked into one
      # program, and two pages with a snippet on the same line must not
      # define the same functions.
      string(MAKE_C_IDENTIFIER "${REL}" page_id)
      set(ns "doc_snippet_${page_id}_${block_start}")
      if(kind STREQUAL "skip")
        # not checked
      elseif(kind STREQUAL "excerpt")
        if(NOT EXISTS "${SOURCE_DIR}/${arg}")
          page_error(${block_start} "excerpt of ${arg}, which does not exist")
        endif()
        file(READ "${SOURCE_DIR}/${arg}" whole)
        string(FIND "${whole}" "${code}" at)
        if(at EQUAL -1)
          page_error(${block_start} "the block is not a verbatim excerpt of ${arg} (copy it from the file again)")
        endif()
      elseif(block_lang STREQUAL "tir")
        if(code MATCHES "\\)tir\"")
          page_error(${block_start} "the IR contains )tir\", which ends the raw string it is embedded in")
        endif()
        if(kind STREQUAL "error")
          set(k "TirError")
        else()
          set(k "Tir")
        endif()
        string(APPEND registrations
               "static const bool reg_${block_start} = docsnip::add({\"${REL}\", ${block_start}, docsnip::Kind::${k}, "
               "nullptr, nullptr, nullptr, R\"tir(${code})tir\", R\"tir(${arg})tir\"});\n")
      else()
        # C++: hoist the #include lines (kept as empty lines so the numbers stay right).
        set(cpp "")
        string(REPLACE "\n" ";" code_lines "${code_esc}")
        foreach(cl IN LISTS code_lines)
          if(cl MATCHES "^[ \t]*#[ \t]*include")
            restore(inc "${cl}")
            string(APPEND includes "${inc}\n")
            string(APPEND cpp "\n")
          else()
            restore(c "${cl}")
            string(APPEND cpp "${c}\n")
          endif()
        endforeach()
        if(kind STREQUAL "")
          if(cpp MATCHES "int main\\(")
            set(kind "program")
          else()
            set(kind "tu")
          endif()
        endif()
        if(kind STREQUAL "program")
          if(NOT cpp MATCHES "int main\\(\\)")
            page_error(${block_start} "a program snippet defines `int main()` (no arguments)")
          endif()
          string(REPLACE "int main()" "int snippet_main()" cpp "${cpp}")
          string(APPEND body "namespace ${ns} {\n#line ${block_start} \"${REL}\"\n${cpp}}  // namespace ${ns}\n")
          string(APPEND registrations
                 "static const bool reg_${block_start} = docsnip::add({\"${REL}\", ${block_start}, "
                 "docsnip::Kind::Program, &${ns}::snippet_main});\n")
        elseif(kind STREQUAL "tu")
          string(APPEND body "namespace ${ns} {\n#line ${block_start} \"${REL}\"\n${cpp}}  // namespace ${ns}\n")
        elseif(kind STREQUAL "kernel-body" OR kind STREQUAL "error")
          string(APPEND body
                 "namespace ${ns} {\nstatic tessera::Kernel traced() {\n"
                 "  return tessera::kernel(\"snippet\", {\"out\", \"in\", \"n\"}, [&]([[maybe_unused]] tessera::Ptr<float> out, "
                 "[[maybe_unused]] tessera::Ptr<const float> in, [[maybe_unused]] tessera::Int n) {\n"
                 "#line ${block_start} \"${REL}\"\n${cpp}});\n}\n}  // namespace ${ns}\n")
          if(kind STREQUAL "error")
            set(k "Error")
          else()
            set(k "KernelBody")
          endif()
          string(APPEND registrations
                 "static const bool reg_${block_start} = docsnip::add({\"${REL}\", ${block_start}, docsnip::Kind::${k}, "
                 "nullptr, &${ns}::traced, nullptr, nullptr, R\"txt(${arg})txt\"});\n")
        elseif(kind STREQUAL "fragment")
          string(APPEND body
                 "namespace ${ns} {\nstatic void run([[maybe_unused]] const tessera::Kernel& kernel, "
                 "[[maybe_unused]] const tessera::CompiledKernel& k, [[maybe_unused]] const tessera::Device& dev) {\n"
                 "#line ${block_start} \"${REL}\"\n${cpp}}\n}  // namespace ${ns}\n")
          string(APPEND registrations
                 "static const bool reg_${block_start} = docsnip::add({\"${REL}\", ${block_start}, "
                 "docsnip::Kind::Fragment, nullptr, nullptr, &${ns}::run});\n")
        else()
          page_error(${block_start} "marker '${kind}' does not apply to a cpp block")
        endif()
      endif()
    else()
      # Inside a block: strip the fence's indentation.
      string(LENGTH "${block_indent}" il)
      string(LENGTH "${raw}" rl)
      if(rl GREATER_EQUAL il)
        string(SUBSTRING "${raw}" ${il} -1 raw)
      endif()
      string(APPEND block_code "${raw}\n")
    endif()
    continue()
  endif()

  if(raw MATCHES "^ *<!-- snippet: *([a-z-]+) *(.*[^ ])? *-->[ \t]*$")
    set(marker "${CMAKE_MATCH_1}")
    set(marker_arg "${CMAKE_MATCH_2}")
    set(marker_line ${lineno})
    if(NOT marker MATCHES "^(program|tu|kernel-body|fragment|error|excerpt|skip)$")
      page_error(${lineno} "unknown snippet marker '${marker}' (program, tu, kernel-body, fragment, error, excerpt, skip)")
    endif()
    if(marker MATCHES "^(error|excerpt|skip)$" AND marker_arg STREQUAL "")
      page_error(${lineno} "the '${marker}' marker needs an argument (the expected message, the file, the reason)")
    endif()
    restore(marker_arg "${marker_arg}")
    continue()
  elseif(raw MATCHES "^ *<!-- *snippet")
    page_error(${lineno} "malformed snippet marker (expected <!-- snippet: KIND [ARG] -->)")
  endif()

  if(raw MATCHES "^( *)```([A-Za-z+]*)")
    set(block_indent "${CMAKE_MATCH_1}")
    set(block_lang "${CMAKE_MATCH_2}")
    if(block_lang STREQUAL "c++")
      set(block_lang "cpp")
    endif()
    set(has_marker FALSE)
    math(EXPR prev "${lineno} - 1")
    if(NOT marker STREQUAL "" AND marker_line EQUAL prev)
      set(has_marker TRUE)
    endif()
    if(block_lang STREQUAL "cpp" OR block_lang STREQUAL "tir")
      set(block_kind "")
      set(block_arg "")
      if(has_marker)
        set(block_kind "${marker}")
        set(block_arg "${marker_arg}")
        if(block_lang STREQUAL "tir" AND NOT marker MATCHES "^(error|skip)$")
          page_error(${marker_line} "a tir block takes only the error and skip markers")
        endif()
      endif()
    elseif(has_marker)
      page_error(${marker_line} "snippet markers apply to cpp and tir blocks, not '${block_lang}'")
    else()
      set(block_kind "skip")
    endif()
    math(EXPR block_start "${lineno} + 1")
    set(block_code "")
    set(in_block TRUE)
    set(marker "")
    continue()
  endif()

  if(NOT marker STREQUAL "")
    page_error(${marker_line} "a snippet marker must be on the line right before a code fence")
  endif()
endforeach()

if(in_block)
  math(EXPR open "${block_start} - 1")
  page_error(${open} "code block never closed")
endif()
if(NOT marker STREQUAL "")
  page_error(${marker_line} "a snippet marker must be on the line right before a code fence")
endif()

set(gen "// Generated from ${REL} by cmake/DocSnippets.cmake: edit the page, not this file.\n")
if(body STREQUAL "" AND registrations STREQUAL "" AND includes STREQUAL "")
  # Nothing to compile (no checked C++ or IR): an empty unit builds in no time.
  string(APPEND gen "// ${REL} has no checked snippet.\n")
else()
  string(APPEND gen "#include \"doc_snippets.h\"\n${includes}\n${body}\n#line 1 \"${REL} (registrations)\"\n")
  string(APPEND gen "namespace {\n${registrations}}  // namespace\n")
endif()
# Only rewrite on change, so an untouched page does not recompile.
if(EXISTS "${OUT}")
  file(READ "${OUT}" old)
  if(old STREQUAL gen)
    return()
  endif()
endif()
file(WRITE "${OUT}" "${gen}")
