#pragma once
// Fixtures for root-tier tests: a run built from a topology file, owned by
// the test and torn down however the test ends.

#include <filesystem>
#include <optional>
#include <string>

#include "lanes/core/deploy.hpp"
#include "lanes/core/process.hpp"
#include "lanes/core/run_registry.hpp"
#include "lanes/core/supervisor.hpp"
#include "lanes/core/testbed.hpp"
#include "lanes/core/topology_loader.hpp"
#include "lanes/switch/switches.hpp"
#include "support.hpp"

namespace lanes::test {

// True once a TCP socket listens on PORT in namespace NS_FD (ss inside it).
inline bool listening(int ns_fd, int port) {
  testbed::ProcessSpec spec{"ss", {"ss", "-Hltn", "sport = :" + std::to_string(port)}};
  spec.netns_fd = ns_fd;
  spec.new_session = false;
  auto r = testbed::run_capture(spec, std::chrono::seconds(2));
  return r && r.value().status == 0 && r.value().out.find("LISTEN") != std::string::npos;
}

inline void wait_listening(int ns_fd, int port) {
  if (!eventually([&] { return listening(ns_fd, port); })) throw std::runtime_error("nothing listens on port " + std::to_string(port));
}

// True once the links of NL named IFNAMES have together sent BYTES more
// than when asked (a transfer is under way), within TIMEOUT: a bounded
// wait on what the kernel counts, where a test would otherwise sleep.
inline bool traffic_flowing(testbed::Netlink& nl, const std::vector<std::string>& ifnames, uint64_t bytes,
                            std::chrono::milliseconds timeout = std::chrono::milliseconds(15'000)) {
  auto sent = [&] {
    uint64_t n = 0;
    if (auto links = nl.links())
      for (const auto& l : links.value())
        for (const auto& i : ifnames)
          if (l.name == i) n += l.tx_bytes;
    return n;
  };
  uint64_t start = sent();
  return eventually([&] { return sent() >= start + bytes; }, timeout, std::chrono::milliseconds(20));
}

class ScopedRun {
 public:
  // WITH_SWITCHES: also start the run's supervisor (gobgpd and the FIB
  // agent on every switch), as `lanes up` does.
  explicit ScopedRun(const std::string& topology_file, bool with_switches = false,
                     const testbed::Deployer& deploy = nullptr) {
    require_root();
    // a registered, locked run: a concurrent `lanes clean` leaves it alone
    id_ = reg_.new_id();
    auto lock = reg_.create(id_);
    if (!lock) throw lock.error();
    lock_.emplace(std::move(lock).value());
    testbed::RunState st;
    st.id = id_;
    st.phase = "up";
    st.held = true;  // dead with the test process: its supervisor stops, a clean removes it
    st.owner = ::getpid();
    st.topology_name = "test";
    (void)reg_.save(st);
    auto topo = testbed::load_topology(topology_file);
    auto tb = testbed::Testbed::build(topo, id_);  // removes its own objects on failure
    if (!tb) {
      (void)reg_.remove_dir(id_);
      throw tb.error();
    }
    tb_.emplace(std::move(tb).value());
    if (with_switches) {
      std::filesystem::copy_file(topology_file, reg_.dir(id_) + "/topology.xml");
      auto fail = [&](const std::system_error& e) {
        testbed::teardown_run(id_, daemons_, reg_.base());
        (void)reg_.remove_dir(id_);
        throw e;
      };
      testbed::DeployContext ctx{*tb_, reg_, id_, testbed::probe_kernel_features(),
                                 std::filesystem::path(lanes_bin()).parent_path().string(), {}};
      if (auto d = testbed::deploy_switches(ctx); !d) fail(d.error());
      if (deploy)
        if (auto d = deploy(ctx); !d) fail(d.error());
      if (auto w = testbed::write_daemon_requests(reg_, id_, ctx.daemons); !w) fail(w.error());
      auto sup = testbed::start_supervisor(reg_, id_, std::chrono::seconds(30), lanes_bin());
      if (!sup) fail(sup.error());
      daemons_.push_back(sup.value());
    }
  }
  ~ScopedRun() {
    tb_.reset();
    testbed::teardown_run(id_, daemons_, reg_.base());
    (void)reg_.remove_dir(id_);
  }
  ScopedRun(const ScopedRun&) = delete;
  ScopedRun& operator=(const ScopedRun&) = delete;

  testbed::Testbed& tb() { return *tb_; }
  const testbed::Topology& topo() { return tb_->topology(); }
  const std::string& id() const { return id_; }
  const testbed::RunRegistry& registry() const { return reg_; }
  int node(const std::string& name) { return topo().find_node(name); }

  // Runs ARGV inside NODE's namespace and returns its exit status.
  int run_in(const std::string& node_name, std::vector<std::string> argv) {
    testbed::ProcessSpec spec;
    spec.name = argv[0] + " on " + node_name;
    spec.argv = std::move(argv);
    spec.netns_fd = tb().netns(node(node_name)).fd();
    spec.log_path = reg_.dir(id_) + "/cmd.log";
    auto d = testbed::Daemon::start(spec);
    if (!d) return -1;
    return d.value().wait();
  }

 private:
  testbed::RunRegistry reg_;
  std::string id_;
  std::optional<testbed::RunLock> lock_;
  std::optional<testbed::Testbed> tb_;
  std::vector<testbed::DaemonRecord> daemons_;
};

}  // namespace lanes::test
