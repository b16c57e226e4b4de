#include "nic_sampler.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>

#include "lanes/testbed/netlink.hpp"

namespace lanes::scenarios {

namespace tb = lanes::testbed;

NicSampler::NicSampler(std::vector<Nic> nics, Clock::time_point t0, std::ostream* progress,
                       const RemoteSampler& remote, const std::string& log_dir)
    : nics_(std::move(nics)), t0_(t0), progress_(progress) {
  tx_.resize(nics_.size());
  rx_.resize(nics_.size());
  // tick 0 on the wall clock: the basis the other machines' samplers share
  timespec now{};
  ::clock_gettime(CLOCK_REALTIME, &now);
  int64_t t0_unix_ns = int64_t{now.tv_sec} * 1'000'000'000 + now.tv_nsec -
                       std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0_).count();
  std::map<int, std::vector<size_t>> by_machine;
  for (size_t k = 0; k < nics_.size(); ++k)
    if (nics_[k].machine >= 0) by_machine[nics_[k].machine].push_back(k);
  for (auto& [m, ks] : by_machine) {
    if (!remote) break;
    std::vector<std::string> specs;
    for (size_t k : ks) specs.push_back(nics_[k].node + ":" + nics_[k].ifname);
    std::string log = fmt::format("{}/nic-counters-{}.log", log_dir, m);
    std::error_code ec;
    std::filesystem::remove(log, ec);
    auto d = tb::Daemon::start(remote(m, specs, t0_unix_ns, log));
    if (!d) continue;  // its NICs read zero: the figures say so
    feeds_.push_back({std::move(d).value(), log, ks});
  }
  thread_ = std::thread([this] { loop(); });
  if (!feeds_.empty()) feed_thread_ = std::thread([this] {
      while (!stop_) {
        read_feeds();
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
    });
}

void NicSampler::read_feeds() {
  for (auto& f : feeds_) {
    std::ifstream in(f.log, std::ios::binary);
    if (!in) continue;
    in.seekg(f.read);
    for (std::string line; std::getline(in, line);) {
      if (in.eof()) break;  // still being written
      f.read = in.tellg();
      auto j = nlohmann::json::parse(line, nullptr, false);
      if (j.is_discarded() || !j.is_object() || !j.contains("i") || !j.contains("c")) continue;
      int64_t i = j["i"].get<int64_t>();
      const auto& c = j["c"];
      std::lock_guard<std::mutex> g(mu_);
      for (size_t x = 0; x < f.nics.size() && x < c.size(); ++x) {
        size_t k = f.nics[x];
        if (!c[x].is_array() || c[x].size() != 2) continue;
        uint64_t tx = c[x][0].get<uint64_t>(), rx = c[x][1].get<uint64_t>();
        // ticks before the first one seen read as its value: no traffic
        auto put = [&](std::vector<uint64_t>& v, uint64_t val) {
          if (i < 0) return;
          if (v.size() <= static_cast<size_t>(i)) v.resize(static_cast<size_t>(i) + 1, v.empty() ? val : v.back());
          v[static_cast<size_t>(i)] = val;
        };
        put(tx_[k], tx);
        put(rx_[k], rx);
      }
      f.last_tick = std::max(f.last_tick, i);
    }
  }
  cv_.notify_all();
}

void NicSampler::stop() {
  stop_ = true;
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (feed_thread_.joinable()) feed_thread_.join();
  for (auto& f : feeds_) (void)f.proc.stop(std::chrono::milliseconds(3000));
  if (!feeds_.empty()) read_feeds();  // what came before they stopped
  if (progress_ && tty_ && printed_) *progress_ << "\r\033[K" << std::flush;
}

void NicSampler::wait_sample_after(Clock::time_point t) {
  std::unique_lock<std::mutex> g(mu_);
  cv_.wait_for(g, std::chrono::seconds(1), [&] { return last_sample_ > t || stop_; });
  // the other machines' too: their lines come a little later
  int64_t tick = std::chrono::duration_cast<std::chrono::milliseconds>(t - t0_).count() /
                     static_cast<int64_t>(kSampleS * 1000) + 1;
  cv_.wait_for(g, std::chrono::seconds(2), [&] {
    return stop_ || std::all_of(feeds_.begin(), feeds_.end(), [&](const Feed& f) { return f.last_tick >= tick; });
  });
}

void NicSampler::set_step(const std::string& s, bool long_step) {
  std::lock_guard<std::mutex> g(mu_);
  step_ = s;
  step_start_ = Clock::now();
  long_step_ = long_step;
}

std::vector<reports::Series> NicSampler::series() const {
  std::lock_guard<std::mutex> g(mu_);
  std::vector<reports::Series> out;
  for (size_t k = 0; k < nics_.size(); ++k)
    for (int dir = 0; dir < 2; ++dir) {
      const auto& c = dir ? rx_[k] : tx_[k];
      reports::Series s;
      s.host = nics_[k].host_name;
      s.nic = nics_[k].nic;
      s.direction = dir ? "rx" : "tx";
      s.name = fmt::format("{} nic{} {}", s.host, s.nic, s.direction);
      s.unit = "Gbit/s";
      s.interval_s = kSampleS;
      for (size_t i = 1; i < c.size(); ++i)
        s.values.push_back(static_cast<double>(c[i] - c[i - 1]) * 8 / kSampleS / 1e9);
      out.push_back(std::move(s));
    }
  return out;
}

void NicSampler::loop() {
  std::map<int, tb::Netlink> nl;  // per ns fd, opened in this thread
  for (const auto& n : nics_)
    if (n.ns_fd >= 0 && !nl.count(n.ns_fd)) {
      auto x = tb::Netlink::open_in(n.ns_fd, n.host_name);
      if (x) nl.emplace(n.ns_fd, std::move(x).value());
    }
  tty_ = progress_ && ::isatty(STDERR_FILENO);
  auto last_print = Clock::now();
  for (uint64_t i = 0; !stop_; ++i) {
    std::this_thread::sleep_until(t0_ + std::chrono::microseconds(static_cast<int64_t>(i * kSampleS * 1e6)));
    std::map<int, std::vector<tb::LinkInfo>> links;
    for (auto& [fd, n] : nl) {
      auto l = n.links();
      if (l) links[fd] = std::move(l).value();
    }
    {
      std::lock_guard<std::mutex> g(mu_);
      for (size_t k = 0; k < nics_.size(); ++k) {
        if (nics_[k].ns_fd < 0) continue;  // another machine's: its feed fills it
        uint64_t tx = tx_[k].empty() ? 0 : tx_[k].back(), rx = rx_[k].empty() ? 0 : rx_[k].back();
        for (const auto& l : links[nics_[k].ns_fd])
          if (l.name == nics_[k].ifname) tx = l.tx_bytes, rx = l.rx_bytes;
        tx_[k].push_back(tx);
        rx_[k].push_back(rx);
      }
      last_sample_ = Clock::now();
    }
    cv_.notify_all();
    if (progress_ && i % 10 == 0 && i > 0) print_progress(last_print);
  }
}

void NicSampler::print_progress(Clock::time_point& last) {
  std::string step;
  double elapsed;
  bool long_step;
  std::string rates;
  {
    std::lock_guard<std::mutex> g(mu_);
    step = step_;
    long_step = long_step_;
    elapsed = std::chrono::duration<double>(Clock::now() - step_start_).count();
    // per host its NICs' Gbit/s over the last second; the 8 busiest shown
    std::vector<std::pair<std::string, std::vector<double>>> hosts;
    for (size_t k = 0; k < nics_.size(); ++k) {
      const auto& t = tx_[k];
      const auto& r = rx_[k];
      if (t.size() < 11) return;
      double g1 = static_cast<double>(t.back() - t[t.size() - 11] + r.back() - r[r.size() - 11]) * 8 / 1e9;
      if (hosts.empty() || hosts.back().first != nics_[k].host_name) hosts.push_back({nics_[k].host_name, {}});
      hosts.back().second.push_back(g1);
    }
    constexpr size_t kShown = 8;
    auto total = [](const std::vector<double>& v) { return std::accumulate(v.begin(), v.end(), 0.0); };
    std::vector<size_t> order(hosts.size());
    std::iota(order.begin(), order.end(), size_t{0});
    if (hosts.size() > kShown) {
      std::stable_sort(order.begin(), order.end(),
                       [&](size_t a, size_t b) { return total(hosts[a].second) > total(hosts[b].second); });
      order.resize(kShown);
      std::sort(order.begin(), order.end());
    }
    for (size_t i : order) {
      rates += " " + hosts[i].first + ":";
      for (double rate : hosts[i].second) rates += fmt::format(" {:.2f}", rate);
    }
    if (hosts.size() > kShown) rates += fmt::format(" (+{} more hosts)", hosts.size() - kShown);
  }
  if (!long_step || elapsed < 2) return;
  if (tty_) {
    *progress_ << "\r\033[K  " << fmt::format("{} · {:.0f} s · Gbit/s per NIC{}", step, elapsed, rates)
               << std::flush;
    printed_ = true;
  } else if (Clock::now() - last >= std::chrono::seconds(5)) {
    *progress_ << fmt::format("  … {} · {:.0f} s · Gbit/s per NIC{}\n", step, elapsed, rates) << std::flush;
    last = Clock::now();
  }
}

}  // namespace lanes::scenarios
