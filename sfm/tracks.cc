#include "sfm/tracks.h"

#include <algorithm>
#include <numeric>
#include <string>

namespace tiepoint {
namespace {

// Union-find whose sets also know which images they hold, so that a union that would
// put two features of one image into a set can be refused.
struct UnionFind {
  std::vector<int64_t> parent;
  std::vector<std::vector<int>> images;  // per root: sorted images of the set
  UnionFind(int64_t n, const std::vector<int64_t>& offset) : parent(n), images(n) {
    std::iota(parent.begin(), parent.end(), 0);
    for (size_t i = 0; i + 1 < offset.size(); ++i)
      for (int64_t x = offset[i]; x < offset[i + 1]; ++x) images[x] = {static_cast<int>(i)};
  }
  int64_t Find(int64_t x) {
    while (parent[x] != x) {
      parent[x] = parent[parent[x]];
      x = parent[x];
    }
    return x;
  }
  // False (and nothing merged) when the two sets share an image. The smaller root wins.
  bool Union(int64_t a, int64_t b) {
    a = Find(a);
    b = Find(b);
    if (a == b) return true;
    std::vector<int> merged;
    merged.reserve(images[a].size() + images[b].size());
    auto ia = images[a].begin(), ib = images[b].begin();
    while (ia != images[a].end() && ib != images[b].end()) {
      if (*ia == *ib) return false;
      merged.push_back(*ia < *ib ? *ia++ : *ib++);
    }
    merged.insert(merged.end(), ia, images[a].end());
    merged.insert(merged.end(), ib, images[b].end());
    if (b < a) std::swap(a, b);
    parent[b] = a;
    images[a] = std::move(merged);
    std::vector<int>().swap(images[b]);
    return true;
  }
};

}  // namespace

Status BuildTracks(const std::vector<int>& num_features,
                   const std::vector<PairCorrespondences>& pairs, int min_track_length,
                   std::vector<Track>* tracks, TrackSummary* summary) {
  *summary = TrackSummary();
  tracks->clear();
  const int num_images = static_cast<int>(num_features.size());
  std::vector<int64_t> offset(num_images + 1, 0);
  for (int i = 0; i < num_images; ++i) offset[i + 1] = offset[i] + std::max(num_features[i], 0);
  UnionFind uf(offset[num_images], offset);
  std::vector<uint8_t> used(offset[num_images], 0);
  for (size_t p = 0; p < pairs.size(); ++p) {
    const PairCorrespondences& pc = pairs[p];
    if (pc.image1 < 0 || pc.image1 >= num_images || pc.image2 < 0 || pc.image2 >= num_images ||
        pc.image1 == pc.image2)
      return Status::InvalidInput("tracks: pair " + std::to_string(p) + " names images " +
                                  std::to_string(pc.image1) + " and " + std::to_string(pc.image2) +
                                  " of " + std::to_string(num_images));
    for (const auto& [f1, f2] : pc.matches)
      if (f1 >= static_cast<uint32_t>(num_features[pc.image1]) ||
          f2 >= static_cast<uint32_t>(num_features[pc.image2]))
        return Status::InvalidInput("tracks: pair " + std::to_string(p) +
                                    " has a feature index out of range");
  }
  // Pairs with more inliers first: their matches are the more reliable, so when two
  // matches conflict the better-supported one forms the track.
  std::vector<size_t> pair_order(pairs.size());
  std::iota(pair_order.begin(), pair_order.end(), 0);
  std::stable_sort(pair_order.begin(), pair_order.end(), [&](size_t a, size_t b) {
    return pairs[a].matches.size() > pairs[b].matches.size();
  });
  for (size_t p : pair_order) {
    const PairCorrespondences& pc = pairs[p];
    for (const auto& [f1, f2] : pc.matches) {
      const int64_t a = offset[pc.image1] + f1, b = offset[pc.image2] + f2;
      if (uf.Union(a, b)) {
        used[a] = used[b] = 1;
      } else {
        ++summary->conflicting_matches;
      }
    }
  }
  // Group the used features by root (already in (image, feature) order per component).
  std::vector<int64_t> order;
  for (int64_t x = 0; x < offset[num_images]; ++x)
    if (used[x]) order.push_back(x);
  std::vector<int64_t> root(order.size());
  for (size_t k = 0; k < order.size(); ++k) root[k] = uf.Find(order[k]);
  std::vector<size_t> idx(order.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(), [&](size_t a, size_t b) { return root[a] < root[b]; });
  auto image_of = [&](int64_t x) {
    return static_cast<int>(std::upper_bound(offset.begin(), offset.end(), x) - offset.begin()) - 1;
  };
  for (size_t s = 0; s < idx.size();) {
    size_t e = s;
    while (e < idx.size() && root[idx[e]] == root[idx[s]]) ++e;
    Track track;  // one feature per image by construction
    for (size_t k = s; k < e; ++k) {
      const int img = image_of(order[idx[k]]);
      track.elements.push_back({img, static_cast<uint32_t>(order[idx[k]] - offset[img])});
    }
    if (static_cast<int>(track.elements.size()) >= std::max(min_track_length, 2)) {
      summary->num_observations += static_cast<int64_t>(track.elements.size());
      tracks->push_back(std::move(track));
    } else {
      ++summary->dropped_short_tracks;
    }
    s = e;
  }
  summary->num_tracks = static_cast<int64_t>(tracks->size());
  summary->mean_track_length =
      tracks->empty() ? 0.0 : static_cast<double>(summary->num_observations) / tracks->size();
  return Status::Ok();
}

}  // namespace tiepoint
