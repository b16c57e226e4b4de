#include "lanes/testbed/live_run.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <ctime>
#include <filesystem>
#include <fstream>

#include "lanes/testbed/delay_line.hpp"
#include "lanes/testbed/log.hpp"
#include "lanes/testbed/process.hpp"
#include "lanes/testbed/supervisor.hpp"

namespace lanes::testbed {

struct LiveRun::Impl {
  std::optional<RunRegistry> reg;  // a copy: the caller's may go first
  std::string id;
  std::optional<RunLock> lock;
  std::optional<Fabric> tb;
  RunState state;
  KernelFeatures features;
  std::chrono::microseconds daemons_took{0};
  bool kept = false, down = false;
};

LiveRun::LiveRun(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
LiveRun::LiveRun(LiveRun&&) noexcept = default;
LiveRun& LiveRun::operator=(LiveRun&&) noexcept = default;
LiveRun::~LiveRun() {
  if (impl_ && !impl_->kept) {
    auto rep = down();
    for (const auto& e : rep.errors) log::error("run {}: teardown: {}", impl_->id, e);
  }
}

Result<LiveRun> LiveRun::start(const Topology& topo, const RunRegistry& reg, LiveRunOptions opt) {
  if (auto st = check_kernel_for(topo); !st) return st.error();  // before anything is made
  // a link's delay by lanes' delay line (no netem, or impair-engine="lanes")
  // is lanes-delay's, a daemon: a run without roles has no supervisor to keep it
  if (opt.roles.empty() && delay_by_lanes(topo))
    for (const auto& l : topo.links)
      if (l.impair.netem())
        return os_error(ENOTSUP, fmt::format("{}:{}: {}: here a link's delay is lanes' delay line's (lanes-delay, "
                                             "a daemon of the run), and this run starts none",
                                             l.impair_loc.file, l.impair_loc.line, l.impair.netem_parts()));
  auto impl = std::make_unique<Impl>();
  impl->reg.emplace(reg);
  std::string id = opt.run_id.empty() ? reg.new_id() : opt.run_id;
  impl->id = id;
  if (reg.exists(id) || reg.owner_of(id) || !list_netns(RunRegistry::netns_prefix(id)).empty())
    return std::system_error(std::make_error_code(std::errc::file_exists),
                             "run id '" + id + "' is already in use (lanes status; lanes down " + id + ")");
  auto lock = reg.create(id);
  if (!lock) return lock.error();
  impl->lock.emplace(std::move(lock).value());
  RunState& state = impl->state;
  state.id = id;
  state.topology_name = topo.name;
  state.topology_file = opt.topology_file;
  state.phase = "creating";
  state.owner = ::getpid();
  state.held = opt.held;
  state.created_unix = static_cast<int64_t>(std::time(nullptr));
  state.overrides = opt.overrides;
  {
    std::ofstream copy(reg.layout(id).topology(), std::ios::binary);
    copy << opt.topology_xml;
  }
  if (auto st = reg.save(state); !st) {
    (void)reg.remove_dir(id);
    return st.error();
  }
  auto tb = Fabric::build(topo, id, opt.shard);
  if (!tb) {
    (void)reg.remove_dir(id);
    return tb.error();
  }
  impl->tb.emplace(std::move(tb).value());
  std::string bin_dir = opt.bin_dir.empty() ? self_dir() : opt.bin_dir;
  if (!opt.roles.empty()) {
    auto t0 = std::chrono::steady_clock::now();
    auto rollback = [&](const std::system_error& why) -> Result<LiveRun> {
      impl->tb.reset();
      auto rep = teardown_run(id, state.daemons, reg.base());
      for (const auto& e : rep.errors) log::error("run {}: cleanup: {}", id, e);
      std::error_code ec;
      std::string keep = "/tmp/lanes-failed-" + id;
      std::filesystem::remove_all(keep, ec);
      const std::string logs = reg.layout(id).logs();
      std::filesystem::rename(logs, keep, ec);
      (void)reg.remove_dir(id);
      // the logs' new place in the message, in place of the old one; the
      // reason (the code's words) is appended once, as before
      std::string msg = message_of(why);
      if (!ec) {
        for (size_t at; (at = msg.find(logs)) != std::string::npos;) msg.replace(at, logs.size(), keep);
        msg += " (logs kept in " + keep + ")";
      }
      return std::system_error(why.code(), msg);
    };
    DeployContext ctx{*impl->tb, reg, id, {}, bin_dir, {}, opt.shard};
    ctx.features = probe_kernel_features();
    impl->features = ctx.features;
    auto since = [t = t0]() mutable {
      auto now = std::chrono::steady_clock::now();
      double ms = std::chrono::duration<double, std::milli>(now - t).count();
      t = now;
      return ms;
    };
    // the links' delay line where the kernel has no netem, before every role's daemons
    if (auto st = deploy_delay_lines(ctx); !st) return rollback(st.error());
    for (const auto& role : opt.roles) {
      log::debug("run {}: deploying {}", id, role->name());
      if (auto st = role->deploy(ctx); !st) return rollback(st.error());
    }
    log::debug("run {}: roles deployed in {:.0f} ms", id, since());
    if (auto st = write_daemon_requests(reg, id, ctx.daemons); !st) return rollback(st.error());
    log::debug("run {}: daemon requests written in {:.0f} ms", id, since());
    auto sup =
        start_supervisor(reg, id, opt.daemons_timeout, opt.bin_dir.empty() ? "" : bin_dir + "/lanes", opt.give_up);
    if (!sup) return rollback(sup.error());
    log::debug("run {}: the supervisor had every daemon ready in {:.0f} ms", id, since());
    state.daemons.push_back(sup.value());
    impl->daemons_took =
        std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0);
  }
  state.phase = "up";
  if (auto st = reg.save(state); !st) {
    LiveRun run(std::move(impl));  // its destructor takes it down
    return st.error();
  }
  return LiveRun(std::move(impl));
}

const std::string& LiveRun::id() const { return impl_->id; }
Fabric& LiveRun::tb() { return *impl_->tb; }
const Topology& LiveRun::topology() const { return impl_->tb->topology(); }
const RunRegistry& LiveRun::registry() const { return *impl_->reg; }
std::string LiveRun::dir() const { return impl_->reg->dir(impl_->id); }
const KernelFeatures& LiveRun::features() const { return impl_->features; }
std::chrono::microseconds LiveRun::daemons_took() const { return impl_->daemons_took; }

TeardownReport LiveRun::down() {
  TeardownReport rep;
  if (!impl_ || impl_->down) return rep;
  impl_->down = true;
  impl_->tb.reset();
  impl_->state.phase = "stopping";
  (void)impl_->reg->save(impl_->state);
  rep = teardown_run(impl_->id, impl_->state.daemons, impl_->reg->base());
  if (rep.errors.empty()) {
    if (auto st = impl_->reg->remove_dir(impl_->id); !st) rep.errors.push_back(st.error().what());
  }
  impl_->lock.reset();
  return rep;
}

void LiveRun::keep() {
  impl_->kept = true;
  if (impl_->state.held) {  // from now on the run lives on its own
    impl_->state.held = false;
    if (auto st = impl_->reg->save(impl_->state); !st) log::error("run {}: {}", impl_->id, st.error().what());
  }
  impl_->tb.reset();
  impl_->lock.reset();
}

}  // namespace lanes::testbed
