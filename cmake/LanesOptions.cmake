# Per-target compile options shared by every lanes target, through one
# interface target (no global add_compile_options).
add_library(lanes_options INTERFACE)
target_compile_options(lanes_options INTERFACE
  -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Wold-style-cast
  -Wcast-align -Wunused -Woverloaded-virtual -Wnull-dereference
  -Wno-missing-field-initializers)
if(LANES_WERROR)
  target_compile_options(lanes_options INTERFACE -Werror)
endif()
if(LANES_SANITIZE)
  target_compile_options(lanes_options INTERFACE -fsanitize=address,undefined -fno-omit-frame-pointer)
  target_link_options(lanes_options INTERFACE -fsanitize=address,undefined)
endif()

# lanes_add_catch_test(NAME target SOURCES ... LIBS ... TIMEOUT seconds)
# Tests carry their tier as a Catch2 tag ([unit], [root], ...) which
# becomes a CTest label, so `ctest -L unit` runs anywhere.
function(lanes_add_catch_test name)
  cmake_parse_arguments(ARG "" "TIMEOUT" "SOURCES;LIBS" ${ARGN})
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 120)
  endif()
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_LIBS} Catch2::Catch2 lanes_options)
  catch_discover_tests(${name}
    ADD_TAGS_AS_LABELS
    PROPERTIES TIMEOUT ${ARG_TIMEOUT}
    EXTRA_ARGS --use-colour no)
endfunction()
