// devmesh/device_mesh/device_mesh.h
// -----------------------------------------------------------------------------
// DeviceMesh: an n-d array of global ranks (a //mesh MeshLayout) with one
// process group per mesh dim, so that collectives run along each dim on its
// own (the reference Python DeviceMesh, PyTorch's
// torch.distributed.DeviceMesh). R-numbers (R3, R19, ...) name behaviours
// listed, with where each comes from, in docs/BEHAVIOURS.md.
//
//   auto mesh = InitDeviceMesh("cpu", {2, 2}, {"dp", "tp"});   // 4 ranks
//   auto tp = mesh->GetGroup("tp");           // created on first use
//   std::vector<float> buf(n);
//   (*tp)->AllReduce(absl::MakeSpan(buf), ReduceOp::kSum);  // float32, in place
//   auto dp_mesh = mesh->Slice({"dp"});       // a 1-d mesh through my rank
//
// Groups (R3, R19). A dim's group is made on first use from the layout: the
// rank's own line along the dim (MeshLayout::RootLineOf) names it, together
// with the root's index on the runtime and the dim's options, and only its
// members take part (MeshRuntime::Group: O(1) store round trips and
// O(group size) bytes per rank, nothing O(world) unless the line is the
// world). So ranks may ask for the dims of a mesh in any order: every group
// is right, or its creation fails with DeadlineExceeded naming the members
// that did not come within the timeout; that happens when orders wait on
// each other in a circle, for instance two ranks asking for two groups they
// both belong to in opposite orders (PyTorch's new_group, by contrast, is
// collective over the world in one order). Every rank makes its root meshes
// (InitDeviceMesh, Create, FromLayout, FromGroups, Deserialize) in the same
// order, as it would make process groups; each root is agreed by its ranks
// when it is made (InitDeviceMesh by the world, the others by the root's
// ranks), so a rank that makes an extra root or another one in its place
// fails with the root's other ranks at once (InvalidArgument, "the ranks
// disagree on the mesh"), or its later roots' groups time out; a root's
// groups never pair with another root's. A rank of the root outside the
// mesh (a non-member of a slice) gets its own line's group, as a Split
// would give it; a rank outside the root gets FailedPrecondition with no
// communication. A group is cached on
// the root mesh under the dim's modes, backend, timeout and NCCL config, so
// every slice, flatten, unflatten, transpose or concatenation whose dim has
// the same ranks in the same order reuses it (R11). A custom rank table
// keeps its order inside the group (group rank i = i-th rank along the
// dim). A dim whose line is the whole world in world order (any 1-d world
// mesh, a flatten of all dims) with no NCCL config is the runtime's world
// communicator of its backend and timeout (MeshRuntime::World, shared by
// every mesh, made then if it does not exist yet). No world communicator is
// made for other dims.
//
// Flattened names (R8, R9): a name made by Flatten anywhere under a root is
// accepted wherever a dim name is (Slice, mixed with other dims in any
// order; GetGroup; size; GetLocalRank; Shift; options), on the root and on
// every mesh derived from it that holds the flattened dim's ranks. PyTorch
// resolves them when slicing the root; devmesh also on derived meshes and in
// GetGroup / size / GetLocalRank.
//
// Dims are named by index or by name (MeshDim). Values: a DeviceMesh is a
// cheap copyable handle; copies, slices and flattens share the root's group
// cache. Thread-safety: all const methods may be called from any thread;
// a group is created once (a thread asking for a group another thread is
// creating waits for it), and distinct groups may be created at once from
// distinct threads (each creation is a collective over that group's
// members only; DeviceMesh::Shrink rebuilds its groups so); the
// Communicators themselves are not safe for concurrent collectives (see
// comm/communicator.h).
#ifndef DEVMESH_DEVICE_MESH_DEVICE_MESH_H_
#define DEVMESH_DEVICE_MESH_DEVICE_MESH_H_

// First, before any other include: a build without C++17 stops here with
// one line naming the fix.
#include "config/require_cxx17.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "comm/communicator.h"
#include "device_mesh/group_options.h"
#include "device_mesh/mesh_runtime.h"
#include "mesh/cart_shift.h"
#include "mesh/mesh_layout.h"
#include "mesh/rank_table.h"

namespace devmesh {

// A mesh dim given by index (any integer type) or by name (R4). A bool is
// rejected at compile time (the reference raises TypeError for a bool index); an
// index outside [0, ndim) is OutOfRange where it is used.
class MeshDim {
 public:
  template <typename Int,
            std::enable_if_t<std::is_integral_v<Int> &&
                                 !std::is_same_v<Int, bool>,
                             int> = 0>
  MeshDim(Int index) {  // NOLINT
    if constexpr (std::is_unsigned_v<Int>) {
      index_ = index > static_cast<uint64_t>(INT64_MAX)
                   ? INT64_MAX
                   : static_cast<int64_t>(index);
    } else {
      index_ = static_cast<int64_t>(index);
    }
  }
  MeshDim(absl::string_view name) : name_(name), by_name_(true) {}  // NOLINT
  MeshDim(const char* name) : MeshDim(absl::string_view(name)) {}   // NOLINT
  MeshDim(const std::string& name) : MeshDim(absl::string_view(name)) {}  // NOLINT
  MeshDim(bool) = delete;

  bool by_name() const { return by_name_; }
  int64_t index() const { return index_; }
  const std::string& name() const { return name_; }

