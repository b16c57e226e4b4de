// The tests' main. Catch2 2.13's own exits with the number of failed
// assertions (capped at 255), and CTest reads 77 as "not run": 77 failed
// CHECKs would have passed for a test that did not run. Here any failure
// is 1; only lanes::test::not_run() exits 77 (support.hpp).
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

int main(int argc, char** argv) {
  int failed = Catch::Session().run(argc, argv);
  return failed == 0 ? 0 : 1;
}
