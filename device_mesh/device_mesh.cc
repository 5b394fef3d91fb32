#include "device_mesh/device_mesh.h"

#include <algorithm>
#include <atomic>
#include <map>
#include <set>

#include "absl/base/attributes.h"
#include "absl/base/call_once.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "comm/auto_group.h"
#include "comm/error_info.h"
#include "comm/option_fields.h"
#include "comm/registry.h"
#include "device_mesh/mesh_agreement.h"
#include "device_mesh/mesh_serialization.h"
#include "device_mesh/root_state.h"
#include "status/status_macros.h"
#include "sync/annotated_mutex.h"

namespace devmesh {

using device_mesh_internal::kDefaultGroupTimeout;
using device_mesh_internal::LocalFields;

struct DeviceMesh::Answers {
  // Dims whose group is remembered here (later dims take the full path).
  static constexpr int kGroupSlots = 8;
  // This rank's coordinate, computed at the first query (`once`).
  absl::once_flag once;
  std::optional<std::vector<int64_t>> coordinate;
  // Per dim of this mesh: its group, once GetGroup returned it (a value of
  // RootState::groups, a std::map whose values never move nor change once
  // made). One allocation for the whole: a mesh is made often (Slice,
  // Flatten).
  std::atomic<const absl::StatusOr<std::shared_ptr<Communicator>>*>
      groups[kGroupSlots] = {};
};

const std::optional<std::vector<int64_t>>& DeviceMesh::Coordinate() const {
  absl::call_once(answers_->once, [this] {
    answers_->coordinate = layout_.CoordinateOf(runtime_->rank());
  });
  return answers_->coordinate;
}

DeviceMesh::DeviceMesh(std::shared_ptr<MeshRuntime> runtime,
                       std::shared_ptr<device_mesh_internal::RootState> root,
                       MeshLayout layout, std::string device_type,
                       MeshOptions options)
    : runtime_(std::move(runtime)),
      root_(std::move(root)),
      layout_(std::move(layout)),
      device_type_(std::move(device_type)),
      options_(std::move(options)),
      answers_(std::make_shared<Answers>()) {}

absl::StatusOr<DeviceMesh> DeviceMesh::MakeRoot(
    std::shared_ptr<MeshRuntime> runtime, absl::string_view device_type,
    MeshLayout layout, MeshOptions options) {
  if (runtime == nullptr) {
    return absl::InvalidArgumentError("DeviceMesh needs a runtime, got null");
  }
  DEVMESH_RETURN_IF_ERROR(CheckDeviceType(device_type));
  if (!runtime->detached()) {
    // Every rank of the mesh must be a rank of the world.
    MeshLayout root = layout.RootLayout();
    std::vector<int64_t> ranks;
    if (root.is_explicit()) ranks = root.RankTable();
    int64_t max_rank = 0;
    if (root.is_explicit()) {
      for (int64_t r : ranks) max_rank = std::max(max_rank, r);
    } else {
      std::vector<int64_t> last(root.ndim());
      for (int d = 0; d < root.ndim(); ++d) last[d] = root.shape()[d] - 1;
      std::vector<int64_t> first(root.ndim(), 0);
      max_rank = std::max(*root.RankAt(first), *root.RankAt(last));
    }
    if (max_rank >= runtime->world_size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "mesh holds rank ", max_rank, " but the world size is ",
          runtime->world_size()));
    }
  }
  auto root = std::make_shared<device_mesh_internal::RootState>(
      layout.RootLayout(), options);
  if (!runtime->detached()) root->root_index = runtime->NextRootIndex();
  return DeviceMesh(std::move(runtime), std::move(root), std::move(layout),
                    std::string(device_type), std::move(options));
}

absl::StatusOr<DeviceMesh> DeviceMesh::Create(
    std::shared_ptr<MeshRuntime> runtime, absl::string_view device_type,
    const RankTable& mesh, std::vector<std::string> names,
    MeshOptions options) {
  return AgreedRoot(std::move(runtime), device_type,
                    MeshLayout::FromRankTable(mesh, std::move(names)),
                    std::move(options), /*check_options=*/true,
                    "DeviceMesh::Create");
}