 private:
  int64_t index_ = 0;
  std::string name_;
  bool by_name_ = false;
};

class DeviceMesh;

namespace device_mesh_internal {
struct RootState;
// InitDeviceMesh's own mesh (init_device_mesh.cc), made as FromLayout
// makes it but without the root agreement: InitDeviceMesh agrees on its own
// (mesh_agreement.h).
absl::StatusOr<DeviceMesh> FromLayoutForInit(
    std::shared_ptr<MeshRuntime> runtime, absl::string_view device_type,
    MeshLayout layout, MeshOptions options);
}  // namespace device_mesh_internal

// ---- Elastic recovery (DeviceMesh::Shrink; devmesh's own) -------------------

struct ShrinkOptions {
  // How long Shrink waits for every live member of the mesh to call it
  // (members whose lease stops are not waited for).
  absl::Duration timeout = absl::Seconds(60);
  // A member that has not called Shrink counts as dead when its lease does
  // not advance for this long (over etcd: as soon as its lease expired);
  // default 3 lease periods (DEVMESH_LEASE_PERIOD_MS), cut to
  // max(2 s, 2 periods) - 0.3 periods - 300 ms from a period of about
  // 430 ms (1.4 s at 1 s), so that a death is not waited for past
  // max(2 s, 2 periods). One given is at least two periods.
  std::optional<absl::Duration> lease;
  // Shrink fails (FailedPrecondition, on every survivor alike) rather than
  // leave fewer replicas than this.
  int64_t min_replicas = 1;
  // Further deaths during a Shrink (found when a group's rebuild fails with
  // a verdict of the new epoch) start another round, up to this many
  // rounds in all.
  int max_rounds = 3;
};

// What one Shrink did, as seen from this rank.
struct ShrinkReport {
  int64_t epoch = 0;                      // the new mesh's epoch
  std::vector<int> dead;                  // global ranks found dead, sorted
  std::vector<int64_t> removed_replicas;  // their replicas' coordinates along
                                          // the replica dim of the old mesh
  std::vector<int> removed_live;          // live ranks of removed replicas
  // This rank's groups of the new mesh, as "<dim> [<global ranks>]": kept
  // (the old epoch's communicator, idle and whole on every member) or
  // rebuilt, each followed by how: "(nccl_shrink)" (the old NCCL group
  // shrunk with ncclCommShrink; listed first), "(recreated)" (made anew
  // under the new epoch), or "(recreated after nccl_shrink failed:
  // <error>)".
  std::vector<std::string> kept;
  std::vector<std::string> rebuilt;
  int rounds = 1;  // agreements it took (more when ranks died during it)
  // When this rank learnt the job's verdict (InfinitePast when it learnt
  // none before calling Shrink); Shrink's start to the agreement; the
  // agreement to every group of the new mesh ready.
  absl::Time verdict_time = absl::InfinitePast();
  absl::Duration agree;
  absl::Duration rebuild;
  // One line: "epoch 1: dead [2]; removed replicas [1] (live [3]); kept
  // tp [0, 1]; rebuilt dp [0, 4] (recreated); rounds 1; agree 12ms,
  // rebuild 40ms".
  std::string ToString() const;
};

struct ShrinkResult;

// ---- Healing (DeviceMesh::Grow and JoinAsSpare; devmesh's own) --------------

struct GrowOptions {
  // Replicas along the replica dim that Grow admits spares up to; 0: as
  // many as the world holds (world size / ranks per replica: the mesh's
  // replica count before any Shrink, for a mesh over the whole world).
  // Not negative.
  int64_t target_replicas = 0;
  // How long Grow waits for every member of the mesh to call it.
  absl::Duration timeout = absl::Seconds(60);
  // A registered spare counts as ready when it answers this Grow's call
  // within this window (a waiting spare answers within a store round trip;
  // Grow waits the whole window only for one that does not, e.g. one that
  // died); default two lease periods (DEVMESH_LEASE_PERIOD_MS). At least
  // two periods.
  std::optional<absl::Duration> lease;
};

// What one Grow did; the same on every member of the new mesh, spares
// included, but for `kept` and `rebuilt`, which are this rank's.
struct GrowReport {
  int64_t epoch = 0;    // the returned mesh's epoch
  // The returned mesh holds admitted spares. False: no whole replica of
  // spares was ready (the same mesh), or an admitted rank died while the
  // groups were made (shrunk_after: the mesh is that Shrink's).
  bool grown = false;
  std::vector<int> admitted;          // global ranks admitted, sorted
  std::vector<int64_t> new_replicas;  // their coordinates along the
                                      // replica dim of the new mesh
  // Spares ready but left waiting (a partial replica, or over the target).
  std::vector<int> waiting;
  std::vector<std::string> kept;      // "<dim> [<global ranks>]"
  std::vector<std::string> rebuilt;   // made anew under the new epoch
  // Set when an admitted rank died while the groups were made: the Shrink
  // that followed, within the Grow (the mesh returned is its).
  std::string shrunk_after;
  absl::Duration agree;    // the call to the decision
  absl::Duration rebuild;  // the decision to every group of the new mesh
  // "epoch 2: admitted [2, 3] as replicas [2]; waiting []; kept tp [0, 1];
  // rebuilt dp [0, 4, 2]; agree 4ms, rebuild 30ms", or "epoch 1:
  // unchanged (no whole replica of spares ready); waiting [2]".
  std::string ToString() const;
};

// What a spare waits with (DeviceMesh::JoinAsSpare).
struct SpareOptions {
  // How long to wait for a Grow that admits this process.
  absl::Duration timeout = absl::Minutes(30);
};

struct GrowResult;

class DeviceMesh {
 public:
  // ---- Construction ---------------------------------------------------------

