#include "bench/run_stats.h"

#include <algorithm>
#include <cstddef>
#include <random>
#include <utility>

namespace devmesh {

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

double InterquartileMean(std::vector<double> v) {
  if (v.size() < 4) return Median(std::move(v));
  std::sort(v.begin(), v.end());
  const size_t lo = v.size() / 4, hi = v.size() - v.size() / 4;
  double sum = 0;
  for (size_t i = lo; i < hi; ++i) sum += v[i];
  return sum / static_cast<double>(hi - lo);
}

double BootstrapHalfWidth95(const std::vector<double>& v) {
  if (v.size() < 2) return 0;
  std::mt19937_64 rng(0x5eed);
  std::uniform_int_distribution<size_t> pick(0, v.size() - 1);
  std::vector<double> means(1000), sample(v.size());
  for (double& m : means) {
    for (double& x : sample) x = v[pick(rng)];
    m = InterquartileMean(sample);
  }
  std::sort(means.begin(), means.end());
  return (means[974] - means[25]) / 2;
}

}  // namespace devmesh