absl::StatusOr<DeviceMesh> DeviceMesh::FromLayout(
    std::shared_ptr<MeshRuntime> runtime, absl::string_view device_type,
    MeshLayout layout, MeshOptions options) {
  return AgreedRoot(std::move(runtime), device_type, std::move(layout),
                    std::move(options), /*check_options=*/true,
                    "DeviceMesh::FromLayout");
}

namespace device_mesh_internal {
absl::StatusOr<DeviceMesh> FromLayoutForInit(
    std::shared_ptr<MeshRuntime> runtime, absl::string_view device_type,
    MeshLayout layout, MeshOptions options) {
  return DeviceMesh::CheckedRoot(std::move(runtime), device_type,
                                 std::move(layout), std::move(options));
}
}  // namespace device_mesh_internal

absl::StatusOr<DeviceMesh> DeviceMesh::AgreedRoot(
    std::shared_ptr<MeshRuntime> runtime, absl::string_view device_type,
    absl::StatusOr<MeshLayout> layout, MeshOptions options,
    bool check_options, absl::string_view what) {
  absl::StatusOr<DeviceMesh> mesh =
      !layout.ok() ? absl::StatusOr<DeviceMesh>(layout.status())
      : check_options
          ? CheckedRoot(runtime, device_type, *layout, std::move(options))
          : MakeRoot(runtime, device_type, *layout, std::move(options));
  if (runtime == nullptr || runtime->detached()) return mesh;
  if (!mesh.ok()) {
    // The others took a root index for this root: take one too, so that
    // later roots keep the same indices (and group names) on every rank,
    // and tell them.
    const int64_t index = runtime->NextRootIndex();
    bool leader = false;
    if (layout.ok()) {
      const std::vector<int64_t> ranks = layout->RootLayout().RankTable();
      leader = !ranks.empty() &&
               *std::min_element(ranks.begin(), ranks.end()) == runtime->rank();
    }
    return device_mesh_internal::AbandonRoot(*runtime, index, leader, what,
                                             mesh.status());
  }
  const std::vector<int64_t> ranks = mesh->layout().RootLayout().RankTable();
  // Root ranks are below the world size (MakeRoot), so they fit an int.
  std::vector<int> members(ranks.begin(), ranks.end());
  DEVMESH_RETURN_IF_ERROR(device_mesh_internal::AgreeOnRoot(
      *runtime, mesh->root_->root_index, std::move(members),
      device_mesh_internal::RootMeshSpec(device_type, mesh->layout(),
                                         mesh->options()),
      what,
      mesh->options().all.timeout.value_or(
          device_mesh_internal::kDefaultGroupTimeout)));
  return mesh;
}

absl::StatusOr<DeviceMesh> DeviceMesh::CheckedRoot(
    std::shared_ptr<MeshRuntime> runtime, absl::string_view device_type,
    MeshLayout layout, MeshOptions options) {
  std::vector<std::string> group_names;
  for (int d = 0; d < layout.ndim(); ++d) {
    group_names.push_back(layout.is_named() ? layout.dim_names()[d]
                                            : absl::StrCat("dim_", d));
  }
  DEVMESH_ASSIGN_OR_RETURN(
      auto checked, ValidateMeshOptions(std::move(options), group_names));
  return MakeRoot(std::move(runtime), device_type, std::move(layout),
                  std::move(checked));
}

DeviceMesh DeviceMesh::Derived(MeshLayout layout) const {
  return DeviceMesh(runtime_, root_, std::move(layout), device_type_,
                    options_);
}