  // A mesh over `runtime` of the ranks in `mesh` (R1: rectangular, positive
  // dims, unique non-negative ranks; a scalar is a 1-d mesh of one rank)
  // named `names` (empty, or unique and one per dim). Groups are not made
  // here (R3: lazily). The mesh is a new root: its groups are cached on it
  // and on everything derived from it. `options` is checked here, not later
  // (devmesh's own). A "dim_<i>" key of a named mesh is kept under the
  // dim's name (options().per_dim).
  // Collective over the mesh's ranks (the root's, for FromLayout and
  // Deserialize): they agree, in O(1) store round trips each, on the rank
  // table, shape, names, device type, options, the settings that must
  // agree and devmesh's version (device_mesh/mesh_agreement.h's
  // AgreeOnRoot); ranks outside the mesh take no part and never wait. A
  // runtime of one rank, a detached one, or one whose runtime skips mesh
  // agreements, does not communicate.
  // Errors:
  //   InvalidArgument  a member asked for another mesh: every member gets
  //                    "DeviceMesh::Create: the ranks disagree on the mesh:
  //                    global rank R asked for <field> <value>, global rank
  //                    L for <value>; ..." (kDisagreementPayload: R), or
  //                    "DeviceMesh::Create: global rank R could not make its
  //                    mesh: <its error>" (kPeerPayload: R) when R's own
  //                    checks below failed
  //   DeadlineExceeded a member did not call Create within the mesh's
  //                    timeout (options.all.timeout, default 300 s): "N of
  //                    M ranks of the mesh reached the mesh agreement ..."
  //   others           the store's; Unavailable when the failure watch has
  //                    a verdict while waiting
  //   InvalidArgument  each violation of the rules on `mesh` and `names`
  //                    above, naming the value; a device type with an index
  //                    ("cuda:0") or empty (R18); a null runtime; a rank >=
  //                    the world size; in `options` (devmesh's own), naming
  //                    the key: a per_dim key that is neither a dim name nor
  //                    "dim_<i>" (unknown name; index out of range), two
  //                    keys for one dim ("dp" and "dim_0"), or a timeout
  //                    that is not positive
  static absl::StatusOr<DeviceMesh> Create(
      std::shared_ptr<MeshRuntime> runtime, absl::string_view device_type,
      const RankTable& mesh, std::vector<std::string> names = {},
      MeshOptions options = {});

  // A mesh of an existing layout (its root becomes this mesh's root).
  // Collective over the root's ranks, as Create (the spec holds the root's
  // ranks too when `layout` is not its root).
  // Errors:
  //   as Create ("DeviceMesh::FromLayout: ..."), options checked against
  //   the layout's dims
  static absl::StatusOr<DeviceMesh> FromLayout(
      std::shared_ptr<MeshRuntime> runtime, absl::string_view device_type,
      MeshLayout layout, MeshOptions options = {});

  // R17: a mesh over existing groups. One group: a 1-d mesh of its global
  // ranks; `mesh`, when given, must list exactly those ranks in group
  // order. Several groups: `names` must give one name per group. Without
  // `mesh` (devmesh's own; PyTorch's from_group requires it) the rank table
  // is inferred by exchanging each group's members over the groups
  // themselves (all-gathers, see groups_mesh.h): then this is collective
  // over every group, and every rank calls it with its groups in the same
  // dim order. Each group must hold this rank's line along its dim, in mesh
  // order; this rank (the first group's global rank) must be in `mesh`.
  // Each group's backend becomes its dim's backend option. `runtime` may be
  // null: then only the given groups exist (GetGroup of a new flatten or
  // unflatten gives FailedPrecondition); when given, its rank is not checked
  // against the groups.
  // Errors:
  //   InvalidArgument     no groups; a null group; one group and a `mesh`
  //                       that does not list exactly its ranks in group
  //                       order; several groups and `names` not one name per
  //                       group; without `mesh`, groups that do not form a
  //                       mesh (naming the first inconsistency); a group
  //                       that does not hold this rank's line along its dim
  //                       in mesh order (naming the dim)
  //   FailedPrecondition  this rank (the first group's global rank) is not
  //                       in `mesh`
  //   DeadlineExceeded    without `mesh`, on ranks whose peers stopped at
  //                       the first inconsistency first
  static absl::StatusOr<DeviceMesh> FromGroups(
      std::shared_ptr<MeshRuntime> runtime, absl::string_view device_type,
      std::vector<std::shared_ptr<Communicator>> groups,
      std::optional<RankTable> mesh = std::nullopt,
      std::vector<std::string> names = {});

  // ---- Queries (R2, R5-R7, R12) ---------------------------------------------

