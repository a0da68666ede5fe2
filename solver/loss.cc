#include "solver/loss.h"

#include <cstdlib>
#include <sstream>

namespace tiepoint {

Status ParseLoss(const std::string& text, LossFunction* loss) {
  if (text.empty() || text == "none") {
    *loss = LossFunction();
    return Status::Ok();
  }
  const auto colon = text.find(':');
  const std::string name = text.substr(0, colon);
  LossFunction out;
  if (name == "huber") {
    out.type = LossType::kHuber;
  } else if (name == "cauchy") {
    out.type = LossType::kCauchy;
  } else {
    return Status::InvalidOptions("--loss '" + text +
                                  "': expected none, huber:SCALE or cauchy:SCALE");
  }
  if (colon == std::string::npos) {
    return Status::InvalidOptions("--loss '" + text + "': missing the scale in pixels, e.g. " +
                                  name + ":1.0");
  }
  const std::string number = text.substr(colon + 1);
  char* end = nullptr;
  const double scale = std::strtod(number.c_str(), &end);
  if (number.empty() || *end != '\0' || !(scale > 0.0) || !std::isfinite(scale)) {
    return Status::InvalidOptions("--loss '" + text +
                                  "': the scale must be a positive number of pixels");
  }
  out.scale = scale;
  *loss = out;
  return Status::Ok();
}

std::string ToString(const LossFunction& loss) {
  std::ostringstream s;
  switch (loss.type) {
    case LossType::kNone: return "none";
    case LossType::kHuber: s << "huber:" << loss.scale; break;
    case LossType::kCauchy: s << "cauchy:" << loss.scale; break;
  }
  return s.str();
}

}  // namespace tiepoint
