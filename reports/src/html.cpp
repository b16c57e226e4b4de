// The HTML report: one file, inline CSS and SVG drawn here, no scripts
// and nothing fetched, so it opens the same offline, in CI artefacts and
// in mail.

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <sstream>

#include "lanes/reports/writers.hpp"

namespace lanes::reports {

namespace {

std::string esc(const std::string& s) {
  std::string o;
  o.reserve(s.size());
  for (char c : s) switch (c) {
      case '&': o += "&amp;"; break;
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '"': o += "&quot;"; break;
      default: o += c;
    }
  return o;
}

const char* kPalette[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
                          "#bcbd22", "#17becf"};

const char* kCss = R"(
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;color:#1d2330;background:#f6f7f9}
header{background:#1d2330;color:#fff;padding:18px 28px}header h1{margin:0;font-size:22px}
header .meta{opacity:.8;font-size:13px;margin-top:4px}
main{padding:20px 28px;max-width:1200px}
section{background:#fff;border:1px solid #dde1e7;border-radius:8px;padding:16px 20px;margin:0 0 18px}
h2{margin:0 0 10px;font-size:18px}h3{margin:16px 0 8px;font-size:15px}
table{border-collapse:collapse;width:100%;font-size:13px}th,td{text-align:left;padding:5px 8px;border-bottom:1px solid #eceff3;vertical-align:top}
th{background:#f0f2f5;font-weight:600}
.pass{color:#13795b;font-weight:600}.fail{color:#c62828;font-weight:600}
.badge{display:inline-block;padding:2px 10px;border-radius:12px;font-weight:600;font-size:13px}
.badge.pass{background:#dff3ea}.badge.fail{background:#fde2e2}
.charts{display:flex;flex-wrap:wrap;gap:14px}.chart{border:1px solid #eceff3;border-radius:6px;padding:6px}
.chart .title{font-size:12px;color:#5b6472;margin:0 0 2px 4px}
.chart.wide{flex:1 1 100%}.chart.wide>svg{width:100%;height:auto;display:block}
.multiples{display:grid;grid-template-columns:repeat(4,1fr);gap:6px}.multiples svg{width:100%;height:auto;display:block}
.muted{color:#6b7482}tr.drift{background:#fff4c2}tr.flip{background:#fde2e2}tr.fixed{background:#dff3ea}
.badge.drift{background:#fff4c2}
pre{background:#f0f2f5;padding:8px;overflow:auto;font-size:12px;max-height:240px}
svg text{font-family:system-ui,sans-serif}
)";

// How wide TEXT is drawn at font size SIZE, at most (system-ui's widest
// common glyphs are about 0.62 em; a label is sized by this so it is never
// cut off).
double text_width(const std::string& text, double size) {
  size_t glyphs = 0;
  for (unsigned char c : text) glyphs += (c & 0xC0) != 0x80;  // UTF-8: count characters, not bytes
  return 0.62 * size * static_cast<double>(glyphs);
}

// A legend of LABELS (swatch colours COLORS) from x = LEFT to RIGHT,
// wrapped onto as many rows as it needs from y = TOP; returns its height.
double legend(std::ostringstream& o, const std::vector<std::string>& labels, const std::vector<std::string>& colors,
              double left, double right, double top) {
  double x = left, y = top;
  for (size_t i = 0; i < labels.size(); ++i) {
    double w = 18 + text_width(labels[i], 10);
    if (x > left && x + w > right) x = left, y += 13;
    o << fmt::format(R"(<rect x="{:.0f}" y="{:.0f}" width="10" height="4" fill="{}"/><text x="{:.0f}" y="{:.0f}" font-size="10" fill="#1d2330">{}</text>)",
                     x, y - 4, colors[i], x + 13, y, esc(labels[i]));
    x += w + 6;
  }
  return labels.empty() ? 0 : y - top + 13;
}

// A round step for an axis up to VMAX, about four steps.
double axis_step(double vmax) {
  double step = std::pow(10, std::floor(std::log10(vmax / 4)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (vmax / (step * m) <= 5) return step * m;
  return step * 10;
}

// A line chart of SERIES (one colour each) over time, with MARKERS as
// dashed vertical lines and SPANS shaded.
std::string line_chart(const std::vector<const Series*>& series, const std::vector<std::string>& labels,
                       const std::vector<Marker>& markers, const std::vector<std::pair<double, double>>& spans,
                       const std::string& unit) {
  const int W = 560, L = 48, R = 12, T = 12, B = 40;
  // the legend wraps: the chart grows by its extra rows
  double legend_w = 0;
  for (const auto& l : labels) legend_w += 24 + text_width(l, 10);
  const int H = 230 + 13 * static_cast<int>(legend_w / (W - L - R));
  double tmax = 0, vmax = 0;
  for (const auto* s : series) {
    tmax = std::max(tmax, static_cast<double>(s->values.size()) * s->interval_s);
    for (double v : s->values) vmax = std::max(vmax, v);
  }
  for (const auto& m : markers) tmax = std::max(tmax, m.t_s);
  if (tmax <= 0) tmax = 1;
  vmax = vmax <= 0 ? 1 : vmax * 1.1;
  double step = axis_step(vmax);
  const int plot_b = 230 - B;  // the plot's bottom: the legend's rows go below the axis
  auto X = [&](double t) { return L + (W - L - R) * t / tmax; };
  auto Y = [&](double v) { return T + (plot_b - T) * (1 - v / vmax); };
  std::ostringstream o;
  o << fmt::format(R"(<svg xmlns="http://www.w3.org/2000/svg" width="{}" height="{}" viewBox="0 0 {} {}" role="img">)",
                   W, H, W, H);
  for (const auto& [a, b] : spans)
    o << fmt::format(R"(<rect x="{:.1f}" y="{}" width="{:.1f}" height="{}" fill="#eef3fb"/>)", X(a), T,
                     std::max(1.0, X(b) - X(a)), plot_b - T);
  for (double v = 0; v <= vmax + 1e-9; v += step)
    o << fmt::format(R"(<line x1="{}" x2="{}" y1="{:.1f}" y2="{:.1f}" stroke="#e3e6eb"/><text x="{}" y="{:.1f}" font-size="10" text-anchor="end" fill="#5b6472">{:g}</text>)",
                     L, W - R, Y(v), Y(v), L - 4, Y(v) + 3, std::round(v * 1000) / 1000);
  double tstep = tmax > 60 ? 10 : tmax > 20 ? 5 : tmax > 8 ? 2 : 1;
  for (double t = 0; t <= tmax + 1e-9; t += tstep)
    o << fmt::format(R"(<text x="{:.1f}" y="{}" font-size="10" text-anchor="middle" fill="#5b6472">{:g}</text>)", X(t),
                     plot_b + 13, t);
  o << fmt::format(R"(<text x="{}" y="{}" font-size="10" text-anchor="middle" fill="#5b6472">seconds</text>)",
                   L + (W - L - R) / 2, plot_b + 25);
  o << fmt::format(R"~(<text x="10" y="{}" font-size="10" fill="#5b6472" transform="rotate(-90 10 {})" text-anchor="middle">{}</text>)~",
                   T + (plot_b - T) / 2, T + (plot_b - T) / 2, esc(unit));
  o << fmt::format(R"(<line x1="{}" x2="{}" y1="{}" y2="{}" stroke="#9aa3b0"/>)", L, W - R, plot_b, plot_b);
  for (size_t i = 0; i < series.size(); ++i) {
    const auto* s = series[i];
    std::string pts;
    for (size_t k = 0; k < s->values.size(); ++k)
      pts += fmt::format("{:.1f},{:.1f} ", X(static_cast<double>(k + 1) * s->interval_s), Y(s->values[k]));
    o << fmt::format(R"(<polyline class="series" fill="none" stroke="{}" stroke-width="1.6" points="{}"/>)",
                     kPalette[i % 10], pts);
  }
  for (const auto& m : markers) {
    if (m.kind != "fault") continue;
    o << fmt::format(R"(<line class="marker" x1="{:.1f}" x2="{:.1f}" y1="{}" y2="{}" stroke="#c62828" stroke-dasharray="4 3"/><text x="{:.1f}" y="{}" font-size="10" fill="#c62828">{}</text>)",
                     X(m.t_s), X(m.t_s), T, plot_b, X(m.t_s) + 3, T + 10, esc(m.label));
  }
  std::vector<std::string> colors;
  for (size_t i = 0; i < labels.size(); ++i) colors.push_back(kPalette[i % 10]);
  legend(o, labels, colors, L, W - R, plot_b + 36);
  o << "</svg>";
  return o.str();
}

// Horizontal bars: label, value, optional second value (for comparisons).
std::string bar_chart(const std::vector<std::pair<std::string, double>>& bars, const std::string& unit,
                      const std::string& color = "#1f77b4") {
  // the label column and the room for the values are as wide as their
  // longest text, so no label is cut off
  const int rowh = 22;
  double vmax = 0, label_w = 0, value_w = 0;
  for (const auto& b : bars) {
    vmax = std::max(vmax, b.second);
    label_w = std::max(label_w, text_width(b.first, 11));
    value_w = std::max(value_w, text_width(fmt::format("{:.3g} {}", b.second, unit), 11));
  }
  if (vmax <= 0) vmax = 1;
  const int L = static_cast<int>(std::ceil(label_w)) + 12, R = static_cast<int>(std::ceil(value_w)) + 12;
  const int W = std::max(560, L + 220 + R);
  int H = static_cast<int>(bars.size()) * rowh + 10;
  std::ostringstream o;
  o << fmt::format(R"(<svg xmlns="http://www.w3.org/2000/svg" width="{}" height="{}" viewBox="0 0 {} {}" role="img">)",
                   W, H, W, H);
  for (size_t i = 0; i < bars.size(); ++i) {
    double y = 5 + static_cast<double>(i) * rowh;
    double w = (W - L - R) * bars[i].second / vmax;
    o << fmt::format(R"(<text x="{}" y="{:.0f}" font-size="11" text-anchor="end" fill="#1d2330">{}</text><rect class="bar" x="{}" y="{:.0f}" width="{:.1f}" height="{}" fill="{}"/><text x="{:.1f}" y="{:.0f}" font-size="11" fill="#1d2330">{:.3g} {}</text>)",
                     L - 6, y + 14, esc(bars[i].first), L, y + 3, std::max(1.0, w), rowh - 8, color, L + w + 5, y + 14,
                     bars[i].second, esc(unit));
  }
  o << "</svg>";
  return o.str();
}

// A training job's steps, a row per phase on one time scale (seconds from
// the job's start): each step's compute in grey, its all-reduce in blue, a
// checkpoint save in orange; the steps a failure made the job do again are
// outlined in red, and the restart shows as the gap before the next run's steps. The
// row's end is the job's completion time, written beside it.
std::string timeline_chart(const std::vector<std::pair<std::string, const nlohmann::json*>>& rows) {
  double tmax = 0, label_w = 0;
  for (const auto& [name, f] : rows) {
    tmax = std::max(tmax, f->value("jct_s", 0.0));
    for (const auto& t : f->value("timeline", nlohmann::json::array()))
      tmax = std::max({tmax, t.value("end_s", 0.0), t.value("save_end_s", 0.0)});
    label_w = std::max(label_w, text_width(name, 11));
  }
  if (tmax <= 0) tmax = 1;
  const int rowh = 30, L = static_cast<int>(std::ceil(label_w)) + 12, R = 90, T = 8, W = 1100;
  const int H = T + static_cast<int>(rows.size()) * rowh + 40;
  auto X = [&](double t) { return L + (W - L - R) * t / tmax; };
  std::ostringstream o;
  o << fmt::format(
      R"(<svg class="timeline" xmlns="http://www.w3.org/2000/svg" width="100%" viewBox="0 0 {} {}" role="img">)", W, H);
  for (size_t i = 0; i < rows.size(); ++i) {
    const auto& [name, f] = rows[i];
    double y = T + static_cast<double>(i) * rowh;
    o << fmt::format(R"(<text x="{}" y="{:.0f}" font-size="11" text-anchor="end" fill="#1d2330">{}</text>)", L - 6,
                     y + 17, esc(name));
    // a step a later run did again was lost (the ones before the
    // checkpoint it resumed from were kept)
    std::map<int, int> last_run;
    for (const auto& t : f->value("timeline", nlohmann::json::array()))
      last_run[t.value("step", 0)] = std::max(last_run[t.value("step", 0)], t.value("incarnation", 0));
    for (const auto& t : f->value("timeline", nlohmann::json::array())) {
      double a = t.value("start_s", 0.0), m = t.value("compute_end_s", a), e = t.value("end_s", m);
      bool lost = t.value("incarnation", 0) < last_run[t.value("step", 0)];
      std::string edge = lost ? R"( stroke="#d62728" stroke-width="1.5")" : "";
      o << fmt::format(R"(<rect class="compute" x="{:.1f}" y="{:.0f}" width="{:.1f}" height="20" fill="#b8b8b8"{}><title>step {} compute {:.2f} s</title></rect>)",
                       X(a), y + 3, std::max(0.5, X(m) - X(a)), edge, t.value("step", 0), m - a);
      o << fmt::format(R"(<rect class="comm" x="{:.1f}" y="{:.0f}" width="{:.1f}" height="20" fill="#1f77b4"{}><title>step {} all-reduce {:.2f} s</title></rect>)",
                       X(m), y + 3, std::max(0.5, X(e) - X(m)), edge, t.value("step", 0), e - m);
      if (t.contains("save_end_s")) {
        double se = t.value("save_end_s", e);
        o << fmt::format(R"(<rect class="save" x="{:.1f}" y="{:.0f}" width="{:.1f}" height="20" fill="#ff7f0e"{}><title>checkpoint after step {}: {:.2f} s</title></rect>)",
                         X(e), y + 3, std::max(0.5, X(se) - X(e)), edge, t.value("step", 0), se - e);
      }
    }
    double jct = f->value("jct_s", 0.0);
    o << fmt::format(R"(<text x="{:.1f}" y="{:.0f}" font-size="11" fill="#1d2330">{}</text>)", X(jct) + 5, y + 17,
                     jct > 0 ? fmt::format("JCT {:.1f} s", jct) : std::string("not completed"));
  }
  double plot_b = T + static_cast<double>(rows.size()) * rowh + 2;
  double step = axis_step(tmax);
  for (double t = 0; t <= tmax + 1e-9; t += step)
    o << fmt::format(R"(<line x1="{:.1f}" y1="{:.0f}" x2="{:.1f}" y2="{:.0f}" stroke="#c8ccd4"/><text x="{:.1f}" y="{:.0f}" font-size="10" text-anchor="middle" fill="#555">{:g} s</text>)",
                     X(t), plot_b, X(t), plot_b + 4, X(t), plot_b + 15, t);
  legend(o, {"compute", "all-reduce", "checkpoint save", "lost: done again after a failure"},
         {"#b8b8b8", "#1f77b4", "#ff7f0e", "#d62728"}, L, W - R, plot_b + 32);
  o << "</svg>";
  return o.str();
}

// A stretch of a chart with a name: a workload's run, an assertion's window.
struct Span {
  double from = 0, to = 0;
  std::string label;
};

const char* kWindowColors[] = {"#6a3d9a", "#b15928", "#1b7837", "#2166ac", "#8c510a", "#762a83"};

// One host's NICs over a phase, stacked: each NIC's band in its colour and
// the host's total as the top edge, so both read off one picture; as wide
// as the page. The assertions' WINDOWS are outlined, each named in a row
// of labels above the plot (rows added until no two labels overlap); fault
// MARKERS are dashed red lines; the workloads' SPANS are shaded behind.
// Past four NICs each NIC also gets a small chart of its own.
std::string stacked_chart(const std::vector<const Series*>& nics, const std::vector<std::string>& labels,
                          const std::vector<Marker>& markers, const std::vector<Span>& spans,
                          const std::vector<Span>& windows, const std::string& unit) {
  const double W = 1100, L = 52, R = 14, plot_h = 200;
  size_t n = 0;
  double dt = 0.1, tmax = 0;
  for (const auto* s : nics) {
    n = std::max(n, s->values.size());
    dt = s->interval_s > 0 ? s->interval_s : dt;
  }
  std::vector<std::vector<double>> cum(nics.size() + 1, std::vector<double>(n, 0.0));
  for (size_t i = 0; i < nics.size(); ++i)
    for (size_t k = 0; k < n; ++k) cum[i + 1][k] = cum[i][k] + (k < nics[i]->values.size() ? nics[i]->values[k] : 0);
  double vmax = 0;
  for (double v : cum.back()) vmax = std::max(vmax, v);
  vmax = vmax <= 0 ? 1 : vmax * 1.1;
  tmax = static_cast<double>(n) * dt;
  for (const auto& m : markers) tmax = std::max(tmax, m.t_s);
  for (const auto& w : windows) tmax = std::max(tmax, w.to);
  if (tmax <= 0) tmax = 1;
  auto X = [&](double t) { return L + (W - L - R) * std::clamp(t, 0.0, tmax) / tmax; };
  // the windows' labels: each in the first row where it overlaps no other
  // and the workloads' names in the same rows
  std::vector<Span> named = windows;
  for (const auto& sp : spans) named.push_back(sp);
  std::vector<double> row_end;
  std::vector<size_t> row_of;
  for (const auto& w : named) {
    double x0 = X(w.from) + 2, x1 = x0 + text_width(w.label, 10);
    size_t r = 0;
    while (r < row_end.size() && row_end[r] > x0) ++r;
    if (r == row_end.size()) row_end.push_back(0);
    row_end[r] = x1 + 6;
    row_of.push_back(r);
  }
  const double T = 10 + 13 * static_cast<double>(row_end.size()), plot_b = T + plot_h;
  auto Y = [&](double v) { return T + plot_h * (1 - v / vmax); };
  std::vector<std::string> legend_labels = labels, colors;
  for (size_t i = 0; i < labels.size(); ++i) colors.push_back(kPalette[i % 10]);
  legend_labels.push_back("total");
  colors.push_back("#1d2330");
  double legend_w = 0;
  for (const auto& l : legend_labels) legend_w += 24 + text_width(l, 10);
  const double H = plot_b + 34 + 13 * std::floor(legend_w / (W - L - R)) + 8;
  std::ostringstream o;
  o << fmt::format(R"(<svg class="stacked" xmlns="http://www.w3.org/2000/svg" width="{:.0f}" height="{:.0f}" viewBox="0 0 {:.0f} {:.0f}" role="img">)",
                   W, H, W, H);
  for (const auto& sp : spans) {
    o << fmt::format(R"(<rect class="span" x="{:.1f}" y="{:.1f}" width="{:.1f}" height="{:.1f}" fill="#eef3fb"/>)", X(sp.from), T,
                     std::max(1.0, X(sp.to) - X(sp.from)), plot_h);
  }
  for (size_t i = windows.size(); i < named.size(); ++i)
    o << fmt::format(R"(<text x="{:.1f}" y="{:.1f}" font-size="10" fill="#7a8494">{}</text>)", X(named[i].from) + 2,
                     19 + 13 * static_cast<double>(row_of[i]), esc(named[i].label));
  double step = axis_step(vmax);
  for (double v = 0; v <= vmax + 1e-9; v += step)
    o << fmt::format(R"(<line x1="{:.0f}" x2="{:.0f}" y1="{:.1f}" y2="{:.1f}" stroke="#e3e6eb"/><text x="{:.0f}" y="{:.1f}" font-size="10" text-anchor="end" fill="#5b6472">{:g}</text>)",
                     L, W - R, Y(v), Y(v), L - 4, Y(v) + 3, std::round(v * 1000) / 1000);
  // the bands, bottom up: NIC i between the sum of those below it and that plus its own
  for (size_t i = 0; i < nics.size(); ++i) {
    std::string pts = fmt::format("{:.1f},{:.1f} ", X(0), Y(cum[i].empty() ? 0 : cum[i][0]));
    for (size_t k = 0; k < n; ++k) pts += fmt::format("{:.1f},{:.1f} ", X(static_cast<double>(k + 1) * dt), Y(cum[i + 1][k]));
    for (size_t k = n; k-- > 0;) pts += fmt::format("{:.1f},{:.1f} ", X(static_cast<double>(k + 1) * dt), Y(cum[i][k]));
    o << fmt::format(R"(<polygon class="area" fill="{}" fill-opacity="0.85" stroke="{}" stroke-width="0.6" points="{}"><title>{}</title></polygon>)",
                     kPalette[i % 10], kPalette[i % 10], pts, esc(labels[i]));
  }
  std::string top;
  for (size_t k = 0; k < n; ++k) top += fmt::format("{:.1f},{:.1f} ", X(static_cast<double>(k + 1) * dt), Y(cum.back()[k]));
  o << fmt::format(R"(<polyline class="total" fill="none" stroke="#1d2330" stroke-width="1.2" points="{}"/>)", top);
  for (size_t i = 0; i < windows.size(); ++i) {
    const auto& w = windows[i];
    const char* c = kWindowColors[i % 6];
    double y = 10 + 13 * static_cast<double>(row_of[i]) + 9;
    o << fmt::format(R"(<rect class="window" x="{:.1f}" y="{:.1f}" width="{:.1f}" height="{:.1f}" fill="{}" fill-opacity="0.08" stroke="{}" stroke-dasharray="5 2"/>)",
                     X(w.from), T, std::max(1.0, X(w.to) - X(w.from)), plot_h, c, c);
    o << fmt::format(R"(<line x1="{:.1f}" x2="{:.1f}" y1="{:.1f}" y2="{:.1f}" stroke="{}"/><text class="window-label" x="{:.1f}" y="{:.1f}" font-size="10" fill="{}">{}</text>)",
                     X(w.from), X(w.from), y - 9, T, c, X(w.from) + 2, y, c, esc(w.label));
  }
  for (const auto& m : markers) {
    if (m.kind != "fault") continue;
    o << fmt::format(R"(<line class="marker" x1="{:.1f}" x2="{:.1f}" y1="{:.1f}" y2="{:.1f}" stroke="#c62828" stroke-width="1.4" stroke-dasharray="4 3"/><text x="{:.1f}" y="{:.1f}" font-size="10" fill="#c62828">{}</text>)",
                     X(m.t_s), X(m.t_s), T, plot_b, X(m.t_s) + 3, T + 11, esc(m.label));
  }
  o << fmt::format(R"(<line x1="{:.0f}" x2="{:.0f}" y1="{:.1f}" y2="{:.1f}" stroke="#9aa3b0"/>)", L, W - R, plot_b, plot_b);
  double tstep = tmax > 120 ? 20 : tmax > 60 ? 10 : tmax > 20 ? 5 : tmax > 8 ? 2 : 1;
  for (double t = 0; t <= tmax + 1e-9; t += tstep)
    o << fmt::format(R"(<text x="{:.1f}" y="{:.1f}" font-size="10" text-anchor="middle" fill="#5b6472">{:g}</text>)", X(t),
                     plot_b + 13, t);
  o << fmt::format(R"(<text x="{:.0f}" y="{:.1f}" font-size="10" text-anchor="middle" fill="#5b6472">seconds</text>)",
                   L + (W - L - R) / 2, plot_b + 25);
  o << fmt::format(R"~(<text x="10" y="{:.1f}" font-size="10" fill="#5b6472" transform="rotate(-90 10 {:.1f})" text-anchor="middle">{}</text>)~",
                   T + plot_h / 2, T + plot_h / 2, esc(unit));
  legend(o, legend_labels, colors, L, W - R, plot_b + 38);
  o << "</svg>";
  if (nics.size() <= 4) return o.str();
  // small multiples: one NIC each, on the same scale
  double each_max = 0;
  for (const auto* s : nics)
    for (double v : s->values) each_max = std::max(each_max, v);
  each_max = each_max <= 0 ? 1 : each_max * 1.1;
  o << "<div class=\"multiples\">";
  for (size_t i = 0; i < nics.size(); ++i) {
    const double w = 270, h = 110, l = 30, t = 16, b = 96;
    auto x = [&](double s) { return l + (w - l - 6) * std::clamp(s, 0.0, tmax) / tmax; };
    auto y = [&](double v) { return t + (b - t) * (1 - v / each_max); };
    std::string pts;
    for (size_t k = 0; k < nics[i]->values.size(); ++k)
      pts += fmt::format("{:.1f},{:.1f} ", x(static_cast<double>(k + 1) * dt), y(nics[i]->values[k]));
    o << fmt::format(R"(<svg class="multiple" xmlns="http://www.w3.org/2000/svg" width="{:.0f}" height="{:.0f}" viewBox="0 0 {:.0f} {:.0f}" role="img"><text x="{:.0f}" y="11" font-size="10" fill="#1d2330">{}</text><text x="{:.0f}" y="{:.1f}" font-size="9" text-anchor="end" fill="#5b6472">{:.2g}</text><line x1="{:.0f}" x2="{:.0f}" y1="{:.0f}" y2="{:.0f}" stroke="#9aa3b0"/><polyline class="series" fill="none" stroke="{}" stroke-width="1.4" points="{}"/></svg>)",
                     w, h, w, h, l, esc(labels[i]), l - 3, y(each_max / 1.1) + 3, each_max / 1.1, l, w - 6, b, b,
                     kPalette[i % 10], pts);
  }
  o << "</div>";
  return o.str();
}

// Spines on top, rack switches below, each rack's hosts and servers under it.
std::string topology_svg(const TopologyView& t) {
  std::vector<const TopologyView::Node*> spines, switches;
  std::map<std::string, std::vector<const TopologyView::Node*>> below;  // rack -> hosts and servers
  std::vector<const TopologyView::Node*> others;
  for (const auto& n : t.nodes) {
    if (n.kind == "spine") spines.push_back(&n);
    else if (n.kind == "switch") switches.push_back(&n);
    else if (!n.rack.empty()) below[n.rack].push_back(&n);
    else others.push_back(&n);
  }
  size_t cols = 0;
  for (const auto& [r, v] : below) cols += v.size();
  cols = std::max<size_t>(cols + others.size(), 1);
  const double colw = 96;
  double W = std::max(360.0, static_cast<double>(cols) * colw + 20);
  double H = spines.empty() ? 170 : 240;
  std::map<std::string, std::pair<double, double>> pos;
  double y_sp = 30, y_sw = spines.empty() ? 40 : 110, y_h = y_sw + 90;
  double x = 10 + colw / 2;
  for (const auto* sw : switches) {
    auto& v = below[sw->rack];
    double x0 = x;
    for (const auto* n : v) pos[n->name] = {x, y_h}, x += colw;
    pos[sw->name] = {v.empty() ? x0 : (x0 + x - colw) / 2, y_sw};
    if (v.empty()) x += colw;
  }
  for (const auto* n : others) pos[n->name] = {x, y_h}, x += colw;
  for (size_t i = 0; i < spines.size(); ++i)
    pos[spines[i]->name] = {W * static_cast<double>(i + 1) / static_cast<double>(spines.size() + 1), y_sp};
  std::ostringstream o;
  o << fmt::format(R"(<svg xmlns="http://www.w3.org/2000/svg" width="{:.0f}" height="{:.0f}" viewBox="0 0 {:.0f} {:.0f}" role="img">)",
                   W, H, W, H);
  // links: one line per node pair, with the number of parallel links
  std::map<std::pair<std::string, std::string>, int> pairs;
  for (const auto& l : t.links) ++pairs[{l.a, l.b}];
  for (const auto& [p, n] : pairs) {
    if (!pos.count(p.first) || !pos.count(p.second)) continue;
    auto [x1, y1] = pos[p.first];
    auto [x2, y2] = pos[p.second];
    o << fmt::format(R"(<line class="link" x1="{:.0f}" y1="{:.0f}" x2="{:.0f}" y2="{:.0f}" stroke="#8a94a3" stroke-width="{}"/>)",
                     x1, y1, x2, y2, n > 1 ? 2.5 : 1.2);
    if (n > 1)
      o << fmt::format(R"(<text x="{:.0f}" y="{:.0f}" font-size="10" fill="#5b6472">×{}</text>)", (x1 + x2) / 2 + 4,
                       (y1 + y2) / 2, n);
  }
  for (const auto& n : t.nodes) {
    if (!pos.count(n.name)) continue;
    auto [cx, cy] = pos[n.name];
    const char* fill = n.kind == "spine" ? "#6a4c93" : n.kind == "host" ? "#1f77b4" : n.kind == "server" ? "#2ca02c" : "#ff7f0e";
    o << fmt::format(R"(<rect class="node" x="{:.0f}" y="{:.0f}" width="84" height="26" rx="5" fill="{}"/><text x="{:.0f}" y="{:.0f}" font-size="11" text-anchor="middle" fill="#fff">{}</text>)",
                     cx - 42, cy - 13, fill, cx, cy + 4, esc(n.name));
  }
  o << "</svg>";
  return o.str();
}

// Whether W's plug-in declared figure KEY (a results file from before
// lanes wrote declarations: every figure it has counts)
bool declares(const WorkloadResult& w, const std::string& key) {
  if (w.declared.empty()) return true;
  return std::any_of(w.declared.begin(), w.declared.end(), [&](const FigureDecl& d) { return d.key == key; });
}

// A workload's figures as its plug-in said them (results.json carries the
// sentence); a results file from before lanes wrote one shows its figures.
std::string figure_text(const WorkloadResult& w) {
  if (!w.summary.empty()) return w.summary;
  std::string out;
  for (const auto& [k, v] : w.figures.items())
    if (v.is_primitive()) out += (out.empty() ? "" : " · ") + k + " " + (v.is_number_float() ? fmt::format("{:.3g}", v.get<double>()) : v.dump());
  return out;
}

// The phases side by side (result.hpp's PhaseTable): a row per phase, a
// column per workload that ran in more than one
void phases_side_by_side(std::ostringstream& o, const PhaseTable& t) {
  if (t.empty()) return;
  o << "<h3>Phases side by side</h3><p class=\"muted\">each workload against phase " << esc(t.baseline)
    << ": its rate and the ratio, the host's NIC shares, the machine's CPU-seconds per Gbit moved, its time; "
       "✗ where a connection failed or a byte did not verify</p><table><tr><th>phase</th><th>egress</th>";
  for (const auto& w : t.workloads) o << "<th>" << esc(w) << "</th>";
  o << "</tr>";
  for (const auto& r : t.rows) {
    o << "<tr><td>" << esc(r.phase) << "</td><td>" << esc(r.egress) << "</td>";
    for (const auto& w : t.workloads) {
      auto it = r.cells.find(w);
      if (it == r.cells.end()) {
        o << "<td class=\"muted\">—</td>";
        continue;
      }
      const PhaseCell& c = it->second;
      std::string share;
      for (double x : c.nic_share) share += fmt::format("{}{:.0f}", share.empty() ? "" : "/", x);
      bool bad = c.connection_errors > 0 || (c.bytes_verified && !*c.bytes_verified);
      o << "<td>" << (c.ratio ? fmt::format("<b>{:.2f}x</b> · ", *c.ratio) : std::string())
        << (c.gbps ? fmt::format("{:.3f} Gbit/s", *c.gbps) : std::string("no rate"))
        << (share.empty() ? "" : "<br>" + share + " %")
        << "<br>" << (c.cpu_s_per_gbit ? fmt::format("{:.2f} CPU-s/Gbit · ", *c.cpu_s_per_gbit) : std::string())
        << fmt::format("{:.2f} s", c.seconds) << (bad ? " <span class=\"fail\">✗</span>" : "") << "</td>";
    }
    o << "</tr>";
  }
  o << "</table>";
}

// Each delayed link end, configured against measured (result.hpp's DelayRow)
void delays(std::ostringstream& o, const std::vector<DelayRow>& rows) {
  if (rows.empty()) return;
  auto ms = [](double us) { return us < 0 ? std::string("—") : fmt::format("{:.3f}", us / 1000); };
  o << "<h3>Delay, configured and measured</h3><p class=\"muted\">each delayed link end: the delay (± jitter) "
       "configured, and how long its packets were held (ms); percentiles where the delay line ended before the "
       "report (a fault's, at its clear), min, mean and max as it went (a topology link's)</p>"
       "<table><tr><th>phase</th><th>what</th><th>where</th><th>engine</th><th>configured</th><th>packets</th>"
       "<th>min</th><th>mean</th><th>p50</th><th>p99</th><th>max</th><th>dropped</th></tr>";
  for (const auto& r : rows) {
    std::string conf = ms(r.delay_us) + (r.jitter_us > 0 ? " ± " + ms(r.jitter_us) : std::string());
    o << fmt::format("<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>", esc(r.phase),
                     esc(r.what), esc(r.where), esc(r.engine), conf, r.packets);
    if (!r.error.empty()) {
      o << "<td colspan=\"6\" class=\"fail\">" << esc(r.error) << "</td></tr>";
      continue;
    }
    o << fmt::format("<td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>", ms(r.held_min_us),
                     ms(r.held_mean_us), ms(r.held_p50_us), ms(r.held_p99_us), ms(r.held_max_us), r.drops);
  }
  o << "</table>";
}

void scenario_section(std::ostringstream& o, const ScenarioResult& s, int idx) {
  o << fmt::format(R"(<section id="s{}"><h2>{} <span class="badge {}">{}</span></h2><p class="muted">{} — {} · {:.1f} s</p>)",
                   idx, esc(s.name), s.passed ? "pass" : s.not_run.empty() ? "fail" : "muted",
                   s.passed ? "passed" : s.not_run.empty() ? "failed" : "not run", esc(s.description), esc(s.file),
                   s.duration_s);
  if (!s.error.empty()) o << "<p class=\"fail\">" << esc(s.error) << "</p>";
  if (!s.not_run.empty()) o << "<p>Not run here: " << esc(s.not_run) << "</p>";
  o << "<table><tr><th></th><th>assertion</th><th>phase</th><th>expected</th><th>measured</th><th>note</th></tr>";
  for (const auto& a : s.assertions)
    o << fmt::format(R"(<tr class="assertion"><td class="{}">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class="muted">{}</td></tr>)",
                     a.passed ? "pass" : "fail", a.passed ? "✓" : "✗", esc(a.name), esc(a.phase), esc(a.expected),
                     esc(a.measured), esc(a.message));
  o << "</table>";
  // figures
  o << "<h3>Workloads</h3><table><tr><th>phase</th><th>workload</th><th>type</th><th>figures</th><th>NIC share</th></tr>";
  for (const auto& p : s.phases)
    for (const auto& w : p.workloads) {
      std::string share;
      for (double x : w.nic_share) share += fmt::format("{}{:.1f}%", share.empty() ? "" : " ", x);
      o << fmt::format("<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>", esc(p.name), esc(w.name),
                       esc(w.type), esc(figure_text(w)), share);
    }
  o << "</table>";
  phases_side_by_side(o, phase_table(s));
  delays(o, delay_table(s));
  // per-NIC throughput per phase and host
  o << "<h3>Throughput per NIC</h3><div class=\"charts\">";
  for (const auto& p : s.phases) {
    std::map<std::string, std::vector<const Series*>> by_host;  // "h1" -> its NICs' rx+tx
    for (const auto& se : p.series) by_host[se.name.substr(0, se.name.find(' '))].push_back(&se);
    std::vector<Span> spans;
    for (const auto& w : p.workloads) spans.push_back({w.start_s, w.end_s, w.name});
    for (const auto& [host, ss] : by_host) {
      // rx + tx per NIC, and only hosts that carried traffic
      std::map<std::string, Series> sum;
      double peak = 0;
      for (const auto* se : ss) {
        std::string nic = se->name.substr(0, se->name.rfind(' '));
        auto& x = sum[nic];
        x.name = nic;
        x.interval_s = se->interval_s;
        if (x.values.size() < se->values.size()) x.values.resize(se->values.size(), 0);
        for (size_t i = 0; i < se->values.size(); ++i) x.values[i] += se->values[i], peak = std::max(peak, x.values[i]);
      }
      if (peak < 0.01) continue;
      std::vector<const Series*> v;
      std::vector<std::string> labels;
      for (const auto& [n, x] : sum) v.push_back(&x), labels.push_back(n.substr(n.find(' ') + 1));
      // the stretches this phase's assertions read of this host
      std::vector<Span> windows;
      for (const auto& a : s.assertions)
        if (a.phase == p.name)
          for (const auto& w : a.windows)
            if (w.host == host) windows.push_back({w.from_s, w.to_s, a.name + " · " + w.label});
      o << fmt::format(R"(<div class="chart wide"><p class="title">phase {} · {} · Gbit/s per NIC (rx+tx), stacked: the top edge is the host's total; shaded: workloads, outlined: what assertions read, red: faults</p>)",
                       esc(p.name), esc(host))
        << stacked_chart(v, labels, p.markers, spans, windows, "Gbit/s") << "</div>";
    }
  }
  o << "</div>";
  // the same workload in several phases: single versus multi NIC
  std::map<std::string, std::vector<std::pair<std::string, double>>> across;
  for (const auto& p : s.phases)
    for (const auto& w : p.workloads)
      if (w.figures.contains("throughput_gbps"))
        across[w.name].push_back({p.name + " · " + w.name, w.figures.value("throughput_gbps", 0.0)});
  bool header = false;
  for (const auto& [name, bars] : across) {
    if (bars.size() < 2) continue;
    if (!header) o << "<h3>Comparison across phases</h3><div class=\"charts\">", header = true;
    o << "<div class=\"chart\"><p class=\"title\">" << esc(name) << " throughput</p>" << bar_chart(bars, "Gbit/s")
      << "</div>";
  }
  std::map<std::string, std::vector<std::pair<std::string, double>>> secs;
  for (const auto& p : s.phases)
    for (const auto& w : p.workloads)
      if (w.figures.contains("seconds") && declares(w, "seconds"))
        secs[w.name].push_back({p.name + " · " + w.name, w.figures.value("seconds", 0.0)});
  for (const auto& [name, bars] : secs) {
    if (bars.size() < 2) continue;
    if (!header) o << "<h3>Comparison across phases</h3><div class=\"charts\">", header = true;
    o << "<div class=\"chart\"><p class=\"title\">" << esc(name) << " completion time</p>"
      << bar_chart(bars, "s", "#ff7f0e") << "</div>";
  }
  if (header) o << "</div>";
  // blackout per path
  for (const auto& p : s.phases)
    for (const auto& w : p.workloads) {
      if (!w.figures.contains("paths") || !w.figures["paths"].is_array()) continue;  // a probe's
      std::vector<std::pair<std::string, double>> bars;
      for (const auto& x : w.figures.value("paths", nlohmann::json::array()))
        bars.push_back({x.value("path", std::string("?")), x.value("longest_gap_ms", 0.0)});
      o << fmt::format("<h3>Blackout per path — {} ({})</h3>", esc(w.name), esc(p.name)) << "<div class=\"chart\">"
        << bar_chart(bars, "ms", "#d62728") << "</div>";
    }
  // an open-loop workload's latency over the run: each phase's p99 per
  // second of issue on one chart (read-latency: growing on one NIC, flat on four)
  std::map<std::string, std::vector<Series>> latency;
  for (const auto& p : s.phases)
    for (const auto& w : p.workloads) {
      auto it = w.figures.find("p99_per_s_ms");
      if (it == w.figures.end() || !it->is_array() || it->empty()) continue;
      Series x;
      x.name = p.name;
      x.interval_s = 1.0;
      for (const auto& v : *it) x.values.push_back(v.is_number() ? v.get<double>() : 0.0);
      latency[w.name].push_back(std::move(x));
    }
  for (const auto& [name, series] : latency) {
    std::vector<const Series*> v;
    std::vector<std::string> labels;
    for (const auto& x : series) v.push_back(&x), labels.push_back(x.name);
    o << fmt::format("<h3>Latency over the run — {}</h3>", esc(name))
      << "<div class=\"chart\"><p class=\"title\">p99 of the requests issued in each second, by phase</p>"
      << line_chart(v, labels, {}, {}, "p99 ms") << "</div>";
  }
  // a training job's steps, every phase on one time scale
  std::map<std::string, std::vector<std::pair<std::string, const nlohmann::json*>>> jobs;
  for (const auto& p : s.phases)
    for (const auto& w : p.workloads)
      if (w.figures.contains("timeline") && w.figures["timeline"].is_array())
        jobs[w.name].push_back({p.name, &w.figures});
  for (const auto& [name, rows] : jobs)
    o << fmt::format("<h3>Step timeline — {}</h3>", esc(name))
      << "<div class=\"chart wide\"><p class=\"title\">each step's compute, all-reduce and checkpoint, seconds from "
         "the job's start</p>"
      << timeline_chart(rows) << "</div>";
  o << "<h3>Topology: " << esc(s.topology.name) << "</h3><div class=\"chart\">" << topology_svg(s.topology) << "</div>";
  if (!s.log_tail.empty()) o << "<h3>Log</h3><pre>" << esc(s.log_tail) << "</pre>";
  o << "</section>";
}

std::string page(const std::string& title, const std::string& body) {
  return "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>" + esc(title) +
         "</title><meta name=\"viewport\" content=\"width=device-width\"><style>" + kCss + "</style></head><body>" +
         body + "</body></html>\n";
}

}  // namespace

std::string html_report(const RunResult& r) {
  std::ostringstream o;
  o << fmt::format(R"(<header><h1>lanes — {} <span class="badge {}">{}</span></h1><div class="meta">{} scenarios · {} of {} assertions passed · started {} · {:.1f} s · seed {} · lanes {} · kernel {} · {}</div></header><main>)",
                   r.scenarios.size() == 1 ? esc(r.scenarios[0].name) : "scenario run", r.passed() ? "pass" : "fail",
                   r.passed() ? "passed" : "failed", r.scenarios.size(), r.assertions_total() - r.assertions_failed(),
                   r.assertions_total(), esc(r.started), r.duration_s, r.seed, esc(r.lanes_version), esc(r.kernel),
                   esc(r.gobgpd));
  o << "<section><h2>Summary</h2><table><tr><th>scenario</th><th>result</th><th>assertions</th><th>key figures</th><th>time</th></tr>";
  int idx = 0;
  for (const auto& s : r.scenarios) {
    int failed = 0;
    for (const auto& a : s.assertions) failed += !a.passed;
    std::string key;
    for (const auto& p : s.phases)
      for (const auto& w : p.workloads)
        key += fmt::format("{}<b>{}</b>/{}: {}", key.empty() ? "" : "<br>", esc(p.name), esc(w.name), esc(figure_text(w)));
    o << fmt::format(R"(<tr><td><a href="#s{}">{}</a></td><td class="{}">{}</td><td>{} of {}</td><td>{}</td><td>{:.1f} s</td></tr>)",
                     idx++, esc(s.name), s.passed ? "pass" : s.not_run.empty() ? "fail" : "muted",
                     s.passed ? "passed" : s.not_run.empty() ? "failed" : "not run",
                     s.assertions.size() - static_cast<size_t>(failed), s.assertions.size(), key, s.duration_s);
  }
  o << "</table>";
  o << "<p class=\"muted\">Kernel features: ";
  for (const auto& [k, v] : r.features.items())
    if (v.is_boolean()) o << esc(k) << " " << (v.get<bool>() ? "yes" : "no") << " · ";
  o << "</p></section>";
  idx = 0;
  for (const auto& s : r.scenarios) scenario_section(o, s, idx++);
  o << "</main>";
  return page("lanes report", o.str());
}

std::string html_compare(const Comparison& c, const std::string& an, const std::string& a_started, const std::string& bn,
                         const std::string& b_started) {
  std::ostringstream o;
  auto row_class = [](Change ch) -> std::string {
    switch (ch) {
      case Change::flip: return " class=\"flip\"";
      case Change::drift:
      case Change::only_a:
      case Change::only_b: return " class=\"drift\"";
      case Change::fixed: return " class=\"fixed\"";
      case Change::same: break;
    }
    return "";
  };
  auto moved = [](const CompareRow& r) {
    return r.moved && *r.moved != 0 ? fmt::format("{:+.1f}%", 100 * *r.moved) : std::string();
  };
  o << "<header><h1>lanes — comparison</h1><div class=\"meta\">A: " << esc(an) << " (" << esc(a_started)
    << ") · B: " << esc(bn) << " (" << esc(b_started) << ")</div></header><main>";
  o << fmt::format(
      "<section><p><span class=\"badge fail\">{} flipped</span> pass → fail · <span class=\"badge pass\">{} "
      "fixed</span> fail → pass · <span class=\"badge drift\">{} drifted</span> beyond {:.0f}% with the verdict "
      "kept · {} in one run only</p></section>",
      c.flips, c.fixes, c.drifts, 100 * c.thresholds.drift, c.unmatched);
  o << "<section><h2>Configuration</h2><table><tr><th>setting</th><th>A</th><th>B</th></tr>";
  for (const auto& r : c.config)
    o << fmt::format("<tr{}><td>{}</td><td>{}</td><td>{}</td></tr>", r.differs ? " class=\"drift\"" : "",
                     esc(r.field), esc(r.a), esc(r.b));
  o << "</table></section><section><h2>Assertions</h2><table><tr><th>scenario</th><th>assertion</th><th>change</th>"
       "<th>A</th><th>A measured</th><th>B</th><th>B measured</th><th>moved</th></tr>";
  auto verdict = [](bool present, bool passed) {
    return present ? fmt::format("<span class=\"{}\">{}</span>", passed ? "pass" : "fail", passed ? "✓" : "✗")
                   : std::string("—");
  };
  for (const auto& r : c.assertions)
    o << fmt::format("<tr{}><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                     row_class(r.change), esc(r.scenario), esc(r.key), to_string(r.change),
                     verdict(r.change != Change::only_b, r.a_passed), esc(r.a),
                     verdict(r.change != Change::only_a, r.b_passed), esc(r.b), moved(r));
  o << "</table></section><section><h2>Workload figures</h2><table><tr><th>scenario</th><th>figure</th><th>A</th>"
       "<th>B</th><th>moved</th></tr>";
  for (const auto& r : c.figures)
    o << fmt::format("<tr{}><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>", row_class(r.change),
                     esc(r.scenario), esc(r.key), esc(r.a), esc(r.b), moved(r));
  o << "</table></section></main>";
  return page("lanes comparison", o.str());
}

}  // namespace lanes::reports