  const std::string& device_type() const { return device_type_; }
  const MeshLayout& layout() const { return layout_; }
  const MeshOptions& options() const { return options_; }
  int ndim() const { return layout_.ndim(); }
  std::vector<int64_t> shape() const { return layout_.shape(); }
  // Number of ranks in the mesh (numel).
  int64_t size() const { return layout_.numel(); }
  int64_t numel() const { return layout_.numel(); }
  // Size along a dim or a flattened name ("Flattened names" at the top of
  // this file).
  // Errors:
  //   OutOfRange       an index not in [0, ndim)
  //   NotFound         a name that is neither a dim nor a flattened name
  //   InvalidArgument  a flattened dim reaching ranks outside this mesh
  absl::StatusOr<int64_t> size(MeshDim dim) const;
  // The dim names; empty when unnamed (R5).
  const std::vector<std::string>& mesh_dim_names() const {
    return layout_.dim_names();
  }
  // R3: per dim, its name, else "dim_<i>".
  std::vector<std::string> dim_group_names() const;
  // R2: the rank table, nested like the reference's `mesh`. O(numel).
  RankTable mesh() const { return layout_.NestedRanks(); }
  // This process's world rank (R5).
  int GetRank() const;
  // R7: this rank's coordinate; nullopt when it is not in the mesh.
  // Computed at the first call and kept with the mesh: on a mesh held in a
  // variable the reference stays valid while the mesh or a copy of it lives,
  // and later calls allocate nothing; on a temporary mesh (`*mesh.Slice(..)`)
  // the coordinate is returned by value.
  const std::optional<std::vector<int64_t>>& GetCoordinate() const&;
  std::optional<std::vector<int64_t>> GetCoordinate() const&&;
  // R6: this rank's coordinate along `dim` (a dim or a flattened name). No
  // dim: 1-d mesh means dim 0. A dim is checked as in size(dim).
  // Errors:
  //   InvalidArgument     no dim given on an n-d mesh; a flattened dim
  //                       reaching ranks outside this mesh
  //   OutOfRange          an index not in [0, ndim)
  //   NotFound            a name that is neither a dim nor a flattened name
  //   FailedPrecondition  this rank is not in the mesh
  absl::StatusOr<int64_t> GetLocalRank(std::optional<MeshDim> dim = {}) const;
  // R12: the root mesh of any slice (itself for a root).
  DeviceMesh RootMesh() const;

  // ---- Groups (R3, R4, R5, R19) -------------------------------------------

  // The group of this rank along `dim` (a dim or a flattened name), made on
  // first use (collective over the group's members, see "Groups" at the top
  // of this file). No dim: dim 0 on a 1-d mesh (R4). The first call for a
  // dim blocks for up to the group's timeout while the members connect; a
  // failure is remembered (later calls return it without trying again:
  // abort and rebuild the mesh). A creation error (the backend's, the
  // DeadlineExceeded and Unavailable below) keeps its code and payloads and
  // reads "the group along mesh dim 'tp' (global ranks [0, 1]) was not made:
  // <the error>"; a DeadlineExceeded adds the likely causes of members that
  // did not come.
  // Errors:
  //   InvalidArgument     no dim given on an n-d mesh; a flattened dim that
  //                       reaches ranks outside this mesh; no backend for
  //                       the device type
  //   OutOfRange          an index not in [0, ndim)
  //   NotFound            an unknown dim name, a name on an unnamed mesh, or
  //                       an unknown backend name
  //   FailedPrecondition  this rank is not in the mesh; or the runtime is
  //                       detached (FromGroups without a runtime) and the
  //                       group was not given
  //   DeadlineExceeded    members did not create the group within its
  //                       timeout (the message names them)
  //   Unavailable         containing "stopped waiting: this job's epoch
  //                       has a verdict: <the failure watch's verdict>": a
  //                       rank of the job was found dead while the creation
  //                       waited (in the store: within max(2 s, 2 lease
  //                       periods) of this rank learning the verdict, in
  //                       a rebuild within a tenth of a period, at least
  //                       25 ms, over etcd 100-250 ms; in
  //                       Gloo's pair connects: within 100 ms; NCCL's init:
  //                       50 ms; MeshRuntime::Group), not at the timeout.
  //                       (The shm set-up's last wait, in its segment, does
  //                       not see the verdict: it ends when the member it
  //                       waits for exits, a pidfd, or at the group's
  //                       deadline: comm/shm/shm_communicator.h, step 6)
  //   others              the backend's (Unavailable naming a peer, ...)
  absl::StatusOr<std::shared_ptr<Communicator>> GetGroup(
      std::optional<MeshDim> dim = {}) const;
  // R5: the group of every dim, in dim order.
  absl::StatusOr<std::vector<std::shared_ptr<Communicator>>> GetAllGroups()
      const;
  // On a root mesh (one whose layout is its root's: InitDeviceMesh, Create,
  // FromGroups, RootMesh(), Slice of all dims in order; FromLayout and
  // Deserialize of a root layout): aborts every group made so far by this
  // root and its slices, flattens, unflattens, transposes and
  // concatenations, except the runtime's world communicators (by identity,
  // MeshRuntime::IsWorldCommunicator: a world-sized dim in world order
  // without an NCCL config IS a world communicator, shared with every other
  // mesh, and is left working).
  // Later collectives on them return FailedPrecondition; GetGroup returns
  // the aborted groups. Returns OK when every group's Abort did. Never
  // waits for a group creation in progress, nor for peers.
  // Errors:
  //   FailedPrecondition  a sub-mesh (any mesh whose layout is not its
  //                       root's: a slice, flatten, unflatten, transpose or
  //                       concatenation), aborting nothing, as PyTorch's
  //                       DeviceMesh.abort() refuses a submesh ("the scope
  //                       of a submesh abort is ambiguous": its groups are
  //                       shared)
  //   others              the first error a group's Abort gave
  absl::Status Abort() const;

  // ---- Elastic recovery (devmesh's own) -------------------------------------

