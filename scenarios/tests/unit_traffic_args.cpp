// lanes-traffic's flags: what a workload writes (to_argv) reads back the
// same (parse), and what is not a mode's flag is refused with its reason,
// by the struct and by the program.

#include <unistd.h>

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "lanes/scenarios/traffic_args.hpp"
#include "lanes/testbed/process.hpp"
#include "support.hpp"

namespace traffic = lanes::scenarios::traffic;

namespace {

// ARGS through to_argv and parse again
template <class A> A round_trip(const A& args) {
  auto argv = traffic::to_argv(args);
  REQUIRE(argv.front() == A::kMode);
  std::string error;
  auto back = traffic::parse<A>(std::span<const std::string>(argv).subspan(1), error);
  INFO(error);
  REQUIRE(back);
  return *back;
}

template <class A> std::string refusal(std::vector<std::string> words) {
  std::string error;
  auto a = traffic::parse<A>(words, error);
  CHECK_FALSE(a);
  return error;
}

}  // namespace

TEST_CASE("every lanes-traffic mode's flags read back as they were written", "[unit]") {
  traffic::SendArgs send;
  send.to = "2001:2::1";
  send.port = 6001;
  send.flows = 7;
  send.total = 123456789012ull;
  send.bind = "198.18.0.9";
  send.wait_go = true;
  send.congestion = "reno";
  auto s = round_trip(send);
  CHECK(s.to == send.to);
  CHECK(s.port == 6001);
  CHECK(s.flows == 7);
  CHECK(s.total == send.total);
  CHECK(s.bind == send.bind);
  CHECK(s.wait_go);
  CHECK(s.congestion == "reno");
  CHECK(s.bytes == traffic::SendArgs{}.bytes);  // a default stays the default
  CHECK_FALSE(s.mptcp);
  CHECK_FALSE(s.listen);
  CHECK_FALSE(s.window);  // the kernel's autotuning unless told

  // a window: each end's socket buffers (a long round trip's bound)
  traffic::RecvArgs windowed;
  windowed.window = 256 * 1024;
  CHECK(round_trip(windowed).window == windowed.window);

  // MPTCP's restore: the sender listens, the receiver opens the flows
  traffic::SendArgs listening;
  listening.listen = true;
  listening.mptcp = true;
  auto l = round_trip(listening);
  CHECK(l.listen);
  CHECK(l.mptcp);
  traffic::RecvArgs from;
  from.from = "2001:2::5";
  from.flows = 4;
  from.mptcp = true;
  auto rf = round_trip(from);
  CHECK(rf.from == from.from);
  CHECK(rf.mptcp);
  CHECK_FALSE(round_trip(traffic::RecvArgs{}).from);

  traffic::FetchArgs fetch;
  fetch.to = "198.18.1.1";
  fetch.rate = 250.5;
  fetch.duration = 0.1;  // a double that has no short binary form reads back exactly
  fetch.arrival = "constant";
  auto f = round_trip(fetch);
  CHECK(f.rate == 250.5);
  CHECK(f.duration == 0.1);
  CHECK(f.arrival == "constant");
  CHECK_FALSE(f.wait_go);
  CHECK_FALSE(round_trip(traffic::FetchArgs{}).rate);  // closed loop: no --rate at all

  traffic::ProbeSendArgs probe;
  probe.to = "198.18.1.1";
  probe.bind = {"198.18.0.1", "198.18.0.2", "198.18.0.3"};
  CHECK(round_trip(probe).bind == probe.bind);
  CHECK(traffic::to_argv(traffic::ProbeSendArgs{}) ==
        std::vector<std::string>{"probe-send", "--to", "", "--port", "5501", "--paths", "1", "--rate", "1000",
                                 "--seconds", "0"});

  traffic::TrainingArgs training;
  training.rank = 3;
  training.ranks = 4;
  training.compute_ms = 12.5;
  training.store = "198.18.2.2";
  training.store_port = 7001;
  training.next_port = 7100;
  training.resume = true;
  auto t = round_trip(training);
  CHECK(t.rank == 3);
  CHECK(t.compute_ms == 12.5);
  CHECK(t.store == training.store);
  CHECK(t.next_port == 7100);
  CHECK(t.resume);
  CHECK_FALSE(round_trip(traffic::TrainingArgs{}).next_port);

  traffic::CollectiveArgs coll;
  coll.op = "allgather";
  coll.listen_fd = 5;
  CHECK(round_trip(coll).op == "allgather");
  CHECK(round_trip(coll).listen_fd == 5);
  CHECK(round_trip(traffic::RecvArgs{}).flows == 0);
  CHECK(round_trip(traffic::ServeArgs{}).port == 5401);
  CHECK(round_trip(traffic::ProbeRecvArgs{}).port == 5501);
  CHECK(round_trip(traffic::StoreArgs{}).ranks == 0);
}

