// The HTML report opened in headless Chromium, in a network namespace of
// its own with nothing in it, so the page can only show what it carries.
//
// Two tests, so that each gives the same answer on every machine:
// - a report rendered from a checked-in results.json (tests/data/
//   report-fixture, a real nic-failover run kept once): its screenshot's
//   pixels show the page, each NIC's chart line and the fault markers;
// - the report of this build's own nic-failover run (the scenario test
//   writes it), checked structurally through the DOM Chromium renders:
//   every assertion, every marker the run recorded, every chart. No pixels
//   of a live run are counted: where its lines and markers land varies.

#include <catch2/catch.hpp>
#include <zlib.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <unistd.h>

#include "lanes/testbed/process.hpp"
#include "lanes/reports/result.hpp"
#include "lanes/reports/writers.hpp"

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

// How many of the image's pixel columns show a stacked area of colour
// R,G,B: the chart fills them at 85% opacity, over the workload's shaded
// span (#eef3fb) or the white chart. An area that crosses its chart holds
// most of the columns; a legend swatch, a dozen.
size_t area_columns(const Image& img, uint8_t r, uint8_t g, uint8_t b) {
  auto blend = [](uint8_t c, uint8_t bg) { return static_cast<int>(0.85 * c + 0.15 * bg + 0.5); };
  const std::array<std::array<int, 3>, 2> want = {{{blend(r, 0xee), blend(g, 0xf3), blend(b, 0xfb)},
                                                   {blend(r, 0xff), blend(g, 0xff), blend(b, 0xff)}}};
  size_t n = 0;
  for (size_t x = 0; x < img.width; ++x)
    for (size_t y = 0; y < img.height; ++y) {
      const uint8_t* p = &img.rgba[(y * img.width + x) * 4];
      bool hit = false;
      for (const auto& w : want)
        hit = hit || (std::abs(p[0] - w[0]) < 6 && std::abs(p[1] - w[1]) < 6 && std::abs(p[2] - w[2]) < 6);
      if (hit) {
        ++n;
        break;
      }
    }
  return n;
}

size_t count_of(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t p = text.find(what); p != std::string::npos; p = text.find(what, p + 1)) ++n;
  return n;
}

std::string html_escaped(std::string s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      default: out += c;
    }
  }
  return out;
}

void require_root_or_skip() {
  if (::geteuid() != 0) {
    std::fprintf(stderr, "NOT RUN: needs root (the browser runs in a network namespace of its own)\n");
    std::exit(77);  // the only way to 77: the tests' main exits 1 on any failure
  }
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

TEST_CASE("a report rendered from a checked-in results.json draws its charts and markers in headless Chromium",
          "[report]") {
  require_root_or_skip();
  auto dir = std::filesystem::temp_directory_path() / ("lanes-report-fixture-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  auto r0 = lanes::reports::read_results_json(std::string(LANES_REPORTS_TEST_DATA) + "/report-fixture/results.json");
  lanes::reports::write_all(r0, dir.string());
  std::string report = (dir / "report.html").string();
  std::string shot = (dir / "report.png").string();
  auto r = chromium({"--window-size=1280,2400", "--screenshot=" + shot, "file://" + report});
  INFO(r.out);
  CHECK(r.out.find("CONSOLE MESSAGES") == std::string::npos);
  REQUIRE(std::filesystem::exists(shot));
  Image img = decode_png(shot);
  std::filesystem::remove_all(dir);
  CHECK(img.width == 1280);
  CHECK(img.height == 2400);
  size_t background = 0;  // the page's light greys and white
  for (size_t i = 0; i < img.rgba.size(); i += 4)
    background += std::min({img.rgba[i], img.rgba[i + 1], img.rgba[i + 2]}) >= 236;
  size_t total = size_t(img.width) * img.height;
  CHECK(background < total * 95 / 100);  // something was drawn
  // the header bar, the chart lines of the four NICs and the fault markers
  CHECK(pixels_near(img, 0x1d, 0x23, 0x30) > 20000);
  // each NIC's area runs across its chart (about 1060 of the 1280
  // columns), but nic2's, which the fault took down at 2.6 s of 13.3 s,
  // ends there: at least half the columns for three, and for nic2 a
  // fifth's share (more than its legend swatch's dozen), less than half
  std::map<std::string, size_t> areas = {{"nic0", area_columns(img, 0x1f, 0x77, 0xb4)},
                                         {"nic1", area_columns(img, 0xff, 0x7f, 0x0e)},
                                         {"nic2", area_columns(img, 0x2c, 0xa0, 0x2c)},
                                         {"nic3", area_columns(img, 0xd6, 0x27, 0x28)}};
  for (const auto& [nic, n] : areas) {
    INFO(nic << "'s area in " << n << " of " << img.width << " columns");
    if (nic == "nic2") {
      CHECK(n > 100);
      CHECK(n < img.width / 2);
    } else {
      CHECK(n > img.width / 2);
    }
  }
  // the two faults' markers: dashed vertical lines down the chart, each a
  // run of the fault red in one column (a label's text is a few pixels
  // high); antialiasing may spread one over two columns
  std::vector<size_t> marker_columns;
  for (size_t x = 0; x < img.width; ++x) {
    size_t n = 0;
    for (size_t y = 0; y < img.height; ++y) {
      const uint8_t* p = &img.rgba[(y * img.width + x) * 4];
      n += std::abs(p[0] - 0xc6) < 24 && std::abs(p[1] - 0x28) < 24 && std::abs(p[2] - 0x28) < 24;
    }
    if (n >= 60 && (marker_columns.empty() || x > marker_columns.back() + 2)) marker_columns.push_back(x);
  }
  INFO("fault markers found at columns: " << marker_columns.size());
  CHECK(marker_columns.size() == 2);
}

TEST_CASE("the report of a real run holds every assertion, marker and chart in the DOM Chromium renders",
          "[scenario]") {
  require_root_or_skip();
  std::string dir = std::string(LANES_BINARY_DIR) + "/scenario-results/nic-failover";
  std::string report = dir + "/report.html";
  INFO("the scenario test 'scenario nic-failover' writes " << report);
  REQUIRE(std::filesystem::exists(report));
  auto results = lanes::reports::read_results_json(dir + "/results.json");
  auto dom = chromium({"--dump-dom", "file://" + report});
  INFO(dom.out.substr(0, 2000));
  CHECK(dom.out.find("CONSOLE MESSAGES") == std::string::npos);
  REQUIRE(!results.scenarios.empty());
  size_t faults = 0, charted = 0;
  for (const auto& sc : results.scenarios) {
    CHECK(dom.out.find(html_escaped(sc.name)) != std::string::npos);
    for (const auto& a : sc.assertions) {
      INFO("assertion " << a.name);
      CHECK(dom.out.find(html_escaped(a.name)) != std::string::npos);
    }
    for (const auto& ph : sc.phases) {
      charted += !ph.workloads.empty();
      for (const auto& m : ph.markers) faults += m.kind == "fault";
    }
  }
  // a chart for every phase that moved traffic, and the topology drawing
  CHECK(count_of(dom.out, "<svg") >= charted + 1);
  // every fault of the run is drawn on its phase's chart
  CHECK(count_of(dom.out, "class=\"marker\"") >= faults);
  CHECK(faults >= 2);  // nic-failover has a NIC going down and coming back
}