  // After a collective failed because members died (the job's verdict,
  // device_mesh/failure_watch.h), every live rank of this root mesh calls
  // Shrink along the replica dim `replica_dim` (a dim of this mesh, dp in a
  // (dp, tp) mesh: a replica is the sub-mesh at one coordinate along it).
  // Shrink
  //   - agrees with the other live members on who is dead (a member is dead
  //     when its lease stops, never on one peer's word; every survivor gets
  //     the same set, or the same error; device_mesh/epoch_agreement.h);
  //   - removes every replica that holds a dead rank, so the mesh stays
  //     rectangular: (dp=3, tp=2) with a death in one replica becomes
  //     (dp=2, tp=2), same names, device type and options;
  //   - keeps each group of the new mesh whose members are a group of the
  //     old one that every member found idle and whole (same number of
  //     completed calls, none failed, none aborted): its communicator is
  //     reused; an NCCL group that only lost members (the replica dim's
  //     lines; the world communicator of a 1-d mesh) is shrunk when every
  //     surviving member can (devmesh built against NCCL >= 2.27, the old
  //     communicator not aborted; comm/shrinkable_communicator.h):
  //     ncclCommShrink with NCCL_SHRINK_ABORT, the old one then aborted on
  //     every rank, never destroyed (pytorch/pytorch#194679); every other
  //     dim's group, and one whose shrink failed, is made anew, now, under
  //     the new epoch (no key or connection of the old epoch is reused).
  //     Flattened dims are not carried over (flatten the new mesh again);
  //   - moves this rank's failure watch to the new epoch.
  // The old mesh's groups refuse every call from then on (Unavailable); do
  // not Abort the old mesh (a kept group is shared with the new one).
  // A rank that dies after the agreement, while the groups are rebuilt, is
  // found when the rebuilt group's creation fails (at the latest at the
  // dim's timeout); Shrink then starts another round.
  // An error after the agreement (a rebuild that failed for another cause,
  // max_rounds reached) leaves the job at the new epoch without a mesh:
  // the job cannot go on; exit.
  // Errors (the same on every survivor where marked *):
  //   FailedPrecondition  not a root mesh; a detached runtime or no failure
  //                       watch (DEVMESH_FAILURE_WATCH=0); no verdict in the
  //                       epoch (no rank found dead: nothing to shrink); a
  //                       mesh of an older epoch (use the mesh Shrink
  //                       returned); this
  //                       rank was declared dead (fenced: every call fails
  //                       from now on); this rank is alive in a removed
  //                       replica (the message names the epoch: exit or
  //                       stay as a spare); *fewer replicas than
  //                       min_replicas would remain; *not more than half of
  //                       the epoch's ranks are alive (no split brain)
  //   OutOfRange, NotFound  as for a dim of GetGroup
  //   InvalidArgument     a lease shorter than two periods, min_replicas or
  //                       max_rounds < 1; *the survivors asked for
  //                       different replica dims or min_replicas ("Shrink of
  //                       epoch 0: the survivors disagree on what to shrink:
  //                       global rank 1 asked for mesh dim 'tp'
  //                       (min_replicas 1), global rank 0 for mesh dim 'dp'
  //                       (min_replicas 1); ..."), with kDisagreementPayload
  //                       naming the first that differs from the lowest
  //                       survivor (comm/error_info.h)
  //   DeadlineExceeded    *live members did not call Shrink within timeout
  //                       (the message names them)
  //   Unavailable         the store did not answer (the message says that
  //                       recovery needs a store no rank hosts); ranks kept
  //                       dying through max_rounds rounds
  //   Internal            a decision in the store that cannot be parsed
  //   others              a rebuilt group's creation error
  // Thread-safety: call from one thread per rank, with no collective of
  // this mesh in flight on this rank.
  absl::StatusOr<ShrinkResult> Shrink(MeshDim replica_dim,
                                      const ShrinkOptions& options = {}) const;

  // The job epoch of this mesh's root (0 until a Shrink).
  int64_t epoch() const;

  // ---- Healing: spares and Grow (devmesh's own) -----------------------------

  // Registers this process as a spare of the running job whose store
  // `runtime` uses (same store address and prefix; runtime->rank() is the
  // global rank it will hold, typically a dead rank's, restarted; its world
  // size the job's) and blocks until a DeviceMesh::Grow admits it, then
  // returns the grown mesh, as every member's Grow does. Waiting disturbs
  // nothing: it writes only spare keys (its registration
  // "devmesh/epoch/<e>/spare/<i>", and its answer to each Grow's call, the
  // proof that it is alive: GrowOptions::lease), starts no failure watch
  // and makes no group; it follows the job from
  // epoch to epoch (registering again after each Shrink or Grow that does
  // not admit it). A process that was a rank removed with its replica may
  // call it with its runtime; a rank found dead and fenced may not. A spare
  // whose rank is a member of the current mesh is never admitted (it waits
  // until its timeout). Once
  // admitted, the failure watch starts in the new epoch and the groups are
  // made as Grow makes them; a death while they are made is handled as
  // Grow says (this spare, removed by that Shrink, waits again).
  // Errors:
  //   FailedPrecondition  a detached runtime or no failure watch
  //                       (DEVMESH_FAILURE_WATCH=0); this process was
  //                       declared dead and fenced (kFencedPayload,
  //                       comm/error_info.h: rejoin as a new process)
  //   DeadlineExceeded    options.timeout passed before any Grow admitted it
  //   Unavailable         the job's store did not answer (the job ended, or
  //                       its store host died)
  //   InvalidArgument     a timeout that is not positive
  //   Internal            a decision in the store that cannot be parsed
  //   others              a group's creation error after admission
  // Thread-safety: one call per process at a time.
  static absl::StatusOr<GrowResult> JoinAsSpare(
      std::shared_ptr<MeshRuntime> runtime, const SpareOptions& options = {});

