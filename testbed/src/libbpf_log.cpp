#include "lanes/testbed/libbpf_log.hpp"

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <string_view>

#include <bpf/libbpf.h>

#include "lanes/testbed/log.hpp"

namespace lanes::testbed {

namespace {
// libbpf calls the printer on the thread that loads: a quiet load on one
// thread leaves another's warnings warnings
thread_local int quiet_depth = 0;

int to_log(enum libbpf_print_level level, const char* format, va_list args) {
  char buf[1024];
  int n = std::vsnprintf(buf, sizeof buf, format, args);
  std::string_view msg(buf, n > 0 ? std::min<size_t>(static_cast<size_t>(n), sizeof buf - 1) : 0);
  while (!msg.empty() && msg.back() == '\n') msg.remove_suffix(1);
  if (level == LIBBPF_WARN && quiet_depth == 0)
    log::warn("{}", msg);
  else
    log::debug("{}", msg);
  return 0;
}
}  // namespace

void libbpf_to_log() { libbpf_set_print(to_log); }

QuietLibbpf::QuietLibbpf() {
  libbpf_to_log();
  ++quiet_depth;
}
QuietLibbpf::~QuietLibbpf() { --quiet_depth; }

}  // namespace lanes::testbed
