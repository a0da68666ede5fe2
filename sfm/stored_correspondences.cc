#include "sfm/stored_correspondences.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <system_error>

#include "io/image.h"

namespace tiepoint {
namespace {

namespace fs = std::filesystem;

bool IsFile(const std::string& path) {
  std::error_code ec;
  return fs::is_regular_file(path, ec);
}

std::string Number(float v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", static_cast<double>(v));
  return buf;
}

}  // namespace

std::string StoredFeaturesPath(const std::string& dir, const std::string& name) {
  return (fs::path(dir) / FeaturesFileName(name)).string();
}

Status ReadStoredFeatures(const std::string& dir, const std::vector<std::string>& names,
                          const std::vector<std::pair<int, int>>& sizes, int num_threads,
                          std::vector<Features>* features) {
  const int n = static_cast<int>(names.size());
  if (sizes.size() != names.size()) return Status::Internal("ReadStoredFeatures: one size per image");
  features->assign(n, Features());
  std::vector<Status> status(n);
#pragma omp parallel for num_threads(std::max(1, num_threads)) schedule(dynamic)
  for (int k = 0; k < n; ++k) {
    const std::string path = StoredFeaturesPath(dir, names[k]);
    if (!IsFile(path)) {
      status[k] = Status::InvalidInput(path + ": no features file for image '" + names[k] +
                                       "' (tiepoint extract writes <image name>.tpfeat)");
      continue;
    }
    Features& f = (*features)[k];
    status[k] = ReadFeatures(path, &f);
    if (!status[k].ok()) continue;
    for (size_t i = 0; i < f.size(); ++i) {
      const Keypoint& kp = f.keypoints[i];
      if (InsideImage(kp.x, kp.y, sizes[k].first, sizes[k].second)) continue;
      status[k] = Status::InvalidInput(path + ": keypoint " + std::to_string(i) + " at (" + Number(kp.x) +
                                       ", " + Number(kp.y) + ") lies outside image '" + names[k] + "' (" +
                                       std::to_string(sizes[k].first) + " x " + std::to_string(sizes[k].second) +
                                       "): the features of another image?");
      break;
    }
  }
  for (const Status& s : status) TIEPOINT_RETURN_IF_ERROR(s);
  return Status::Ok();
}

Status ReadStoredMatches(const std::string& dir, const std::vector<std::string>& names,
                         const std::vector<std::string>& other_names,
                         const std::vector<Features>& features, const std::vector<std::pair<int, int>>& pairs,
                         int num_threads, std::vector<std::vector<FeatureMatch>>* matches,
                         StoredMatchesSummary* summary) {
  *summary = StoredMatchesSummary();
  matches->assign(pairs.size(), {});
  if (features.size() != names.size() || (!other_names.empty() && other_names.size() != names.size()))
    return Status::Internal("ReadStoredMatches: one features and name per image");
  // 0 no file, 1 not verified, 2 verified, 3 no verification in the file.
  std::vector<int> kind(pairs.size(), 0);
  std::vector<Status> status(pairs.size());
#pragma omp parallel for num_threads(std::max(1, num_threads)) schedule(dynamic)
  for (size_t p = 0; p < pairs.size(); ++p) {
    const auto [a, b] = pairs[p];
    // The pair's file by `names`, else by `other_names`, in either order.
    const std::vector<std::string>* used = nullptr;
    std::string path;
    bool swapped = false;
    for (const std::vector<std::string>* by : {&names, &other_names}) {
      if (by->empty() || (by == &other_names && (*by)[a] == names[a] && (*by)[b] == names[b])) continue;
      for (const bool swap : {false, true}) {
        const std::string candidate =
            (fs::path(dir) / MatchesFileName((*by)[swap ? b : a], (*by)[swap ? a : b])).string();
        if (!used && IsFile(candidate)) used = by, path = candidate, swapped = swap;
      }
    }
    if (!used) continue;
    PairMatches pm;
    status[p] = ReadMatches(path, &pm);
    if (!status[p].ok()) continue;
    const int first = swapped ? b : a, second = swapped ? a : b;
    const std::string want1 = FeaturesFileName((*used)[first]), want2 = FeaturesFileName((*used)[second]);
    if (pm.name1 != want1 || pm.name2 != want2) {
      status[p] = Status::InvalidInput(path + ": its feature files are '" + pm.name1 + "' and '" + pm.name2 +
                                       "', not '" + want1 + "' and '" + want2 + "'");
      continue;
    }
    if (pm.num_keypoints1 != features[first].size() || pm.num_keypoints2 != features[second].size()) {
      const bool one = pm.num_keypoints1 != features[first].size();
      status[p] = Status::InvalidInput(
          path + ": keypoint count N" + (one ? "1 = " + std::to_string(pm.num_keypoints1) : "2 = " + std::to_string(pm.num_keypoints2)) +
          ", but " + (one ? want1 : want2) + " holds " +
          std::to_string(one ? features[first].size() : features[second].size()) +
          ": the matches are not of these features");
      continue;
    }
    // Each match's descriptor distance, stored exactly (an integer), must be that of the
    // features read: features extracted again with the same counts (a --max-features cap)
    // give other descriptors at those indices.
    for (size_t m = 0; m < pm.matches.size() && status[p].ok(); ++m) {
      const FeatureMatch& fm = pm.matches[m];
      const uint8_t* d1 = features[first].descriptor(fm.index1);
      const uint8_t* d2 = features[second].descriptor(fm.index2);
      uint32_t d = 0;
      for (int j = 0; j < kSiftDescriptorDim; ++j) {
        const int e = static_cast<int>(d1[j]) - static_cast<int>(d2[j]);
        d += static_cast<uint32_t>(e * e);
      }
      if (d != fm.distance_sq)
        status[p] = Status::InvalidInput(path + ": match " + std::to_string(m) + " (keypoints " +
                                         std::to_string(fm.index1) + ", " + std::to_string(fm.index2) +
                                         ") has descriptor distance^2 " + std::to_string(fm.distance_sq) +
                                         " in the file but " + std::to_string(d) +
                                         " between the features read: the matches are of other features "
                                         "(extracted again since?)");
    }
    if (!status[p].ok()) continue;
    const bool has_model = pm.model != MatchModel::kNone;
    kind[p] = !has_model ? 3 : pm.verified ? 2 : 1;
    if (kind[p] == 1) continue;
    std::vector<FeatureMatch>& out = (*matches)[p];
    out.reserve(has_model ? pm.NumInliers() : pm.matches.size());
    for (size_t m = 0; m < pm.matches.size(); ++m) {
      if (has_model && (m >= pm.inliers.size() || !pm.inliers[m])) continue;
      FeatureMatch fm = pm.matches[m];
      if (swapped) std::swap(fm.index1, fm.index2);
      out.push_back(fm);
    }
  }
  for (const Status& s : status) TIEPOINT_RETURN_IF_ERROR(s);
  for (size_t p = 0; p < pairs.size(); ++p) {
    summary->files_read += kind[p] > 0;
    summary->pairs_without_file += kind[p] == 0;
    summary->pairs_not_verified += kind[p] == 1;
    summary->pairs_verified += kind[p] == 2;
    summary->matches += static_cast<int64_t>((*matches)[p].size());
  }
  if (!pairs.empty() && summary->files_read == 0) {
    const auto [a, b] = pairs.front();
    return Status::InvalidInput(dir + ": no matches file for any of the " + std::to_string(pairs.size()) +
                                " pairs (the first would be " + MatchesFileName(names[a], names[b]) +
                                (other_names.empty() || MatchesFileName(other_names[a], other_names[b]) ==
                                                            MatchesFileName(names[a], names[b])
                                     ? std::string()
                                     : " or " + MatchesFileName(other_names[a], other_names[b])) +
                                "; tiepoint match writes them)");
  }
  return Status::Ok();
}

}  // namespace tiepoint