  // Admits spares (JoinAsSpare) as whole new replicas along `replica_dim`,
  // up to options.target_replicas. Every live member calls it, between
  // steps, with the same dim and options; in one agreement under the job's
  // store (keys "devmesh/epoch/<e>/grow/<n>/") every member, and every
  // admitted spare, reads one decision: the spares that answered the call
  // are ordered by global rank and taken by whole replicas (partial
  // replicas and those over the target keep waiting). Grown, the new root
  // mesh (epoch
  // e + 1):
  //   - keeps every member's coordinate; replica j >= the old replica count
  //     is the (j - old count)-th block of admitted ranks, in row-major
  //     order of the other dims;
  //   - keeps the names, device type and options; flattened dims are not
  //     carried over;
  //   - keeps each group whose members are unchanged and idle (the old
  //     epoch's communicator, rewrapped for the new epoch); the replica
  //     dim's groups and the newcomers' are made anew, now;
  //   - moves this rank's failure watch to the new epoch (the same lease and
  //     fencing rules as Shrink's);
  //   - takes the decision's host table: an admitted spare's entry is the
  //     host it runs on (its runtime's own entry, which it answered the call
  //     with), so groups of ranks on one host are shm (two-level where
  //     the layout allows, unless DEVMESH_TWO_LEVEL=0) on every member
  //     alike. The runtime's table changes here (MeshRuntime::SetHostInfo,
  //     thread-safe): a group made on another thread meanwhile reads the
  //     old table or the new one, whole.
  // With no whole replica of spares ready (or the target reached) nothing
  // changes: every member gets this mesh back (report.grown false, the
  // same epoch) and may call Grow again later. Once the groups are made,
  // every member passes a barrier on each of them, so a rank (admitted or
  // not) that dies while they are made is found by the new epoch's verdict
  // on every member: Grow then Shrinks the new mesh along `replica_dim` on
  // all of them (report.grown false, report.shrunk_after) and returns that
  // mesh or its error; an admitted spare removed by it waits again. Go on
  // with the mesh returned, grown or not. The old mesh's groups refuse
  // every call once grown; do not Abort the old mesh.
  // Errors (the same on every member where marked *):
  //   FailedPrecondition  not a root mesh; a detached runtime or no failure
  //                       watch; this rank is fenced; a mesh of an older
  //                       epoch; *a rank died in this epoch (the verdict's
  //                       text; Shrink first)
  //   OutOfRange, NotFound  as for a dim of GetGroup
  //   InvalidArgument     a negative target_replicas, a timeout that is not
  //                       positive, a lease shorter than two periods; *the
  //                       members asked for different dims or targets
  //                       (kDisagreementPayload names the first that differs
  //                       from the lowest member)
  //   DeadlineExceeded    *members did not call Grow within options.timeout
  //                       (the message names them)
  //   Unavailable         the store did not answer
  //   Internal            a decision that cannot be parsed
  //   others              a new group's creation error; the Shrink's
  // Thread-safety: call from one thread per rank, with no collective of
  // this mesh in flight on this rank.
  absl::StatusOr<GrowResult> Grow(MeshDim replica_dim,
                                  const GrowOptions& options = {}) const;

  // ---- Hearing of a death (devmesh's own) -----------------------------------

  // The job's verdict on a death in this mesh's epoch, learnt without
  // calling a collective: for an engine whose ranks compute for long
  // between collectives, so that every survivor can stop computing and call
  // Shrink within about a lease period of a death (a rank that only learns
  // of it at its next collective holds the others' Shrink up, and one that
  // computes for longer than ShrinkOptions::timeout makes it fail).
  //
  // WaitForFailure blocks until this rank knows the verdict, or was fenced,
  // and returns it: the dead global rank and the verdict's text (fenced:
  // this rank, and why). A verdict known already is returned at once; a
  // past deadline asks without waiting. Wait in slices (a deadline in a
  // loop) from a thread that must also end with the job.
  //
  // Both hear of a verdict only once every group of the epoch was told of
  // it (they refuse calls), so a Shrink called at once finds them told.
  // OnFailure calls `callback` once with the same Verdict, on the thread
  // that learnt it (the failure watch's, or one reading the verdict in a
  // Shrink; at once, on this thread, when it is known already), until the
  // returned subscription is destroyed; its destructor
  // waits for a call in progress. The callback must be quick (set a flag,
  // signal a thread: the watch's lease renewals wait for it), must not call
  // a collective, Shrink or this mesh's OnFailure, and must not destroy its
  // subscription. After a Shrink, wait or subscribe on the mesh it returned.
  //
  //   std::atomic<bool> died{false};
  //   DEVMESH_ASSIGN_OR_RETURN(auto subscription,
  //                            mesh.OnFailure([&](const devmesh::Verdict&) {
  //                              died = true;
  //                            }));
  //   while (computing && !died) ComputeAChunk();
  //   if (died) {
  //     DEVMESH_ASSIGN_OR_RETURN(auto shrunk, mesh.Shrink("dp"));
  //   }
  //
  // Errors:
  //   InvalidArgument     OnFailure: an empty callback
  //   FailedPrecondition  no failure watch (a detached runtime, or
  //                       DEVMESH_FAILURE_WATCH=0); this mesh is of an older
  //                       epoch than the job's, or becomes so while
  //                       WaitForFailure waits (use the mesh the last Shrink
  //                       or Grow returned)
  //   DeadlineExceeded    WaitForFailure: `deadline` passed first
  // Thread-safety: both may be called from any thread, while collectives
  // of this mesh run on others.
  absl::StatusOr<Verdict> WaitForFailure(
      absl::Time deadline = absl::InfiniteFuture()) const;
  absl::StatusOr<std::unique_ptr<VerdictSubscription>> OnFailure(
      std::function<void(const Verdict&)> callback) const;