namespace {

// The index of `dim` among `layout`'s dims (no dim: a 1-d layout's only
// one), or -1 when it is none of them (ResolveDim then says why). The layout
// queries' fast path: no Status, no call. Names are short and few, so they
// are compared byte by byte here.
int FindOwnDim(const MeshLayout& layout, const std::optional<MeshDim>& dim) {
  if (!dim.has_value()) return layout.ndim() == 1 ? 0 : -1;
  if (!dim->by_name()) {
    return dim->index() >= 0 && dim->index() < layout.ndim()
               ? static_cast<int>(dim->index())
               : -1;
  }
  const std::string& want = dim->name();
  const std::vector<std::string>& names = layout.dim_names();
  for (size_t i = 0; i < names.size(); ++i) {
    const std::string& n = names[i];
    if (n.size() != want.size()) continue;
    size_t k = 0;
    while (k < n.size() && n[k] == want[k]) ++k;
    if (k == n.size()) return static_cast<int>(i);
  }
  return -1;
}

// Out of line, so that the fast paths carry no error-building frame.
ABSL_ATTRIBUTE_NOINLINE absl::Status NotInMesh(const DeviceMesh& mesh) {
  return absl::FailedPreconditionError(absl::StrCat(
      "rank ", mesh.GetRank(), " is not part of ", mesh.ToString()));
}

}  // namespace

absl::StatusOr<int64_t> DeviceMesh::size(MeshDim dim) const {
  if (const int own = FindOwnDim(layout_, dim); own >= 0) {
    return layout_.size(own);
  }
  DEVMESH_ASSIGN_OR_RETURN(auto ref, ResolveDimRef(dim));
  return ref.layout.size(ref.dim);
}

std::vector<std::string> DeviceMesh::dim_group_names() const {
  std::vector<std::string> out;
  for (int d = 0; d < ndim(); ++d) {
    out.push_back(layout_.is_named() ? layout_.dim_names()[d]
                                     : absl::StrCat("dim_", d));
  }
  return out;
}

int DeviceMesh::GetRank() const { return runtime_->rank(); }

const std::optional<std::vector<int64_t>>& DeviceMesh::GetCoordinate() const& {
  return Coordinate();
}

std::optional<std::vector<int64_t>> DeviceMesh::GetCoordinate() const&& {
  return Coordinate();
}

absl::StatusOr<int> DeviceMesh::ResolveDim(
    const std::optional<MeshDim>& dim) const {
  if (!dim.has_value()) {
    if (ndim() == 1) return 0;
    return absl::InvalidArgumentError(absl::StrCat(
        "a mesh dim is required for a ", ndim(), "-d mesh ", ToString()));
  }
  if (dim->by_name()) {
    if (!layout_.is_named()) {
      return absl::NotFoundError(absl::StrCat(
          "mesh dim '", dim->name(), "' not found: ", ToString(),
          " has no dim names"));
    }
    if (const int own = FindOwnDim(layout_, dim); own >= 0) return own;
    return layout_.DimIndex(dim->name());  // its error
  }
  if (dim->index() < 0 || dim->index() >= ndim()) {
    return absl::OutOfRangeError(absl::StrCat("mesh dim ", dim->index(),
                                              " is out of range for the ",
                                              ndim(), "-d mesh ", ToString()));
  }
  return static_cast<int>(dim->index());
}

absl::StatusOr<DeviceMesh::DimRef> DeviceMesh::ResolveDimRef(
    const std::optional<MeshDim>& dim) const {
  absl::StatusOr<int> own = ResolveDim(dim);
  if (own.ok()) {
    return DimRef{layout_, *own, dim_group_names()[*own], options_};
  }
  if (!absl::IsNotFound(own.status())) return own.status();
  // A flattened name of the root (R8, R9), through this rank.
  std::pair<MeshLayout, MeshOptions> flat = [&] {
    sync_internal::MutexLock lock(&root_->mu);
    auto it = root_->flattened.find(dim->name());
    return it == root_->flattened.end()
               ? std::make_pair(layout_, MeshOptions())
               : it->second;
  }();
  if (flat.first.ndim() != 1 || !flat.first.is_named() ||
      flat.first.dim_names()[0] != dim->name()) {
    return own.status();
  }
  DEVMESH_ASSIGN_OR_RETURN(
      auto selected, layout_.SliceWithExtraDims({dim->name()}, {flat.first},
                                                runtime_->rank()));
  return DimRef{std::move(selected), 0, dim->name(), std::move(flat.second)};
}

