#pragma once
// The root network namespace as text, to show a test changed nothing in it.

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include "support.hpp"

namespace lanes::test {

// Everything of the root network namespace that lanes promises not to
// change, as text: links, addresses, routes, rules, nexthops, qdiscs and
// every readable net.* sysctl.
inline std::map<std::string, std::string> snapshot_root_ns() {
  std::map<std::string, std::string> s;
  // lifetimes of dynamic addresses and routes count down on their own
  std::regex lifetimes(R"((valid_lft|preferred_lft|expires) \S+)");
  for (const char* cmd : {"ip -d link show", "ip addr show", "ip -4 route show table all",
                          "ip -6 route show table all", "ip -4 rule show", "ip -6 rule show",
                          "ip nexthop show", "tc qdisc show"}) {
    s[cmd] = std::regex_replace(run_command(cmd).out, lifetimes, "$1 _");
  }
  // counters that move without anyone configuring anything
  const std::vector<std::string> dynamic = {"nf_conntrack_count", "/route/flush"};
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator("/proc/sys/net", ec);
       it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    if (ec) break;
    if (!it->is_regular_file(ec)) continue;
    std::string p = it->path().string();
    if (std::any_of(dynamic.begin(), dynamic.end(), [&](auto& d) { return p.find(d) != std::string::npos; }))
      continue;
    int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;  // write-only entries
    char buf[4096];
    ssize_t n = ::read(fd, buf, sizeof buf);
    ::close(fd);
    if (n < 0) continue;  // entries that refuse reads (EIO, EPERM)
    s["sysctl " + p] = std::string(buf, static_cast<size_t>(n));
  }
  return s;
}

}  // namespace lanes::test
