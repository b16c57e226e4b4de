#include <catch2/catch.hpp>

#include "lanes/testbed/address.hpp"

using namespace lanes::testbed;

TEST_CASE("address arithmetic", "[unit]") {
  auto n4 = *parse_net4("198.18.128.0/17");
  CHECK(nth(n4, 0).to_string() == "198.18.128.0");
  CHECK(nth(n4, 257).to_string() == "198.18.129.1");
  CHECK(size_of(n4) == 32768);
  auto n6 = *parse_net6("2001:2:0:2::/64");
  CHECK(nth(n6, 0x11).to_string() == "2001:2:0:2::11");
  CHECK(nth(n6, 0x1ff).to_string() == "2001:2:0:2::1ff");
  CHECK(subnet(*parse_net4("198.19.0.0/16"), 22, 3).to_string() == "198.19.12.0/22");
  CHECK(subnet(*parse_net6("2001:2:0:100::/56"), 64, 2).to_string() == "2001:2:0:102::/64");
}

TEST_CASE("prefix parsing rejects host bits and garbage", "[unit]") {
  CHECK_FALSE(parse_net4("198.18.0.1/24"));
  CHECK_FALSE(parse_net4("198.18.0.0"));
  CHECK_FALSE(parse_net4("banana/3"));
  CHECK_FALSE(parse_net6("2001:2::1/64"));
  CHECK(parse_net6("2001:2::/48"));
}

TEST_CASE("containment and overlap", "[unit]") {
  CHECK(contains(benchmark_range4(), *parse_net4("198.19.4.0/22")));
  CHECK_FALSE(contains(benchmark_range4(), *parse_net4("10.0.0.0/8")));
  CHECK(contains(benchmark_range6(), *parse_ip6("2001:2:0:100::5")));
  CHECK_FALSE(contains(benchmark_range6(), *parse_ip6("2001:db8::1")));
  CHECK(overlaps(*parse_net4("198.18.0.0/16"), *parse_net4("198.18.4.0/24")));
  CHECK_FALSE(overlaps(*parse_net4("198.18.0.0/24"), *parse_net4("198.18.1.0/24")));
}