absl::StatusOr<int64_t> DeviceMesh::GetLocalRank(
    std::optional<MeshDim> dim) const {
  // A dim of this mesh: from the coordinate made with it.
  if (const int own = FindOwnDim(layout_, dim); own >= 0) {
    const std::optional<std::vector<int64_t>>& coordinate = Coordinate();
    if (coordinate.has_value()) return (*coordinate)[static_cast<size_t>(own)];
    return NotInMesh(*this);
  }
  DEVMESH_ASSIGN_OR_RETURN(auto ref, ResolveDimRef(dim));
  if (!layout_.ContainsRank(GetRank())) {
    return absl::FailedPreconditionError(absl::StrCat(
        "rank ", GetRank(), " is not part of ", ToString()));
  }
  return (*ref.layout.CoordinateOf(GetRank()))[ref.dim];
}

absl::StatusOr<Neighbours> DeviceMesh::Shift(MeshDim dim,
                                             int64_t displacement,
                                             bool periodic) const {
  DEVMESH_ASSIGN_OR_RETURN(auto ref, ResolveDimRef(dim));
  if (!layout_.ContainsRank(GetRank())) {
    return absl::FailedPreconditionError(absl::StrCat(
        "rank ", GetRank(), " is not part of ", ToString(),
        ": it has no neighbours"));
  }
  return CartShift(ref.layout, GetRank(), ref.dim, displacement, periodic);
}

DeviceMesh DeviceMesh::RootMesh() const {
  return DeviceMesh(runtime_, root_, root_->root_layout, device_type_,
                    root_->root_options);
}

std::string DeviceMesh::GroupIdentity(const MeshLayout& layout, int d,
                                      const GroupOptions& options) const {
  std::string key = absl::StrCat(
      root_->epoch > 0 ? absl::StrCat("epoch", root_->epoch, "|") : "",
      "root", root_->root_index, "|", layout.DimModesString(d), "|",
      options.backend, "|",
      absl::ToInt64Nanoseconds(options.timeout.value_or(kDefaultGroupTimeout)));
  // Each set typed backend option as its backend's agreed values:
  // "|nccl:1,0,-1,-1,-1," (comm/backend_options.h).
  for (const device_mesh_internal::TypedBackendOptions& t :
       device_mesh_internal::TypedOptionsOf(options)) {
    if (!t.set) continue;
    absl::StrAppend(
        &key, "|", t.backend, ":",
        OptionFieldValues(AgreedOptionFields(t.backend, t.options)));
  }
  if (options.verify_calls.value_or(false)) absl::StrAppend(&key, "|verify");
  return key;
}

std::string DeviceMesh::GroupKey(const MeshLayout& layout, int d,
                                 const GroupOptions& options) const {
  return GroupIdentity(layout, d, options);
}

namespace {

// A group's creation error, naming the mesh dim it was made for and its
// members; when members never came, the likely causes. The code and the
// payloads stay the backend's.
absl::Status ForMeshDim(const absl::Status& error, absl::string_view dim,
                        const std::vector<int>& members) {
  std::string text = absl::StrCat(
      "the group along mesh dim '", dim, "' (global ranks [",
      absl::StrJoin(members, ", "), "]) was not made: ", error.message());
  if (absl::IsDeadlineExceeded(error)) {
    absl::StrAppend(
        &text,
        " -- members that did not come are likely ranks that never asked for "
        "this dim's group (every member of the line must, by GetGroup or a "
        "collective on the dim), ranks that made another mesh (InitDeviceMesh "
        "agrees on it; DeviceMesh::Create and FromLayout do not check), or "
        "ranks busy, stuck or dead elsewhere for longer than the dim's "
        "timeout");
  }
  return Reworded(error, text);
}

}  // namespace

namespace device_mesh_internal {
std::string LocalFields(const GroupOptions& options) {
  std::string out;
  for (const TypedBackendOptions& t : TypedOptionsOf(options)) {
    if (!t.set) continue;
    const std::string local = LocalOptionFields(t.backend, t.options);
    if (local.empty()) continue;
    absl::StrAppend(&out, out.empty() ? "" : "; ", t.backend, " options ",
                    local);
  }
  return out;
}
}  // namespace device_mesh_internal

