#include "bench/svg_plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <sstream>

#include "io/base/atomic_file.h"

namespace tiepoint {
namespace {

// Layout in pixels. Sized for reading at 100% zoom: 13-14 px labels, 17 px titles.
constexpr double kMarginLeft = 96.0;    // y tick labels and the rotated y label
constexpr double kLegendWidth = 210.0;  // legend column right of the plot area
constexpr double kFigureTitleHeight = 44.0;
constexpr double kPanelTitleHeight = 52.0;   // panel title above the plot area
constexpr double kBelowPlot = 64.0;          // x tick labels and the x label
constexpr double kNoteLineHeight = 16.0;
constexpr double kNoteCharWidth = 6.6;   // mean advance of 12 px italic DejaVu Sans
constexpr double kPanelGap = 18.0;
constexpr const char* kFont = "DejaVu Sans, Helvetica, Arial, sans-serif";

const char* const kPalette[] = {"#0072B2", "#D55E00", "#009E73", "#CC79A7",
                                "#E69F00", "#56B4E9", "#000000", "#F0E442"};
constexpr int kPaletteSize = sizeof(kPalette) / sizeof(kPalette[0]);

std::string Escape(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string Px(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f", v);
  return buf;
}

// Breaks `text` into lines of at most `width` characters (UTF-8 sequences count as one),
// at spaces where possible; continuation lines are indented.
void WrapInto(const std::string& text, size_t width, std::vector<std::string>* lines) {
  width = std::max<size_t>(width, 20);
  std::string rest = text;
  bool first = true;
  for (;;) {
    const std::string prefix = first ? "" : "    ";
    const size_t limit = width - prefix.size();
    // Byte offset of the character after the first `limit` characters.
    size_t bytes = 0, chars = 0;
    while (bytes < rest.size() && chars < limit) {
      ++bytes;
      while (bytes < rest.size() && (static_cast<unsigned char>(rest[bytes]) & 0xC0) == 0x80) {
        ++bytes;
      }
      ++chars;
    }
    if (bytes >= rest.size()) {
      lines->push_back(prefix + rest);
      return;
    }
    size_t cut = rest.rfind(' ', bytes);
    if (cut == std::string::npos || cut < bytes / 2) cut = bytes;
    lines->push_back(prefix + rest.substr(0, cut));
    rest = rest.substr(cut + (cut < rest.size() && rest[cut] == ' ' ? 1 : 0));
    first = false;
  }
}

bool Plottable(double x, double y) {
  return std::isfinite(x) && std::isfinite(y) && x > 0.0 && y > 0.0;
}

// Range of the positive, finite values, padded by a few percent of its width in log
// space; a single value (or all equal) gets one decade around it.
struct Range {
  double lo = std::numeric_limits<double>::infinity();
  double hi = 0.0;
  void Add(double v) {
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  bool empty() const { return !(hi > 0.0); }
  void Finish() {
    if (empty()) {
      lo = 1.0;
      hi = 10.0;
      return;
    }
    double a = std::log10(lo), b = std::log10(hi);
    if (b - a < 1e-9) {
      a -= 0.5;
      b += 0.5;
    }
    const double pad = 0.04 * (b - a);
    lo = std::pow(10.0, a - pad);
    hi = std::pow(10.0, b + pad);
  }
};

struct Tick {
  double value;
  bool labelled;  // labelled major tick with a grid line; else a faint minor grid line
};

// Ticks at decades; 2x and 5x (then every integer mantissa) join them when fewer than
// three decades lie inside the range, so that every axis carries at least three labels
// (two labels leave a convergence plot spanning 1.3e4..8.5e5 hard to read).
std::vector<Tick> LogTicks(double lo, double hi) {
  const int e_lo = static_cast<int>(std::floor(std::log10(lo))) - 1;
  const int e_hi = static_cast<int>(std::ceil(std::log10(hi))) + 1;
  auto collect = [&](const std::vector<int>& mantissas, int decade_step) {
    std::vector<double> v;
    for (int e = e_lo; e <= e_hi; ++e) {
      for (int m : mantissas) {
        if (m == 1 && (e % decade_step) != 0) continue;
        const double x = m * std::pow(10.0, e);
        if (x >= lo * (1 - 1e-12) && x <= hi * (1 + 1e-12)) v.push_back(x);
      }
    }
    return v;
  };
  std::vector<double> major;
  std::vector<int> mantissas;
  for (const std::vector<int>& m : {std::vector<int>{1}, std::vector<int>{1, 2, 5},
                                    std::vector<int>{1, 2, 3, 4, 5, 6, 7, 8, 9}}) {
    major = collect(m, 1);
    mantissas = m;
    if (major.size() >= 3) break;
  }
  int step = 1;
  while (mantissas.size() == 1 && major.size() > 9) {
    ++step;
    major = collect(mantissas, step);
  }
  std::vector<Tick> ticks;
  for (double v : major) ticks.push_back({v, true});
  // Minor grid at the remaining integer mantissas when decades are few enough to see them.
  if (step == 1 && mantissas.size() < 9 && std::log10(hi / lo) <= 7.0) {
    for (double v : collect({1, 2, 3, 4, 5, 6, 7, 8, 9}, 1)) {
      const bool is_major = std::any_of(major.begin(), major.end(), [v](double m) {
        return std::fabs(m - v) <= 1e-9 * v;
      });
      if (!is_major) ticks.push_back({v, false});
    }
  }
  return ticks;
}

// "0.01", "20", "1000" for moderate values; "10^5" or "2×10^-4" with a superscript
// exponent otherwise. Returns SVG text content (may hold a <tspan>).
std::string TickLabel(double v) {
  const int e = static_cast<int>(std::floor(std::log10(v) + 1e-9));
  const int m = static_cast<int>(std::lround(v / std::pow(10.0, e)));
  char buf[64];
  if (e >= -3 && e <= 3) {
    std::snprintf(buf, sizeof(buf), "%g", m * std::pow(10.0, e));
    return buf;
  }
  std::string exponent = std::to_string(std::abs(e));
  if (e < 0) exponent = "\xE2\x88\x92" + exponent;  // U+2212 minus sign
  std::string label = m == 1 ? "10" : std::to_string(m) + "\xC3\x97" "10";  // U+00D7 times
  return label + "<tspan dy=\"-7\" font-size=\"10\">" + exponent + "</tspan>";
}

// Renders one panel whose top edge is at `top`; returns its height.
double RenderPanel(const LogLogPanel& panel, double top, double width, double base_height,
                   std::ostringstream& svg, std::vector<std::string>* notes) {
  // Sort out what can be drawn and what must be reported.
  std::vector<std::string> panel_notes;
  std::vector<std::vector<std::pair<double, double>>> points(panel.series.size());
  Range xr, yr;
  for (size_t s = 0; s < panel.series.size(); ++s) {
    int skipped = 0;
    for (const auto& p : panel.series[s].xy) {
      if (!Plottable(p.first, p.second)) {
        ++skipped;
        continue;
      }
      points[s].push_back(p);
      xr.Add(p.first);
      yr.Add(p.second);
    }
    const std::string who = "series '" + panel.series[s].name + "'";
    if (points[s].empty()) {
      panel_notes.push_back(who + ": nothing to draw (no points with positive, finite x and y)");
    } else if (skipped > 0) {
      panel_notes.push_back(who + ": skipped " + std::to_string(skipped) + " point" +
                            (skipped == 1 ? "" : "s") +
                            " with non-positive or non-finite values (log axes)");
    }
  }
  const bool no_data = xr.empty();
  xr.Finish();
  yr.Finish();
  if (notes != nullptr) {
    for (const auto& n : panel_notes) {
      notes->push_back(panel.title.empty() ? n : panel.title + ": " + n);
    }
  }
  std::vector<std::string> footer;
  const size_t wrap = static_cast<size_t>((width - kMarginLeft - 16) / kNoteCharWidth);
  for (const auto& n : panel.footnotes) WrapInto(n, wrap, &footer);
  for (const auto& n : panel_notes) WrapInto("note: " + n, wrap, &footer);

  const double height = base_height + kNoteLineHeight * footer.size();
  const double left = kMarginLeft;
  const double right = width - kLegendWidth;
  const double plot_top = top + kPanelTitleHeight;
  const double bottom = top + height - kBelowPlot - kNoteLineHeight * footer.size();
  const LogAxis xa{xr.lo, xr.hi, left, right};
  const LogAxis ya{yr.lo, yr.hi, bottom, plot_top};

  svg << "<g class=\"panel\">\n";
  if (!panel.title.empty()) {
    svg << "<text x=\"" << Px(left) << "\" y=\"" << Px(top + 30)
        << "\" font-size=\"17\" font-weight=\"bold\" fill=\"#222\">" << Escape(panel.title)
        << "</text>\n";
  }
  svg << "<rect x=\"" << Px(left) << "\" y=\"" << Px(plot_top) << "\" width=\""
      << Px(right - left) << "\" height=\"" << Px(bottom - plot_top)
      << "\" fill=\"#ffffff\" stroke=\"none\"/>\n";

  // Grid and tick labels.
  svg << "<g class=\"grid\" stroke-width=\"1\">\n";
  const std::vector<Tick> no_ticks;
  for (const Tick& t : no_data ? no_ticks : LogTicks(xr.lo, xr.hi)) {
    const double x = xa.Map(t.value);
    svg << "<line x1=\"" << Px(x) << "\" y1=\"" << Px(plot_top) << "\" x2=\"" << Px(x)
        << "\" y2=\"" << Px(bottom) << "\" stroke=\"" << (t.labelled ? "#cfcfcf" : "#efefef")
        << "\"/>\n";
    if (t.labelled) {
      svg << "<line x1=\"" << Px(x) << "\" y1=\"" << Px(bottom) << "\" x2=\"" << Px(x)
          << "\" y2=\"" << Px(bottom + 5) << "\" stroke=\"#444\"/>\n";
      svg << "<text x=\"" << Px(x) << "\" y=\"" << Px(bottom + 21)
          << "\" font-size=\"13\" text-anchor=\"middle\" fill=\"#333\" stroke=\"none\">"
          << TickLabel(t.value) << "</text>\n";
    }
  }
  for (const Tick& t : no_data ? no_ticks : LogTicks(yr.lo, yr.hi)) {
    const double y = ya.Map(t.value);
    svg << "<line x1=\"" << Px(left) << "\" y1=\"" << Px(y) << "\" x2=\"" << Px(right)
        << "\" y2=\"" << Px(y) << "\" stroke=\"" << (t.labelled ? "#cfcfcf" : "#efefef")
        << "\"/>\n";
    if (t.labelled) {
      svg << "<line x1=\"" << Px(left - 5) << "\" y1=\"" << Px(y) << "\" x2=\"" << Px(left)
          << "\" y2=\"" << Px(y) << "\" stroke=\"#444\"/>\n";
      svg << "<text x=\"" << Px(left - 9) << "\" y=\"" << Px(y + 4.5)
          << "\" font-size=\"13\" text-anchor=\"end\" fill=\"#333\" stroke=\"none\">"
          << TickLabel(t.value) << "</text>\n";
    }
  }
  svg << "</g>\n";
  svg << "<rect x=\"" << Px(left) << "\" y=\"" << Px(plot_top) << "\" width=\""
      << Px(right - left) << "\" height=\"" << Px(bottom - plot_top)
      << "\" fill=\"none\" stroke=\"#444\" stroke-width=\"1\"/>\n";

  // Axis labels.
  if (!panel.x_label.empty()) {
    svg << "<text x=\"" << Px(0.5 * (left + right)) << "\" y=\"" << Px(bottom + 46)
        << "\" font-size=\"14\" text-anchor=\"middle\" fill=\"#222\">" << Escape(panel.x_label)
        << "</text>\n";
  }
  if (!panel.y_label.empty()) {
    const double cx = 22.0, cy = 0.5 * (plot_top + bottom);
    svg << "<text x=\"" << Px(cx) << "\" y=\"" << Px(cy) << "\" transform=\"rotate(-90 "
        << Px(cx) << " " << Px(cy) << ")\" font-size=\"14\" text-anchor=\"middle\" "
        << "fill=\"#222\">" << Escape(panel.y_label) << "</text>\n";
  }

  // Reference lines under the data, labelled at the left end where curves start high.
  for (const PlotReferenceLine& r : panel.reference_lines) {
    if (!(r.y >= yr.lo && r.y <= yr.hi)) continue;
    const double y = ya.Map(r.y);
    svg << "<line class=\"reference\" x1=\"" << Px(left) << "\" y1=\"" << Px(y) << "\" x2=\""
        << Px(right) << "\" y2=\"" << Px(y)
        << "\" stroke=\"#777\" stroke-width=\"1\" stroke-dasharray=\"6 4\"/>\n";
    if (!r.label.empty()) {
      svg << "<text x=\"" << Px(left + 6) << "\" y=\"" << Px(y - 4)
          << "\" font-size=\"12\" fill=\"#555\">" << Escape(r.label) << "</text>\n";
    }
  }

  // Series: a polyline and round markers at the data points.
  for (size_t s = 0; s < panel.series.size(); ++s) {
    if (points[s].empty()) continue;
    const PlotSeries& series = panel.series[s];
    const char* color = PlotColor(series.color_index >= 0 ? series.color_index
                                                         : static_cast<int>(s));
    svg << "<g class=\"series\" stroke=\"" << color << "\" fill=\"" << color << "\">\n";
    svg << "<title>" << Escape(series.name) << "</title>\n";
    svg << "<polyline fill=\"none\" stroke-width=\"2\" stroke-linejoin=\"round\" points=\"";
    for (size_t i = 0; i < points[s].size(); ++i) {
      svg << (i ? " " : "") << Px(xa.Map(points[s][i].first)) << ","
          << Px(ya.Map(points[s][i].second));
    }
    svg << "\"/>\n";
    for (const auto& p : points[s]) {
      svg << "<circle cx=\"" << Px(xa.Map(p.first)) << "\" cy=\"" << Px(ya.Map(p.second))
          << "\" r=\"2.8\" stroke=\"none\"/>\n";
    }
    svg << "</g>\n";
  }

  if (no_data) {
    svg << "<text x=\"" << Px(0.5 * (left + right)) << "\" y=\"" << Px(0.5 * (plot_top + bottom))
        << "\" font-size=\"15\" text-anchor=\"middle\" fill=\"#888\">no data to plot</text>\n";
  }

  // Legend in its own column, so it never hides data.
  if (!panel.series.empty()) {
    const double lx = right + 18, ly = plot_top + 4;
    const double row = 22.0;
    svg << "<g class=\"legend\">\n";
    svg << "<rect x=\"" << Px(lx) << "\" y=\"" << Px(ly) << "\" width=\""
        << Px(kLegendWidth - 30) << "\" height=\"" << Px(row * panel.series.size() + 10)
        << "\" fill=\"#fafafa\" stroke=\"#bbb\" rx=\"4\"/>\n";
    for (size_t s = 0; s < panel.series.size(); ++s) {
      const PlotSeries& series = panel.series[s];
      const char* color = PlotColor(series.color_index >= 0 ? series.color_index
                                                           : static_cast<int>(s));
      const double y = ly + 16 + row * s;
      svg << "<line x1=\"" << Px(lx + 10) << "\" y1=\"" << Px(y) << "\" x2=\"" << Px(lx + 36)
          << "\" y2=\"" << Px(y) << "\" stroke=\"" << color << "\" stroke-width=\"2\"/>\n";
      svg << "<circle cx=\"" << Px(lx + 23) << "\" cy=\"" << Px(y) << "\" r=\"2.8\" fill=\""
          << color << "\"/>\n";
      svg << "<text x=\"" << Px(lx + 44) << "\" y=\"" << Px(y + 4.5)
          << "\" font-size=\"13\" fill=\"" << (points[s].empty() ? "#999" : "#222") << "\">"
          << Escape(series.name) << "</text>\n";
    }
    svg << "</g>\n";
  }

  // Footnotes and notes under the x label.
  for (size_t i = 0; i < footer.size(); ++i) {
    svg << "<text class=\"note\" x=\"" << Px(left) << "\" y=\""
        << Px(bottom + kBelowPlot + 2 + kNoteLineHeight * i)
        << "\" font-size=\"12\" font-style=\"italic\" fill=\"#666\">" << Escape(footer[i])
        << "</text>\n";
  }
  svg << "</g>\n";
  return height;
}

}  // namespace

double LogAxis::Map(double value) const {
  const double a = std::log10(lo), b = std::log10(hi);
  return pixel_lo + (std::log10(value) - a) / (b - a) * (pixel_hi - pixel_lo);
}

const char* PlotColor(int index) {
  const int i = ((index % kPaletteSize) + kPaletteSize) % kPaletteSize;
  return kPalette[i];
}

std::string RenderLogLogSvg(const std::vector<LogLogPanel>& panels,
                            const LogLogFigureOptions& options, std::vector<std::string>* notes) {
  const double width = std::max(options.width_px, 480);
  const double base_height = std::max(options.panel_height_px, 240);
  std::ostringstream body;
  double y = options.title.empty() ? 8.0 : kFigureTitleHeight;
  for (size_t p = 0; p < panels.size(); ++p) {
    if (p > 0) {
      body << "<line x1=\"16\" y1=\"" << Px(y + kPanelGap / 2) << "\" x2=\"" << Px(width - 16)
           << "\" y2=\"" << Px(y + kPanelGap / 2) << "\" stroke=\"#e4e4e4\"/>\n";
      y += kPanelGap;
    }
    y += RenderPanel(panels[p], y, width, base_height, body, notes);
  }
  const double height = std::max(y + 8.0, 120.0);

  std::ostringstream svg;
  svg << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      << "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"" << Px(width)
      << "\" height=\"" << Px(height) << "\" viewBox=\"0 0 " << Px(width) << " " << Px(height)
      << "\" font-family=\"" << kFont << "\">\n";
  svg << "<title>" << Escape(options.title.empty() ? "log-log plot" : options.title)
      << "</title>\n";
  svg << "<rect width=\"100%\" height=\"100%\" fill=\"#ffffff\"/>\n";
  if (!options.title.empty()) {
    svg << "<text x=\"" << Px(width / 2) << "\" y=\"30\" font-size=\"20\" font-weight=\"bold\" "
        << "text-anchor=\"middle\" fill=\"#111\">" << Escape(options.title) << "</text>\n";
  }
  if (panels.empty()) {
    svg << "<text x=\"" << Px(width / 2) << "\" y=\"80\" font-size=\"14\" "
        << "text-anchor=\"middle\" fill=\"#666\">no data</text>\n";
  }
  svg << body.str() << "</svg>\n";
  return svg.str();
}

Status WriteLogLogSvg(const std::string& path, const std::vector<LogLogPanel>& panels,
                      const LogLogFigureOptions& options, std::vector<std::string>* notes) {
  const std::string text = RenderLogLogSvg(panels, options, notes);
  AtomicFile file(path);
  TIEPOINT_RETURN_IF_ERROR(file.Open());
  file.stream() << text;
  return file.Commit();
}

}  // namespace tiepoint
