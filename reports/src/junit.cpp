// JUnit XML as GitLab, Jenkins and GitHub test reporters read it (the
// Jenkins/Ant JUnit schema: testsuites > testsuite > testcase with
// failure, error, system-out).

#include <fmt/format.h>
#include <unistd.h>

#include <pugixml.hpp>
#include <sstream>

#include "lanes/reports/writers.hpp"

namespace lanes::reports {

namespace {

std::string secs(double s) { return fmt::format("{:.3f}", s); }

std::string hostname() {
  char buf[256] = {};
  ::gethostname(buf, sizeof buf - 1);
  return buf[0] ? buf : "localhost";
}

// JUnit timestamps are ISO 8601 without a zone designator
std::string junit_time(const std::string& iso) {
  std::string t = iso;
  if (!t.empty() && t.back() == 'Z') t.pop_back();
  return t.empty() ? "1970-01-01T00:00:00" : t;
}

}  // namespace

std::string junit_xml(const RunResult& r) {
  pugi::xml_document doc;
  auto decl = doc.append_child(pugi::node_declaration);
  decl.append_attribute("version") = "1.0";
  decl.append_attribute("encoding") = "UTF-8";
  auto suites = doc.append_child("testsuites");
  int tests = 0, failures = 0, errors = 0;
  int id = 0;
  for (const auto& s : r.scenarios) {
    auto suite = suites.append_child("testsuite");
    int t = 0, f = 0, e = 0;
    for (const auto& a : s.assertions) ++t, f += !a.passed;
    if (!s.error.empty()) ++t, ++e;
    if (!s.not_run.empty()) ++t;
    suite.append_attribute("name") = ("lanes." + s.name).c_str();
    suite.append_attribute("tests") = t;
    suite.append_attribute("failures") = f;
    suite.append_attribute("errors") = e;
    suite.append_attribute("skipped") = s.not_run.empty() ? 0 : 1;
    suite.append_attribute("time") = secs(s.duration_s).c_str();
    suite.append_attribute("timestamp") = junit_time(r.started).c_str();
    suite.append_attribute("hostname") = hostname().c_str();
    suite.append_attribute("id") = id++;
    suite.append_attribute("package") = "lanes";
    auto props = suite.append_child("properties");
    auto prop = [&](const char* k, const std::string& v) {
      auto p = props.append_child("property");
      p.append_attribute("name") = k;
      p.append_attribute("value") = v.c_str();
    };
    prop("description", s.description);
    prop("file", s.file);
    prop("lanes", r.lanes_version);
    prop("kernel", r.kernel);
    prop("gobgpd", r.gobgpd);
    prop("seed", std::to_string(r.seed));
    for (const auto& a : s.assertions) {
      auto tc = suite.append_child("testcase");
      std::string name = a.name + (a.phase.empty() ? "" : " [" + a.phase + "]");
      tc.append_attribute("name") = name.c_str();
      tc.append_attribute("classname") = ("lanes." + s.name).c_str();
      tc.append_attribute("time") = "0";
      if (!a.passed) {
        auto fl = tc.append_child("failure");
        std::string msg = fmt::format("expected {}, measured {}", a.expected, a.measured);
        fl.append_attribute("message") = msg.c_str();
        fl.append_attribute("type") = "assertion";
        std::string body = fmt::format("{}:{}: {}\nexpected: {}\nmeasured: {}{}", s.file, a.line, a.name, a.expected,
                                       a.measured, a.message.empty() ? "" : "\n" + a.message);
        fl.text() = body.c_str();
      }
    }
    if (!s.not_run.empty()) {
      auto tc = suite.append_child("testcase");
      tc.append_attribute("name") = "run";
      tc.append_attribute("classname") = ("lanes." + s.name).c_str();
      tc.append_attribute("time") = "0";
      tc.append_child("skipped").append_attribute("message") = s.not_run.c_str();
    }
    if (!s.error.empty()) {
      auto tc = suite.append_child("testcase");
      tc.append_attribute("name") = "run";
      tc.append_attribute("classname") = ("lanes." + s.name).c_str();
      tc.append_attribute("time") = secs(s.duration_s).c_str();
      auto er = tc.append_child("error");
      er.append_attribute("message") = s.error.c_str();
      er.append_attribute("type") = "scenario";
      er.text() = s.error.c_str();
    }
    suite.append_child("system-out").text() = s.log_tail.c_str();
    suite.append_child("system-err");
    tests += t, failures += f, errors += e;
  }
  suites.append_attribute("name") = "lanes";
  suites.append_attribute("tests") = tests;
  suites.append_attribute("failures") = failures;
  suites.append_attribute("errors") = errors;
  suites.append_attribute("time") = secs(r.duration_s).c_str();
  std::ostringstream ss;
  doc.save(ss, "  ", pugi::format_default, pugi::encoding_utf8);
  return ss.str();
}

}  // namespace lanes::reports
