// A test binary that fails exactly 77 assertions, run by CTest through
// exit_probe.sh: it must end as failed (exit 1), never as "not run" (77,
// which is what Catch2's own main returned for 77 failures). Its test is
// hidden ([.]): no tier discovers it.

#include <catch2/catch.hpp>

TEST_CASE("seventy-seven failed assertions", "[.exit-probe]") {
  for (int i = 0; i < 77; ++i) CHECK(i < 0);
}
