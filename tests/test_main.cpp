// The tests' main. Catch2 2.13's own exits with the number of failed
// assertions (capped at 255), and CTest reads 77 as "not run": 77 failed
// CHECKs would have passed for a test that did not run. Here any failure
// is 1; only lanes::test::not_run() exits 77 (support.hpp).
//
// A run whose filter matches no test case fails too (Catch2's --warn
// NoTests, always on): CTest runs each case by its name, and a name the
// filter cannot find again (CatchAddTests splits names at ';') would
// otherwise pass having run nothing.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

int main(int argc, char** argv) {
  Catch::Session session;
  if (session.applyCommandLine(argc, argv) != 0) return 1;
  auto& data = session.configData();
  data.warnings = static_cast<Catch::WarnAbout::What>(data.warnings | Catch::WarnAbout::NoTests);
  // (Catch2 says "No tests ran" itself)
  return session.run() == 0 ? 0 : 1;
}