absl::StatusOr<std::shared_ptr<Communicator>> DeviceMesh::GetGroup(
    std::optional<MeshDim> dim) const {
  // A dim of this mesh whose group this mesh returned before: that answer.
  const absl::StatusOr<int> own = ResolveDim(dim);
  const bool slot = own.ok() && *own < Answers::kGroupSlots;
  if (slot) {
    if (const auto* made =
            answers_->groups[*own].load(std::memory_order_acquire)) {
      return *made;
    }
  }
  DEVMESH_ASSIGN_OR_RETURN(auto ref, ResolveDimRef(dim));
  const MeshLayout& layout = ref.layout;
  const int d = ref.dim;
  GroupOptions options = ref.options.For(ref.name);
  if (options.backend.empty()) {
    options.backend = std::string(DefaultBackendFor(device_type_));
  }
  if (options.backend.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "device type '", device_type_,
        "' has no default backend: set MeshOptions backend (",
        GroupBackendChoicesText(), ")"));
  }
  const absl::Duration timeout = options.timeout.value_or(kDefaultGroupTimeout);
  const std::string key = GroupKey(layout, d, options);
  const std::string local = LocalFields(options);
  const int me = runtime_->rank();
  absl::Status local_mismatch;
  auto lookup = [&]() -> const absl::StatusOr<std::shared_ptr<Communicator>>* {
    sync_internal::MutexLock lock(&root_->mu);
    auto it = root_->groups.find(key);
    if (it == root_->groups.end()) return nullptr;
    auto l = root_->group_locals.find(key);
    if (l != root_->group_locals.end() && l->second != local) {
      local_mismatch = absl::InvalidArgumentError(absl::StrCat(
          "mesh dim ", ref.name, " asks for the group of ranks along ",
          layout.DimModesString(d), " with ", local,
          ", but this root already made that group with ", l->second,
          ": one group has one stream; give the dim other options (a "
          "timeout, say) for a group of its own"));
    }
    return &it->second;
  };
  const absl::StatusOr<std::shared_ptr<Communicator>>* group = lookup();
  if (group == nullptr) {
    {
      // One creation of this group at a time: another thread's, then ours
      // if it left none.
      sync_internal::MutexLock lock(&root_->mu);
      while (root_->creating.count(key)) root_->created.Wait(&root_->mu);
      root_->creating.insert(key);
    }
    // Ours ends on every path out, an exception included.
    struct Done {
      device_mesh_internal::RootState& root;
      const std::string& key;
      ~Done() {
        sync_internal::MutexLock lock(&root.mu);
        root.creating.erase(key);
        root.created.SignalAll();
      }
    } done{*root_, key};
    group = lookup();  // another thread may have made it meanwhile
    if (group == nullptr) {
      // This rank's own line along the dim's modes, from the layout alone
      // (member of this mesh or not, as long as it is in the root): the
      // group is named by it, so only its members take part, in whatever
      // order each creates its groups. A rank outside the root has none.
      absl::StatusOr<std::shared_ptr<Communicator>> made;
      auto line = layout.RootLineOf(me, d);
      if (!line.ok() && !absl::IsNotFound(line.status())) {
        return line.status();
      }
      if (!line.ok()) {
        made = std::shared_ptr<Communicator>();
      } else {
        // Root ranks are below the world size (MakeRoot), so they fit an int.
        std::vector<int> members(line->begin(), line->end());
        made = runtime_->Group(
            options.backend, GroupIdentity(layout, d, options), members,
            timeout, device_mesh_internal::TypedCommOptions(options),
            options.verify_calls,
            absl::StrCat("mesh dim '", ref.name, "'"));
        if (!made.ok()) made = ForMeshDim(made.status(), ref.name, members);
      }
      sync_internal::MutexLock lock(&root_->mu);
      group = &root_->groups.emplace(key, std::move(made)).first->second;
      root_->group_locals.emplace(key, local);
    }
  }
  if (!local_mismatch.ok()) return local_mismatch;
  if (!group->ok()) return group->status();
  if (**group == nullptr || !layout_.ContainsRank(me)) {
    return absl::FailedPreconditionError(
        absl::StrCat("rank ", me, " is not part of ", ToString(),
                     ": it has no group along mesh dim ", ref.name));
  }
  if (slot) answers_->groups[*own].store(group, std::memory_order_release);
  return **group;
}