  // ---- Neighbours (devmesh's own; MPI_Cart_shift, mesh/cart_shift.h) -------

  // The source and destination of this rank at `displacement` steps along
  // `dim` (a dim or a flattened name), as global ranks and as ranks in
  // GetGroup(dim) (the peer of its Send / Recv): a Send to `destination`
  // with a Recv from `source` moves data `displacement` stages on. Not
  // periodic: none past the edge. Example: (2, 4) named (dp, pp), rank 7,
  // pp, +1: source 6 and no destination, or destination 4 when periodic.
  // Pure: makes no group. A dim is checked as in size(dim).
  // Errors:
  //   OutOfRange          an index not in [0, ndim)
  //   NotFound            a name that is neither a dim nor a flattened name
  //   InvalidArgument     a flattened dim reaching ranks outside this mesh
  //   FailedPrecondition  this rank is not in the mesh
  absl::StatusOr<Neighbours> Shift(MeshDim dim, int64_t displacement,
                                   bool periodic = false) const;

  // ---- Transforms (R8-R11; each a new mesh sharing the root's groups) -------

  // R8: the sub-mesh of the named dims, in the order asked, through this
  // rank's coordinate (coordinate 0 when not a member). All names in order
  // gives the mesh itself. Names made by Flatten under this root mix with
  // this mesh's dims in any order (PyTorch's mesh["dp_shard_cp", "tp"]):
  // root (2,3,2) named (pp,dp,tp) with "pt" a flatten of (pp,tp):
  // Slice({"dp","pt"}) is [[0,1,6,7],[2,3,8,9],[4,5,10,11]] on every rank.
  // Errors:
  //   InvalidArgument     empty or repeated names; two dims that overlap
  //                       (share a root dim: Slice({"pt","pp"})), naming
  //                       both; a flattened dim reaching ranks outside this
  //                       mesh
  //   NotFound            unknown name (listing the valid ones)
  //   FailedPrecondition  unnamed mesh
  absl::StatusOr<DeviceMesh> Slice(absl::Span<const std::string> names) const;
  absl::StatusOr<DeviceMesh> Slice(std::initializer_list<std::string> names) const {
    return Slice(absl::MakeConstSpan(names.begin(), names.size()));
  }
  // R9: a 1-d mesh of the same ranks named `name` (default: the names joined
  // by "_"), remembered on the root so that root.Slice({name}) finds it.
  // `group_options` (optional) overrides the backend / timeout / NCCL
  // config of the new dim's group. The same name and layout with the same
  // options, or with none given, give the earlier mesh back with the
  // earlier options (R9; devmesh's own: PyTorch's _flatten keeps the first
  // group and ignores the repeat's backend_override silently).
  // Errors:
  //   InvalidArgument     an empty name; a group_options timeout that is not
  //                       positive (naming the name); `name` is a root dim
  //                       name; an earlier flatten with that name has
  //                       another layout, or it has the same layout but
  //                       other group options (naming the name and both
  //                       options in GroupOptionsString's form; an earlier
  //                       flatten without options counts as all unset)
  //   FailedPrecondition  unnamed mesh
  absl::StatusOr<DeviceMesh> Flatten(
      std::optional<std::string> name = std::nullopt,
      std::optional<GroupOptions> group_options = std::nullopt) const;
  // Splits `dim` into dims of `sizes` named `names`; see
  // MeshLayout::Unflatten for the errors. Options carry over by dim name
  // (per-dim options of the split dim do not apply to the new names).
  absl::StatusOr<DeviceMesh> Unflatten(MeshDim dim,
                                       absl::Span<const int64_t> sizes,
                                       std::vector<std::string> names) const;
  // R11: the dims of `meshes`, in order, into one mesh; groups already made
  // are reused. Options: the first mesh's, plus every mesh's per-dim entries
  // (the first mesh wins a clash).
  // Errors:
  //   FailedPrecondition  different roots (including a deserialized copy,
  //                       which has a root of its own)
  //   InvalidArgument     different device types; unnamed meshes;
  //                       overlapping root dims; no mesh
  static absl::StatusOr<DeviceMesh> Concatenate(
      absl::Span<const DeviceMesh> meshes);
  // Reorders dims: dim i of the result is dim perm[i] of this.
  // Errors:
  //   InvalidArgument  perm is not a permutation of 0..ndim-1
  absl::StatusOr<DeviceMesh> Transpose(absl::Span<const int> perm) const;

  // ---- Text, equality, bytes (R14-R16) ---------------------------------------

