// A small SVG writer for line plots on log-log axes (benchmark convergence curves).
//
// One figure holds one or more panels stacked vertically; each panel has a title, axis
// labels, grid lines at decades (with 2x and 5x ticks added when the data spans too few
// decades), one polyline with point markers per series, optional horizontal reference
// lines, and a legend to the right of the plot area. The output is plain SVG 1.1 text
// (no scripts, no external resources) that browsers and rsvg-convert render alike.
//
// Log axes cannot show x <= 0, y <= 0 or non-finite values: such points are skipped and
// a note says how many (in the returned notes and as small text under the panel).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "io/base/status.h"

namespace tiepoint {

struct PlotSeries {
  std::string name;                          // legend text
  std::vector<std::pair<double, double>> xy;  // (x, y) data points, drawn in this order
  // Palette colour; -1 takes the series' position in its panel. Setting it keeps one
  // colour per name across panels when some panels lack a series.
  int color_index = -1;
};

// A horizontal dashed line across the plot area at y, labelled at its right end.
struct PlotReferenceLine {
  double y = 0.0;
  std::string label;
};

struct LogLogPanel {
  std::string title;
  std::string x_label;
  std::string y_label;
  std::vector<PlotSeries> series;
  std::vector<PlotReferenceLine> reference_lines;  // drawn only when inside the y range
  std::vector<std::string> footnotes;              // extra lines of small text under the panel
};

struct LogLogFigureOptions {
  std::string title;          // figure title above the first panel; may be empty
  int width_px = 960;         // whole figure
  int panel_height_px = 460;  // each panel, including its title and axis labels
};

// Maps a positive value to a pixel coordinate on a log axis: lo -> pixel_lo and
// hi -> pixel_hi, linear in log10(value). pixel_hi < pixel_lo is allowed (a y axis).
struct LogAxis {
  double lo = 1.0;  // data range, lo < hi, both positive
  double hi = 10.0;
  double pixel_lo = 0.0;
  double pixel_hi = 1.0;
  double Map(double value) const;
};

// The palette (colour-blind-safe, after Okabe and Ito); index wraps around.
const char* PlotColor(int index);

// Renders the figure as SVG text. `notes` (may be null) receives one line per skipped
// point group or empty series, naming the panel and series.
std::string RenderLogLogSvg(const std::vector<LogLogPanel>& panels,
                            const LogLogFigureOptions& options, std::vector<std::string>* notes);

// Renders and writes through AtomicFile (no partial file on failure); names the path on error.
Status WriteLogLogSvg(const std::string& path, const std::vector<LogLogPanel>& panels,
                      const LogLogFigureOptions& options, std::vector<std::string>* notes);

}  // namespace tiepoint