absl::StatusOr<std::vector<std::shared_ptr<Communicator>>>
DeviceMesh::GetAllGroups() const {
  std::vector<std::shared_ptr<Communicator>> out;
  for (int d = 0; d < ndim(); ++d) {
    DEVMESH_ASSIGN_OR_RETURN(auto g, GetGroup(d));
    out.push_back(std::move(g));
  }
  return out;
}

absl::Status DeviceMesh::Abort() const {
  // PyTorch's DeviceMesh.abort refuses a submesh: its groups are shared with
  // the root and its other submeshes, so the scope would be ambiguous.
  if (layout_ != root_->root_layout) {
    return absl::FailedPreconditionError(absl::StrCat(
        "Abort is not supported on a sub-mesh (", ToString(),
        "): its groups are shared with the root mesh ",
        root_->root_layout.ToString(device_type_),
        "; call RootMesh().Abort() to abort them all"));
  }
  std::vector<std::shared_ptr<Communicator>> groups;
  {
    sync_internal::MutexLock lock(&root_->mu);
    for (auto& [key, group] : root_->groups) {
      if (group.ok() && *group != nullptr) groups.push_back(*group);
    }
  }
  absl::Status first = absl::OkStatus();
  for (const auto& group : groups) {
    // The runtime's world communicators are shared with every other mesh
    // (by identity: a world-sized dim with its own timeout is this root's
    // own Split and is aborted).
    if (runtime_->IsWorldCommunicator(group.get())) continue;
    absl::Status s = group->Abort();
    if (first.ok() && !s.ok()) first = s;
  }
  return first;
}

absl::StatusOr<DeviceMesh> DeviceMesh::Slice(
    absl::Span<const std::string> names) const {
  if (layout_.is_named() && names.size() == layout_.dim_names().size() &&
      std::equal(names.begin(), names.end(), layout_.dim_names().begin())) {
    return *this;  // R8: all names in order is the mesh itself.
  }
  // Flattened names of the root among `names`, with their options.
  std::vector<MeshLayout> extra;
  MeshOptions options = options_;
  {
    sync_internal::MutexLock lock(&root_->mu);
    for (const std::string& name : names) {
      if (layout_.DimIndex(name).ok()) continue;
      auto it = root_->flattened.find(name);
      if (it == root_->flattened.end()) continue;
      extra.push_back(it->second.first);
      auto flat_options = it->second.second.per_dim.find(name);
      if (flat_options != it->second.second.per_dim.end()) {
        options.per_dim.emplace(name, flat_options->second);
      }
    }
  }
  if (extra.empty()) {
    DEVMESH_ASSIGN_OR_RETURN(auto sliced,
                             layout_.SliceThroughRank(names, runtime_->rank()));
    return Derived(std::move(sliced));
  }
  DEVMESH_ASSIGN_OR_RETURN(
      auto sliced, layout_.SliceWithExtraDims(names, extra, runtime_->rank()));
  return DeviceMesh(runtime_, root_, std::move(sliced), device_type_,
                    std::move(options));
}

