# Per-target compile options shared by every lanes target, through one
# interface target (no global add_compile_options).
add_library(lanes_options INTERFACE)
target_compile_options(lanes_options INTERFACE
  -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Wold-style-cast
  -Wcast-align -Wunused -Woverloaded-virtual
  -Wno-missing-field-initializers)
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
  # GCC 12 reports false maybe-uninitialized positives inside nlohmann-json's
  # iterators (nlohmann/json#3808); clang and GCC 13 do not.
  target_compile_options(lanes_options INTERFACE -Wno-maybe-uninitialized)
endif()
if(LANES_WERROR)
  target_compile_options(lanes_options INTERFACE -Werror)
endif()
if(LANES_SANITIZE)
  target_compile_options(lanes_options INTERFACE -fsanitize=address,undefined -fno-omit-frame-pointer)
  target_link_options(lanes_options INTERFACE -fsanitize=address,undefined)
endif()

# lanes_add_catch_test(target TIER unit|bpf|root|scenario SOURCES ... LIBS ... TIMEOUT seconds)
# Every test case carries its tier as a Catch2 tag ([unit], [root], ...).
# Catch2 2.13's catch_discover_tests has no ADD_TAGS_AS_LABELS, so each
# tier is its own executable: discovery picks the tier's tag and labels the
# CTest tests with it, and `ctest -L unit` runs anywhere. A privileged test
# that finds no privileges exits 77, which CTest reports as "not run".
function(lanes_add_catch_test name)
  cmake_parse_arguments(ARG "" "TIMEOUT;TIER" "SOURCES;LIBS" ${ARGN})
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 120)
  endif()
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_LIBS} Catch2::Catch2 lanes_options)
  # what every test binary has: the shared support headers (tests/), the
  # sources' and the lanes executable's paths, and that executable built
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR}/tests)
  target_compile_definitions(${name} PRIVATE ${LANES_TEST_DEFS})
  add_dependencies(${name} lanes)
  if(ARG_TIER STREQUAL "unit")
    set_property(GLOBAL APPEND PROPERTY LANES_UNIT_TEST_TARGETS ${name})  # the rootless tier runs them too
  endif()
  # a test case tagged [serial] measures what load changes (a rate, a
  # time, a share of bytes, a machine-wide snapshot): CTest runs it alone
  catch_discover_tests(${name}
    TEST_SPEC "[${ARG_TIER}]~[serial]"
    EXTRA_ARGS --use-colour no
    PROPERTIES LABELS ${ARG_TIER} TIMEOUT ${ARG_TIMEOUT} SKIP_RETURN_CODE 77)
  # (a discovery that finds no test warns at every build; the sources are
  # read again when they change, so a first [serial] tag is discovered)
  set(serial FALSE)
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${ARG_SOURCES})
  foreach(src ${ARG_SOURCES})
    file(READ ${CMAKE_CURRENT_SOURCE_DIR}/${src} text)
    string(FIND "${text}" "[serial]" at)
    if(NOT at EQUAL -1)
      set(serial TRUE)
    endif()
  endforeach()
  if(serial)
    catch_discover_tests(${name}
      TEST_SPEC "[${ARG_TIER}][serial]"
      EXTRA_ARGS --use-colour no
      PROPERTIES LABELS ${ARG_TIER} TIMEOUT ${ARG_TIMEOUT} SKIP_RETURN_CODE 77 RUN_SERIAL TRUE)
  endif()
endfunction()
