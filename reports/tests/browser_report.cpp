// scenario tier: the HTML report of a real run (the nic-failover scenario
// test writes it) opened in headless Chromium, in a network namespace of
// its own with nothing in it, so the page can only show what it carries.
// The test reads the screenshot's pixels: the page rendered, its charts
// drew their lines and fault markers, and the browser logged no console
// message.

#include <catch2/catch.hpp>
#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <unistd.h>

#include "lanes/testbed/process.hpp"

namespace {

struct Image {
  uint32_t width = 0, height = 0;
  std::vector<uint8_t> rgba;  // 4 bytes per pixel
};

uint32_t be32(const uint8_t* p) { return uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | p[3]; }

// PNG as Chromium writes screenshots: 8-bit RGB or RGBA, not interlaced.
Image decode_png(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<uint8_t> f((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  REQUIRE(f.size() > 33);
  REQUIRE(std::memcmp(f.data(), "\x89PNG\r\n\x1a\n", 8) == 0);
  Image img;
  int color = 0, depth = 0, interlace = 0;
  std::vector<uint8_t> idat;
  for (size_t p = 8; p + 8 <= f.size();) {
    uint32_t len = be32(&f[p]);
    std::string type(reinterpret_cast<const char*>(&f[p + 4]), 4);
    REQUIRE(p + 12 + len <= f.size());
    const uint8_t* d = &f[p + 8];
    if (type == "IHDR") {
      img.width = be32(d);
      img.height = be32(d + 4);
      depth = d[8];
      color = d[9];
      interlace = d[12];
    } else if (type == "IDAT") {
      idat.insert(idat.end(), d, d + len);
    } else if (type == "IEND") {
      break;
    }
    p += 12 + len;
  }
  REQUIRE(depth == 8);
  REQUIRE((color == 2 || color == 6));
  REQUIRE(interlace == 0);
  size_t bpp = color == 6 ? 4 : 3, stride = img.width * bpp;
  std::vector<uint8_t> raw((stride + 1) * img.height);
  uLongf raw_len = raw.size();
  REQUIRE(uncompress(raw.data(), &raw_len, idat.data(), idat.size()) == Z_OK);
  std::vector<uint8_t> cur(stride), prev(stride, 0);
  img.rgba.resize(size_t(img.width) * img.height * 4);
  for (uint32_t y = 0; y < img.height; ++y) {
    const uint8_t* row = &raw[y * (stride + 1)];
    uint8_t filter = row[0];
    for (size_t x = 0; x < stride; ++x) {
      int a = x >= bpp ? cur[x - bpp] : 0, b = prev[x], c = x >= bpp ? prev[x - bpp] : 0;
      int v = row[1 + x];
      switch (filter) {
        case 1: v += a; break;
        case 2: v += b; break;
        case 3: v += (a + b) / 2; break;
        case 4: {
          int pp = a + b - c, pa = std::abs(pp - a), pb = std::abs(pp - b), pc = std::abs(pp - c);
          v += pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
          break;
        }
        default: break;
      }
      cur[x] = static_cast<uint8_t>(v);
    }
    for (uint32_t x = 0; x < img.width; ++x) {
      uint8_t* o = &img.rgba[(size_t(y) * img.width + x) * 4];
      o[0] = cur[x * bpp], o[1] = cur[x * bpp + 1], o[2] = cur[x * bpp + 2], o[3] = bpp == 4 ? cur[x * bpp + 3] : 255;
    }
    std::swap(cur, prev);
  }
  return img;
}

size_t pixels_near(const Image& img, uint8_t r, uint8_t g, uint8_t b) {
  size_t n = 0;
  for (size_t i = 0; i < img.rgba.size(); i += 4)
    n += std::abs(img.rgba[i] - r) < 12 && std::abs(img.rgba[i + 1] - g) < 12 && std::abs(img.rgba[i + 2] - b) < 12;
  return n;
}

lanes::testbed::Captured chromium(std::vector<std::string> args) {
  // a network namespace of its own: nothing to reach but loopback
  std::vector<std::string> argv = {"unshare", "--net", "chromium", "--headless", "--no-sandbox", "--disable-gpu",
                                   "--hide-scrollbars", "--enable-logging=stderr", "--v=0"};
  argv.insert(argv.end(), args.begin(), args.end());
  lanes::testbed::ProcessSpec spec{"chromium", argv};
  spec.new_session = false;
  spec.log_path = std::filesystem::temp_directory_path() / ("lanes-chromium-" + std::to_string(::getpid()) + ".log");
  std::filesystem::remove(spec.log_path);
  auto r = lanes::testbed::run_capture(spec, std::chrono::seconds(90));
  REQUIRE(r.ok());
  std::ifstream log(spec.log_path);
  std::string line, console;
  while (std::getline(log, line))
    if (line.find(":CONSOLE") != std::string::npos) console += line + "\n";
  std::filesystem::remove(spec.log_path);
  auto c = r.value();
  c.out += console.empty() ? "" : "\nCONSOLE MESSAGES:\n" + console;
  return c;
}

}  // namespace

TEST_CASE("the report of a real run renders in headless Chromium with its charts and no console errors", "[scenario]") {
  if (::geteuid() != 0) {
    WARN("not run: needs root (the browser runs in a network namespace of its own)");
    std::exit(77);
  }
  std::string dir = std::string(LANES_BINARY_DIR) + "/scenario-results/nic-failover";
  std::string report = dir + "/report.html";
  INFO("the scenario test 'scenario nic-failover' writes " << report);
  REQUIRE(std::filesystem::exists(report));
  std::string shot = dir + "/report.png";
  std::filesystem::remove(shot);
  auto r = chromium({"--window-size=1280,2400", "--screenshot=" + shot, "file://" + report});
  INFO(r.out);
  CHECK(r.out.find("CONSOLE MESSAGES") == std::string::npos);
  REQUIRE(std::filesystem::exists(shot));
  Image img = decode_png(shot);
  CHECK(img.width == 1280);
  CHECK(img.height == 2400);
  size_t background = 0;  // the page's light greys and white
  for (size_t i = 0; i < img.rgba.size(); i += 4)
    background += std::min({img.rgba[i], img.rgba[i + 1], img.rgba[i + 2]}) >= 236;
  size_t total = size_t(img.width) * img.height;
  CHECK(background < total * 95 / 100);  // something was drawn
  // the header bar, the chart lines of the four NICs and the fault markers
  CHECK(pixels_near(img, 0x1d, 0x23, 0x30) > 20000);
  std::map<std::string, size_t> lines = {{"nic0", pixels_near(img, 0x1f, 0x77, 0xb4)},
                                         {"nic1", pixels_near(img, 0xff, 0x7f, 0x0e)},
                                         {"nic2", pixels_near(img, 0x2c, 0xa0, 0x2c)},
                                         {"nic3", pixels_near(img, 0xd6, 0x27, 0x28)}};
  for (const auto& [nic, n] : lines) {
    INFO(nic << " line pixels: " << n);
    CHECK(n > 100);
  }
  CHECK(pixels_near(img, 0xc6, 0x28, 0x28) > 30);  // the red fault markers (dashed, 1 px) and their labels
  // the rendered DOM has every chart
  auto dom = chromium({"--dump-dom", "file://" + report});
  size_t svgs = 0;
  for (size_t p = dom.out.find("<svg"); p != std::string::npos; p = dom.out.find("<svg", p + 1)) ++svgs;
  CHECK(svgs >= 2);  // the throughput chart and the topology
  CHECK(dom.out.find("class=\"marker\"") != std::string::npos);
}
