# The codegen folders as libraries with declared dependencies
# (CMakeLists.txt, "codegen"). Each is an OBJECT library,
# tessera_codegen_<name>, whose objects go into the tessera_codegen archive.
#
# Private headers are spelled from the project root ("codegen/llvm/Jit.h"),
# but a library is not given the root: it gets a view of it in the build
# tree, ${PROJECT_BINARY_DIR}/codegen-views/<name>, holding a link to its
# own folder (or only to the HEADERS listed), and the views of the libraries
# it LINKS come with them. So codegen/gpu, which links llvm alone, finds
# "codegen/llvm/..." and not "codegen/nvptx/...": an upward include fails
# to compile. (An include relative to the file, "../nvptx/...", would
# bypass the views: tests/CMakeLists.txt's codegen/layering test refuses
# those.)
#
# ts_codegen_layer(NAME [FOLDER folder] [SOURCES file...] [EXCLUDE file...]
#                  [HEADERS file...] [API header...] [LINKS lib...])
#   FOLDER   the folder under codegen/ (default NAME)
#   SOURCES  its .cpp files (default: every one in the folder), less EXCLUDE
#   HEADERS  only these files of the folder are visible to its users (paths
#            relative to the folder; default: the whole folder)
#   API      public headers (under codegen/include) it implements without
#            seeing the others (llvm/: the math test harness's Testing.h)
#   LINKS    layers (by NAME) or targets whose headers it may include
set(TS_CODEGEN_LAYERS)
function(ts_codegen_layer name)
  cmake_parse_arguments(A "" "FOLDER" "SOURCES;EXCLUDE;HEADERS;API;LINKS" ${ARGN})
  if(NOT A_FOLDER)
    set(A_FOLDER ${name})
  endif()
  set(dir ${PROJECT_SOURCE_DIR}/codegen/${A_FOLDER})
  if(A_SOURCES)
    list(TRANSFORM A_SOURCES PREPEND ${dir}/)
  else()
    file(GLOB A_SOURCES CONFIGURE_DEPENDS ${dir}/*.cpp)
  endif()
  foreach(x ${A_EXCLUDE})
    list(REMOVE_ITEM A_SOURCES ${dir}/${x})
  endforeach()
  set(target tessera_codegen_${name})
  add_library(${target} OBJECT ${A_SOURCES})
  # The view: codegen/<folder> links to the folder, or a folder of links
  # to the HEADERS alone.
  set(view ${PROJECT_BINARY_DIR}/codegen-views/${name})
  file(REMOVE_RECURSE ${view})
  if(A_HEADERS)
    foreach(h ${A_HEADERS})
      get_filename_component(hdir ${view}/codegen/${A_FOLDER}/${h} DIRECTORY)
      file(MAKE_DIRECTORY ${hdir})
      file(CREATE_LINK ${dir}/${h} ${view}/codegen/${A_FOLDER}/${h} SYMBOLIC)
    endforeach()
    # The LLVM-free headers reach llvm/LLVMForward.h relative to themselves
    # (tests include them by path): resolved in the view (the layer links
    # llvm in any case).
    file(CREATE_LINK ${PROJECT_SOURCE_DIR}/codegen/llvm ${view}/codegen/llvm SYMBOLIC)
  else()
    file(MAKE_DIRECTORY ${view}/codegen)
    file(CREATE_LINK ${dir} ${view}/codegen/${A_FOLDER} SYMBOLIC)
  endif()
  target_include_directories(${target} PUBLIC ${view})
  # A folder's own headers: the whole folder, whatever its users see.
  if(A_HEADERS)
    set(own ${PROJECT_BINARY_DIR}/codegen-views/${name}-own)
    file(REMOVE_RECURSE ${own})
    file(MAKE_DIRECTORY ${own}/codegen)
    file(CREATE_LINK ${dir} ${own}/codegen/${A_FOLDER} SYMBOLIC)
    target_include_directories(${target} PRIVATE ${own})
  endif()
  if(A_API)
    set(api ${PROJECT_BINARY_DIR}/codegen-views/${name}-api)
    file(REMOVE_RECURSE ${api})
    foreach(h ${A_API})
      get_filename_component(hdir ${api}/${h} DIRECTORY)
      file(MAKE_DIRECTORY ${hdir})
      file(CREATE_LINK ${PROJECT_SOURCE_DIR}/codegen/include/${h} ${api}/${h} SYMBOLIC)
    endforeach()
    target_include_directories(${target} PRIVATE ${api})
  endif()
  # LLVM headers are private: public headers of Tessera carry none.
  target_include_directories(${target} SYSTEM PRIVATE ${LLVM_INCLUDE_DIRS})
  target_compile_definitions(${target} PRIVATE ${LLVM_DEFINITIONS})
  target_link_libraries(${target} PUBLIC tessera_ir)
  foreach(l ${A_LINKS})
    if(TARGET tessera_codegen_${l})
      target_link_libraries(${target} PUBLIC tessera_codegen_${l})
    else()
      target_link_libraries(${target} PUBLIC ${l})
    endif()
  endforeach()
  set(TS_CODEGEN_LAYERS ${TS_CODEGEN_LAYERS} ${name} PARENT_SCOPE)
endfunction()
