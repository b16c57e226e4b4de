find_program(LANES_CLANG clang REQUIRED)
find_program(LANES_BPFTOOL bpftool PATHS /usr/sbin /sbin REQUIRED)
pkg_check_modules(LIBBPF REQUIRED IMPORTED_TARGET libbpf)

# _lanes_bpf_compile(SRC OBJ COMMENT [INCLUDE_DIR...]): the one clang
# command that turns a .bpf.c into a BPF object, for lanes' programs and
# users' alike.
function(_lanes_bpf_compile src obj comment)
  get_filename_component(outdir "${obj}" DIRECTORY)
  execute_process(COMMAND uname -m OUTPUT_VARIABLE arch OUTPUT_STRIP_TRAILING_WHITESPACE)
  set(includes -I/usr/include/${arch}-linux-gnu)
  foreach(h ${ARGN})
    list(APPEND includes -I${h})
  endforeach()
  add_custom_command(
    OUTPUT "${obj}"
    COMMAND ${CMAKE_COMMAND} -E make_directory "${outdir}"
    COMMAND ${LANES_CLANG} -O2 -g -Wall -Werror -target bpf -mcpu=v3 ${includes} -c "${src}" -o "${obj}"
    DEPENDS "${src}"
    IMPLICIT_DEPENDS C "${src}"
    COMMENT "${comment}"
    VERBATIM)
endfunction()

# lanes_bpf_skeleton(NAME SOURCE foo.bpf.c [HEADERS dir...])
#
# Compiles foo.bpf.c with clang for the BPF target (UAPI headers only, no
# vmlinux.h, so the build does not depend on the build host's BTF), then
# embeds the object in foo.skel.h with `bpftool gen skeleton`. Defines the
# interface target NAME_skel whose include directory holds foo.skel.h.
function(lanes_bpf_skeleton name)
  cmake_parse_arguments(ARG "" "SOURCE" "HEADERS" ${ARGN})
  get_filename_component(src "${ARG_SOURCE}" ABSOLUTE)
  get_filename_component(stem "${src}" NAME_WE)  # foo from foo.bpf.c
  set(outdir "${CMAKE_CURRENT_BINARY_DIR}/bpf")
  set(obj "${outdir}/${stem}.bpf.o")
  set(skel "${outdir}/${stem}.skel.h")
  _lanes_bpf_compile("${src}" "${obj}" "BPF ${stem}.bpf.c" ${CMAKE_CURRENT_SOURCE_DIR}/bpf ${ARG_HEADERS})
  add_custom_command(
    OUTPUT "${skel}"
    COMMAND ${LANES_BPFTOOL} gen skeleton "${obj}" name "${stem}_bpf" > "${skel}"
    DEPENDS "${obj}"
    COMMENT "skeleton ${stem}.skel.h"
    VERBATIM)
  add_custom_target(${name}_gen DEPENDS "${skel}")
  add_library(${name}_skel INTERFACE)
  add_dependencies(${name}_skel ${name}_gen)
  # generated C: a system include, so C++ warnings do not apply to it
  target_include_directories(${name}_skel SYSTEM INTERFACE "${outdir}")
  target_link_libraries(${name}_skel INTERFACE PkgConfig::LIBBPF)
endfunction()

# lanes_bpf_object(NAME SOURCE foo.bpf.c OUTPUT_DIR dir [HEADERS dir...])
#
# Compiles foo.bpf.c into OUTPUT_DIR/foo.bpf.o as a user would build an
# egress program of their own (no skeleton): tests load such objects with
# <job program="...">. Defines the target NAME that builds it.
function(lanes_bpf_object name)
  cmake_parse_arguments(ARG "" "SOURCE;OUTPUT_DIR" "HEADERS" ${ARGN})
  get_filename_component(src "${ARG_SOURCE}" ABSOLUTE)
  get_filename_component(stem "${src}" NAME_WE)
  set(obj "${ARG_OUTPUT_DIR}/${stem}.bpf.o")
  _lanes_bpf_compile("${src}" "${obj}" "BPF ${stem}.bpf.c (a user's program)" ${ARG_HEADERS})
  add_custom_target(${name} DEPENDS "${obj}")
endfunction()