  // R14: "DeviceMesh(dp=2, tp=4, 'cuda')"; unnamed "DeviceMesh((2, 4), 'cpu')".
  std::string ToString() const { return layout_.ToString(device_type_); }
  // R15: same rank table, shape, names and device type.
  friend bool operator==(const DeviceMesh& a, const DeviceMesh& b) {
    return a.device_type_ == b.device_type_ && a.layout_ == b.layout_;
  }
  friend bool operator!=(const DeviceMesh& a, const DeviceMesh& b) {
    return !(a == b);
  }
  template <typename H>
  friend H AbslHashValue(H h, const DeviceMesh& m) {
    return H::combine(std::move(h), m.layout_, m.device_type_);
  }
  // R16: bytes holding the layout (with its root), the device type and the
  // options, but no groups.
  std::string Serialize() const;
  // Rebuilds a mesh from Serialize()'s bytes over `runtime`; its groups are
  // made again lazily, under a fresh root. Collective over the root's ranks,
  // as Create: every rank of the root deserializes, in the same order as
  // its other roots.
  // Errors:
  //   InvalidArgument  corrupt or truncated bytes; members whose bytes
  //                    differ ("DeviceMesh::Deserialize: the ranks
  //                    disagree ..."), or a member's bytes were corrupt
  //                    ("... could not make its mesh")
  //   DeadlineExceeded, others  as Create
  static absl::StatusOr<DeviceMesh> Deserialize(
      absl::string_view bytes, std::shared_ptr<MeshRuntime> runtime);

  // The runtime (world rank, store, world communicators) this mesh uses;
  // pass it to Create / FromLayout / Deserialize to make more meshes over
  // the same world.
  const std::shared_ptr<MeshRuntime>& runtime() const { return runtime_; }

 private:
  DeviceMesh(std::shared_ptr<MeshRuntime> runtime,
             std::shared_ptr<device_mesh_internal::RootState> root,
             MeshLayout layout, std::string device_type, MeshOptions options);
  // What the layout queries answer from without computing (made with the
  // mesh, shared by its copies): this rank's coordinate, and each dim's
  // group once GetGroup made it for this mesh (device_mesh.cc).
  struct Answers;
  const std::optional<std::vector<int64_t>>& Coordinate() const;

  // One round of Shrink (device_mesh_shrink.cc); sets `*again` (and
  // returns the new mesh, its groups not all made) when a rank died during
  // the rebuild.
  absl::StatusOr<ShrinkResult> ShrinkOnce(int replica_dim,
                                          const ShrinkOptions& options,
                                          absl::Duration lease,
                                          bool* again) const;
  // After a Grow of epoch `epoch` decided `decision` (spare_registry.h's
  // text, a grown one), on a member (`old`: its mesh) or an admitted spare
  // (`old` null): the new root, the watch moved to epoch + 1, groups kept
  // and made (device_mesh_grow.cc).
  static absl::StatusOr<GrowResult> FinishGrow(
      std::shared_ptr<MeshRuntime> runtime, absl::string_view decision,
      int64_t epoch, const DeviceMesh* old, absl::Duration agree);
  static absl::StatusOr<DeviceMesh> MakeRoot(
      std::shared_ptr<MeshRuntime> runtime, absl::string_view device_type,
      MeshLayout layout, MeshOptions options);
  // Create's, FromLayout's and Deserialize's root: `layout` (an error: this
  // rank's own check failed), `options` checked when `check_options`, then
  // the root agreement among the root's ranks (mesh_agreement.h's
  // AgreeOnRoot, `what` naming the call in errors); a rank whose own checks
  // failed abandons the agreement so that the others fail at once too.
  static absl::StatusOr<DeviceMesh> AgreedRoot(
      std::shared_ptr<MeshRuntime> runtime, absl::string_view device_type,
      absl::StatusOr<MeshLayout> layout, MeshOptions options,
      bool check_options, absl::string_view what);
  static absl::StatusOr<DeviceMesh> CheckedRoot(
      std::shared_ptr<MeshRuntime> runtime, absl::string_view device_type,
      MeshLayout layout, MeshOptions options);
  friend absl::StatusOr<DeviceMesh> device_mesh_internal::FromLayoutForInit(
      std::shared_ptr<MeshRuntime> runtime, absl::string_view device_type,
      MeshLayout layout, MeshOptions options);
  // A mesh of `layout` sharing this mesh's runtime, root and options.
  DeviceMesh Derived(MeshLayout layout) const;
  absl::StatusOr<int> ResolveDim(const std::optional<MeshDim>& dim) const;
  // A dim resolved from an index, a name of this mesh, or a flattened name
  // of the root: the layout it is a dim of (this mesh's, or the flattened
  // dim selected through this rank), its index there, its group name and
  // the options that apply to it.
  struct DimRef {
    MeshLayout layout;
    int dim;
    std::string name;
    MeshOptions options;
  };
  absl::StatusOr<DimRef> ResolveDimRef(const std::optional<MeshDim>& dim) const;
  // What names dim `d`'s group of `layout` (a layout of this root) on
  // every member alike: the root's index, the dim's modes, backend, timeout
  // and the NCCL config fields members share (MeshRuntime::Group's
  // identity).
  std::string GroupIdentity(const MeshLayout& layout, int d,
                            const GroupOptions& options) const;
  // The group cache key: GroupIdentity (the process-local NCCL fields are
  // checked against the cached group's, RootState::group_locals).
  std::string GroupKey(const MeshLayout& layout, int d,
                       const GroupOptions& options) const;

  std::shared_ptr<MeshRuntime> runtime_;
  std::shared_ptr<device_mesh_internal::RootState> root_;
  MeshLayout layout_;
  std::string device_type_;
  MeshOptions options_;
  std::shared_ptr<Answers> answers_;
};

// What Shrink returns: the new root mesh and what happened.
struct ShrinkResult {
  DeviceMesh mesh;
  ShrinkReport report;
};

// What Grow and JoinAsSpare return: the mesh (grown, or unchanged) and what
// happened.
struct GrowResult {
  DeviceMesh mesh;
  GrowReport report;
};

}  // namespace devmesh

#endif  // DEVMESH_DEVICE_MESH_DEVICE_MESH_H_