TEST_CASE("a flag that is not the mode's, or a malformed value, is refused with its reason", "[unit]") {
  CHECK(refusal<traffic::RecvArgs>({"--to", "x"}) == "--to: not a flag of recv");
  CHECK(refusal<traffic::SendArgs>({"--flows"}) == "--flows needs a value");
  CHECK(refusal<traffic::SendArgs>({"--flows", "many"}) == "--flows many: expected an integer");
  CHECK(refusal<traffic::SendArgs>({"--flows", "3x"}) == "--flows 3x: expected an integer");
  CHECK(refusal<traffic::SendArgs>({"--total", "-5"}) == "--total -5: expected a whole number");
  CHECK(refusal<traffic::FetchArgs>({"--rate", "nan"}) == "--rate nan: expected a number");
  CHECK(refusal<traffic::ProbeSendArgs>({"--bind", "a,,b"}) == "--bind a,,b: expected a value");
  CHECK(refusal<traffic::StoreArgs>({"--port", "99999999999"}) == "--port 99999999999: expected an integer");
  // a bool takes no value: the word after it is read as a flag
  CHECK(refusal<traffic::TrainingArgs>({"--resume", "yes"}) == "yes: not a flag of training");
  std::string error;
  CHECK(traffic::parse<traffic::RecvArgs>(std::vector<std::string>{"--congestion", ""}, error));  // empty: the default
}

TEST_CASE("lanes-traffic refuses a bad flag with exit 2 and says which", "[unit]") {
  std::string bin = (std::filesystem::path(lanes::test::lanes_bin()).parent_path() / "lanes-traffic").string();
  auto log = std::filesystem::temp_directory_path() / ("lanes-traffic-args-" + std::to_string(::getpid()) + ".err");
  auto run = [&](std::vector<std::string> args) {
    args.insert(args.begin(), bin);
    lanes::testbed::ProcessSpec spec{"lanes-traffic", args};
    spec.new_session = false;
    spec.log_path = log.string();
    auto r = lanes::testbed::run_capture(spec, std::chrono::seconds(30));
    REQUIRE(r.ok());
    std::ifstream in(log);
    std::string err((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    return std::pair{r.value().status, err};
  };
  auto [status, err] = run({"send", "--to", "198.18.0.1", "--flows", "two"});
  CHECK(status == 2);
  CHECK(err.find("lanes-traffic send: --flows two: expected an integer") != std::string::npos);
  std::tie(status, err) = run({"recv", "--prot", "5301"});
  CHECK(status == 2);
  CHECK(err.find("lanes-traffic recv: --prot: not a flag of recv") != std::string::npos);
  std::tie(status, err) = run({"send", "--to", "198.18.0.1", "--flows", "0"});
  CHECK(status == 2);
  CHECK(err.find("--flows") != std::string::npos);
  std::tie(status, err) = run({"nosuchmode"});
  CHECK(status == 2);
  CHECK(err.find("usage: lanes-traffic") != std::string::npos);
  std::filesystem::remove(log);
}
