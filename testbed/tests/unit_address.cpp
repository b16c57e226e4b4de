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

TEST_CASE("collapse: the fewest prefixes that hold exactly the addresses given", "[unit]") {
  auto strs = [](const std::vector<IpNet>& v) {
    std::vector<std::string> out;
    for (const auto& n : v) out.push_back(n.address().to_string() + "/" + std::to_string(n.prefix_length()));
    return out;
  };
  auto ips = [](uint32_t from, uint32_t to) {
    std::vector<IpAddr> v;
    for (uint64_t x = from; x <= to; ++x) v.emplace_back(Ip4(static_cast<uint32_t>(x)));
    return v;
  };
  uint32_t base = Ip4::from_string("198.19.1.0").to_uint();
  CHECK(strs(collapse(ips(base, base + 255))) == std::vector<std::string>{"198.19.1.0/24"});
  CHECK(strs(collapse(ips(base + 4, base + 7))) == std::vector<std::string>{"198.19.1.4/30"});
  // a run that is not aligned: 1, 2-3, 4-7, 8
  CHECK(strs(collapse(ips(base + 1, base + 8))) ==
        std::vector<std::string>{"198.19.1.1/32", "198.19.1.2/31", "198.19.1.4/30", "198.19.1.8/32"});
  // gaps, repeats, any order, both families
  std::vector<IpAddr> mixed = {*parse_ip("198.19.1.9"), *parse_ip("2001:2::3"), *parse_ip("198.19.1.0"),
                               *parse_ip("2001:2::2"), *parse_ip("198.19.1.1"), *parse_ip("198.19.1.0")};
  CHECK(strs(collapse(mixed)) == std::vector<std::string>{"198.19.1.0/31", "198.19.1.9/32", "2001:2::2/127"});
  CHECK(collapse({}).empty());
  // the top of the space (no overflow past it), and one address alone
  CHECK(strs(collapse(ips(0xFFFFFFFE, 0xFFFFFFFF))) == std::vector<std::string>{"255.255.255.254/31"});
  CHECK(strs(collapse({*parse_ip("2001:2::ffff")})) == std::vector<std::string>{"2001:2::ffff/128"});
}
