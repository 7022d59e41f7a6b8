// What Tessera tells the sanitizers (TESSERA_SANITIZE, scripts/sanitize.sh).
//
//  * TESSERA_ASAN / TESSERA_TSAN: 1 when this translation unit is built with
//    AddressSanitizer / ThreadSanitizer (clang spells it __has_feature, GCC
//    __SANITIZE_ADDRESS__ / __SANITIZE_THREAD__). Code that needs the
//    sanitizers' help (the emulator's fiber switch) tests these, so a normal
//    build compiles none of it.
//  * TESSERA_CALLS_JIT_CODE: on a function that calls a JIT-compiled entry
//    point through a pointer. clang's -fsanitize=function (part of
//    -fsanitize=undefined) checks such a call by reading a type signature
//    that clang places just before every function it compiles; code that
//    LLVM's JIT emitted has none, so the check reads whatever bytes precede
//    the entry (faulting at the start of a page) and reports a mismatch.
#pragma once

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TESSERA_ASAN 1
#endif
#if __has_feature(thread_sanitizer)
#define TESSERA_TSAN 1
#endif
#endif
#if !defined(TESSERA_ASAN) && defined(__SANITIZE_ADDRESS__)
#define TESSERA_ASAN 1
#endif
#if !defined(TESSERA_TSAN) && defined(__SANITIZE_THREAD__)
#define TESSERA_TSAN 1
#endif
#ifndef TESSERA_ASAN
#define TESSERA_ASAN 0
#endif
#ifndef TESSERA_TSAN
#define TESSERA_TSAN 0
#endif

// Only clang has -fsanitize=function (GCC would warn about the attribute).
#if defined(__clang__)
#define TESSERA_CALLS_JIT_CODE __attribute__((no_sanitize("function")))
#else
#define TESSERA_CALLS_JIT_CODE
#endif