absl::StatusOr<DeviceMesh> DeviceMesh::Flatten(
    std::optional<std::string> name,
    std::optional<GroupOptions> group_options) const {
  if (!layout_.is_named()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot flatten ", ToString(), ": it has no dim names"));
  }
  const std::string flat_name =
      name.value_or(absl::StrJoin(layout_.dim_names(), "_"));
  if (flat_name.empty()) {
    return absl::InvalidArgumentError(
        "the flattened mesh dim name must not be empty");
  }
  if (ndim() == 1 && flat_name == layout_.dim_names()[0]) return *this;
  for (const std::string& root_name : root_->root_layout.dim_names()) {
    if (root_name == flat_name) {
      return absl::InvalidArgumentError(absl::StrCat(
          "flatten name '", flat_name,
          "' is already a dim of the root mesh ",
          root_->root_layout.ToString(device_type_)));
    }
  }
  if (group_options.has_value()) {
    DEVMESH_RETURN_IF_ERROR(CheckGroupTimeout(
        *group_options,
        absl::StrCat("Flatten('", flat_name, "') group_options")));
  }
  DEVMESH_ASSIGN_OR_RETURN(auto flat, layout_.Flatten(flat_name));
  MeshOptions options = options_;
  if (group_options.has_value()) options.per_dim[flat_name] = *group_options;
  sync_internal::MutexLock lock(&root_->mu);
  auto it = root_->flattened.find(flat_name);
  if (it != root_->flattened.end()) {
    if (it->second.first != flat) {
      return absl::InvalidArgumentError(absl::StrCat(
          "flattened mesh dim '", flat_name, "' already has another layout: ",
          it->second.first.LayoutString(), " vs ", flat.LayoutString()));
    }
    if (group_options.has_value()) {
      // The options the first Flatten gave this name (none: all unset).
      const auto& kept = it->second.second.per_dim;
      auto first = kept.find(flat_name);
      const GroupOptions earlier =
          first == kept.end() ? GroupOptions() : first->second;
      if (!SameGroupOptions(earlier, *group_options)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "flattened mesh dim '", flat_name,
            "' already exists with group options ",
            GroupOptionsString(earlier), ", not ",
            GroupOptionsString(*group_options),
            ": give the same options, or none, to get that mesh back, or "
            "another name for a group with other options"));
      }
    }
    return DeviceMesh(runtime_, root_, it->second.first, device_type_,
                      it->second.second);
  }
  root_->flattened.emplace(flat_name, std::make_pair(flat, options));
  return DeviceMesh(runtime_, root_, std::move(flat), device_type_,
                    std::move(options));
}

absl::StatusOr<DeviceMesh> DeviceMesh::Unflatten(
    MeshDim dim, absl::Span<const int64_t> sizes,
    std::vector<std::string> names) const {
  DEVMESH_ASSIGN_OR_RETURN(auto d, ResolveDim(dim));
  DEVMESH_ASSIGN_OR_RETURN(auto out,
                           layout_.Unflatten(d, sizes, std::move(names)));
  return Derived(std::move(out));
}

absl::StatusOr<DeviceMesh> DeviceMesh::Transpose(
    absl::Span<const int> perm) const {
  DEVMESH_ASSIGN_OR_RETURN(auto out, layout_.Transpose(perm));
  return Derived(std::move(out));
}

absl::StatusOr<DeviceMesh> DeviceMesh::Concatenate(
    absl::Span<const DeviceMesh> meshes) {
  if (meshes.empty()) {
    return absl::InvalidArgumentError("Concatenate needs at least one mesh");
  }
  const DeviceMesh& first = meshes[0];
  std::vector<MeshLayout> layouts;
  MeshOptions options = first.options_;
  for (const DeviceMesh& m : meshes) {
    if (m.root_ != first.root_) {
      return absl::FailedPreconditionError(absl::StrCat(
          "cannot concatenate meshes of different roots: ", m.ToString(),
          " and ", first.ToString()));
    }
    if (m.device_type_ != first.device_type_) {
      return absl::InvalidArgumentError(absl::StrCat(
          "cannot concatenate meshes of different device types: '",
          m.device_type_, "' and '", first.device_type_, "'"));
    }
    for (const auto& [dim_name, dim_options] : m.options_.per_dim) {
      options.per_dim.emplace(dim_name, dim_options);
    }
    layouts.push_back(m.layout_);
  }
  DEVMESH_ASSIGN_OR_RETURN(auto out, MeshLayout::Concatenate(layouts));
  return DeviceMesh(first.runtime_, first.root_, std::move(out),
                    first.device_type_, std::move(options));
}

std::string DeviceMesh::Serialize() const {
  return SerializeMesh(device_type_, layout_, options_);
}

absl::StatusOr<DeviceMesh> DeviceMesh::Deserialize(
    absl::string_view bytes, std::shared_ptr<MeshRuntime> runtime) {
  auto parts = DeserializeMesh(bytes);
  if (!parts.ok()) {
    return AgreedRoot(std::move(runtime), "", parts.status(), MeshOptions(),
                      /*check_options=*/false, "DeviceMesh::Deserialize");
  }
  return AgreedRoot(std::move(runtime), parts->device_type,
                    std::move(parts->layout), std::move(parts->options),
                    /*check_options=*/false, "DeviceMesh::Deserialize");
}

}  // namespace devmesh
