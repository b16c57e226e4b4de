// lanes-delay: lanes' own delay line (delay_line.hpp) on one device of the
// namespace it runs in, for as long as it runs: delay, jitter (and its
// distribution) and reorder as a topology or a fault gives them, where the
// kernel has no netem. Started by lanes for an impair fault (one process a
// device, in the device's namespace, ended with the fault's clear or with
// lanes); SIGTERM takes the tap and the program away and ends it.
//
// usage: lanes-delay --state FILE [--seed S] DEVICE ATTR=VALUE...
//   ATTR: delay, jitter, distribution, reorder (as the topology's and the
//   fault's attributes: delay="5ms" jitter="1ms" distribution="normal"
//   reorder="1%"). FILE: JSON, "ready": true once the device is delayed,
//   then what the delay line measured: every second its counts, at the
//   end also the time held and the lateness, p50/p99/max in µs.

#include <fcntl.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <cstring>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "lanes/testbed/daemon_main.hpp"
#include "lanes/testbed/delay_line.hpp"
#include "lanes/testbed/event_loop.hpp"
#include "lanes/testbed/impair.hpp"
#include "lanes/testbed/log.hpp"

using namespace lanes::testbed;

namespace {

int usage(const std::string& why) {
  std::cerr << "lanes-delay: " << why
            << "\nusage: lanes-delay --state FILE [--seed S] DEVICE ATTR=VALUE...\n"
               "  ATTR: delay, jitter, distribution, reorder (delay=\"5ms\" jitter=\"1ms\" "
               "distribution=\"normal\" reorder=\"1%\")\n";
  return 2;
}

nlohmann::json state_of(const DelayLine& line, bool ready, bool percentiles) {
  nlohmann::json links = nlohmann::json::array();
  for (const auto& s : line.stats(percentiles))
    links.push_back({{"where", s.where},
                     {"configured_delay_us", s.configured.delay_us},
                     {"configured_jitter_us", s.configured.jitter_us},
                     {"packets", s.packets},
                     {"bytes", s.bytes},
                     {"reordered", s.reordered},
                     {"send_drops", s.send_drops},
                     {"send_errors", s.send_errors},
                     {"rx_errors", s.rx_errors},
                     {"tap_drops", s.tap_drops},
                     {"queue_drops", s.queue_drops},
                     {"held_p50_us", s.held_p50_us},
                     {"held_p99_us", s.held_p99_us},
                     {"held_max_us", s.held_max_us},
                     {"held_min_us", s.held_min_us},
                     {"held_mean_us", s.held_mean_us},
                     {"late_p50_us", s.late_p50_us},
                     {"late_p99_us", s.late_p99_us},
                     {"late_max_us", s.late_max_us}});
  return {{"ready", ready}, {"links", links}};
}

}  // namespace

int main(int argc, char** argv) {
  std::string state, device;
  uint64_t seed = 1;
  std::map<std::string, std::string> attrs;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      usage("lanes' own delay line on DEVICE of this namespace");
      return 0;
    }
    if (a == "--state" || a == "--seed") {
      if (i + 1 >= argc) return usage(a + " needs a value");
      std::string v = argv[++i];
      if (a == "--state") state = v;
      else {
        try {
          size_t used = 0;
          seed = std::stoull(v, &used);
          if (used != v.size()) throw std::invalid_argument(v);
        } catch (const std::exception&) {
          return usage("--seed " + v + ": not a number");
        }
      }
      continue;
    }
    if (a.rfind("--", 0) == 0) return usage("unknown option " + a);
    if (device.empty()) {
      device = a;
      continue;
    }
    auto eq = a.find('=');
    if (eq == std::string::npos || eq == 0) return usage(a + ": expected ATTR=VALUE");
    std::string k = a.substr(0, eq);
    if (k != "delay" && k != "jitter" && k != "distribution" && k != "reorder")
      return usage(k + ": not an attribute of the delay line (delay, jitter, distribution, reorder)");
    attrs[k] = a.substr(eq + 1);
  }
  if (state.empty()) return usage("--state FILE is required");
  if (device.empty()) return usage("DEVICE is required");
  auto imp = parse_impairment(attrs);
  if (!imp) return usage(imp.error().what());
  if (!imp.value().netem()) return usage("nothing to do: give delay (with jitter, distribution, reorder)");

  // SIGTERM and SIGINT end the loop; blocked before anything is set up
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  ::sigprocmask(SIG_BLOCK, &set, nullptr);
  int sfd = ::signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
  if (sfd < 0) {
    std::cerr << "lanes-delay: signalfd: " << std::strerror(errno) << "\n";
    return 1;
  }

  EventLoop loop;  // outlives the line
  DelayLine line(seed);
  int ns = ::open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
  if (ns < 0) {
    std::cerr << "lanes-delay: this namespace: " << std::strerror(errno) << "\n";
    return 1;
  }
  if (auto st = line.add(ns, device, device, imp.value()); !st) {
    std::cerr << "lanes-delay: " << st.error().what() << "\n";
    return 1;
  }
  ::close(ns);
  if (auto st = line.attach(loop); !st) {
    std::cerr << "lanes-delay: " << st.error().what() << "\n";
    return 1;
  }
  if (auto w = loop.watch(sfd, EPOLLIN, [&](uint32_t) { loop.stop(); }); !w) {
    std::cerr << "lanes-delay: " << w.error().what() << "\n";
    return 1;
  }
  write_json_atomic(state, state_of(line, true, false));
  // every second the counts; the percentiles (a sort) only at the end, off the packets' way
  std::function<void()> tick = [&] {
    write_json_atomic(state, state_of(line, true, false));
    loop.at(EventLoop::Clock::now() + std::chrono::seconds(1), tick);
  };
  loop.at(EventLoop::Clock::now() + std::chrono::seconds(1), tick);
  lanes::log::info("lanes-delay: {} delayed: {}", device, imp.value().describe());
  loop.run();
  write_json_atomic(state, state_of(line, false, true));
  return 0;
}
