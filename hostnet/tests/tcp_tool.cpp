// A minimal TCP load tool for tests: exactly N connections, no control
// connection (iperf3 always adds one).
//   lanes_test_tcp sink PORT                  accept and discard, forever
//   lanes_test_tcp send ADDR PORT N SECONDS   N connections, each writing for SECONDS
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

int main(int argc, char** argv) {
  if (argc >= 3 && std::string(argv[1]) == "sink") {
    int port = std::atoi(argv[2]);
    int s = socket(AF_INET6, SOCK_STREAM, 0);
    int one = 1, zero = 0;
    setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    setsockopt(s, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
    sockaddr_in6 a{};
    a.sin6_family = AF_INET6;
    a.sin6_port = htons(static_cast<uint16_t>(port));
    if (bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a) || listen(s, 256)) {
      perror("sink");
      return 1;
    }
    for (;;) {
      int c = accept(s, nullptr, nullptr);
      if (c < 0) continue;
      std::thread([c] {
        std::vector<char> buf(1 << 16);
        while (read(c, buf.data(), buf.size()) > 0) {
        }
        close(c);
      }).detach();
    }
  }
  if (argc >= 6 && std::string(argv[1]) == "send") {
    std::string addr = argv[2];
    int port = std::atoi(argv[3]), n = std::atoi(argv[4]);
    double secs = std::atof(argv[5]);
    std::vector<int> fds;
    for (int i = 0; i < n; ++i) {
      bool v6 = addr.find(':') != std::string::npos;
      int s = socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM, 0);
      int rc;
      if (v6) {
        sockaddr_in6 a{};
        a.sin6_family = AF_INET6;
        a.sin6_port = htons(static_cast<uint16_t>(port));
        inet_pton(AF_INET6, addr.c_str(), &a.sin6_addr);
        rc = connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a);
      } else {
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_port = htons(static_cast<uint16_t>(port));
        inet_pton(AF_INET, addr.c_str(), &a.sin_addr);
        rc = connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a);
      }
      if (rc) {
        perror("connect");
        return 1;
      }
      fds.push_back(s);
    }
    std::vector<std::thread> t;
    std::vector<long long> sent(static_cast<size_t>(n), 0);
    bool failed = false;
    auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(secs);
    for (int i = 0; i < n; ++i)
      t.emplace_back([&, i] {
        std::vector<char> buf(1 << 16, 'x');
        while (std::chrono::steady_clock::now() < end) {
          ssize_t w = write(fds[static_cast<size_t>(i)], buf.data(), buf.size());
          if (w < 0) {
            failed = true;
            return;
          }
          sent[static_cast<size_t>(i)] += w;
        }
        shutdown(fds[static_cast<size_t>(i)], SHUT_WR);
      });
    for (auto& th : t) th.join();
    long long total = 0;
    for (auto x : sent) total += x;
    std::printf("%lld\n", total);
    return failed ? 1 : 0;
  }
  std::fprintf(stderr, "usage: lanes_test_tcp sink PORT | send ADDR PORT N SECONDS\n");
  return 2;
}
