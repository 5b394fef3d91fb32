// devmesh/mesh/rank_table.cc
#include "mesh/rank_table.h"

#include "absl/strings/str_cat.h"

namespace devmesh {

RankTable RankTable::List(const std::vector<int64_t>& ranks) {
  std::vector<RankTable> items;
  items.reserve(ranks.size());
  for (int64_t r : ranks) items.emplace_back(r);
  return RankTable(std::move(items));
}

std::string RankTable::ToString() const {
  if (is_scalar_) return absl::StrCat(rank_);
  std::string out = "[";
  for (size_t i = 0; i < items_.size(); ++i) {
    if (i > 0) out += ", ";
    out += items_[i].ToString();
  }
  out += "]";
  return out;
}

}  // namespace devmesh
