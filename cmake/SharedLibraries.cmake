# Tessera's shared libraries, linked whole from the static archives:
#
#   libtessera_runtime.so  runtime + SIMT emulator + support, no LLVM: what a
#                          program running exported kernels needs (docs/aot.md)
#   libtessera.so          DSL + IR + compiler; LLVM (and LLD) linked privately;
#                          needs libtessera_runtime.so
#
# Each exports namespace tessera only (cmake/export_map.sh writes the version
# script from the archives' symbols), never a symbol naming an LLVM type.
# SONAME lib*.so.MAJOR.MINOR: before 1.0 a minor release may break the ABI.
option(TESSERA_SHARED "Build libtessera.so and libtessera_runtime.so" ON)
if(NOT TESSERA_SHARED)
  return()
endif()

# ts_shared_library(TARGET NAME ARCHIVES... ): a shared library NAME holding
# the whole of the static ARCHIVES (targets), exporting their tessera symbols.
function(ts_shared_library target name)
  set(map ${PROJECT_BINARY_DIR}/${name}.map)
  set(files)
  foreach(a ${ARGN})
    list(APPEND files $<TARGET_FILE:${a}>)
  endforeach()
  add_custom_command(OUTPUT ${map} COMMAND bash ${PROJECT_SOURCE_DIR}/cmake/export_map.sh ${map} ${files}
                     DEPENDS ${ARGN} ${PROJECT_SOURCE_DIR}/cmake/export_map.sh
                     COMMENT "Listing the exported symbols of lib${name}.so" VERBATIM)
  add_custom_target(${target}_map DEPENDS ${map})
  add_library(${target} SHARED ${PROJECT_SOURCE_DIR}/cmake/SharedLibrary.cpp)
  add_dependencies(${target} ${target}_map)
  target_compile_definitions(${target} PRIVATE TESSERA_VERSION="${PROJECT_VERSION}" TESSERA_LIBRARY="lib${name}.so")
  target_link_options(${target} PRIVATE -Wl,--version-script=${map})
  # --no-undefined: a symbol missing from the archives fails here, not in
  # the user's program. Not in sanitized builds: clang leaves the sanitizer
  # runtime's symbols to the executable.
  if(NOT TESSERA_SANITIZE)
    target_link_options(${target} PRIVATE -Wl,--no-undefined)
  endif()
  target_link_libraries(${target} PRIVATE -Wl,--whole-archive ${files} -Wl,--no-whole-archive)
  set_target_properties(${target} PROPERTIES OUTPUT_NAME ${name} LINK_DEPENDS ${map}
                        VERSION ${PROJECT_VERSION} SOVERSION ${PROJECT_VERSION_MAJOR}.${PROJECT_VERSION_MINOR})
endfunction()

ts_shared_library(tessera_runtime_shared tessera_runtime tessera_runtime tessera_emu tessera_support)
target_link_libraries(tessera_runtime_shared PUBLIC Threads::Threads PRIVATE ${CMAKE_DL_LIBS})
target_include_directories(tessera_runtime_shared INTERFACE
  $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/support/include> $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/runtime/include>
  $<INSTALL_INTERFACE:include>)
set_target_properties(tessera_runtime_shared PROPERTIES EXPORT_NAME runtime)
add_library(Tessera::runtime ALIAS tessera_runtime_shared)

# The runtime's symbols (and support's) resolve to libtessera_runtime.so: one
# copy of the runtime per process, whichever library a program links.
ts_shared_library(tessera_shared tessera tessera tessera_ir tessera_codegen)
target_link_libraries(tessera_shared PUBLIC tessera_runtime_shared PRIVATE LLVM fmt::fmt)
if(LLD_FOUND)
  target_link_libraries(tessera_shared PRIVATE lldELF lldCommon)
endif()
target_include_directories(tessera_shared INTERFACE
  $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/ir/include> $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/codegen/include>
  $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/dsl/include> $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/perf/include>
  $<INSTALL_INTERFACE:include>)
# Installed, it finds libLLVM in LLVM's own directory and the runtime next to it.
set_target_properties(tessera_shared PROPERTIES EXPORT_NAME tessera INSTALL_RPATH "$ORIGIN;${LLVM_LIBRARY_DIR}")
