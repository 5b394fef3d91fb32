// devmesh/comm/nccl/nccl_communicator.h
// -----------------------------------------------------------------------------
// The NCCL backend of Communicator (device buffers, one CUDA stream per
// communicator or the caller's). This header needs no CUDA: when devmesh is
// built without a CUDA toolkit (@local_cuda's HAS_NCCL is False) the same
// functions exist and return Unavailable("devmesh was built without NCCL").
//
// Creation (NCCL's documented multi-process recipe): rank 0 calls
// ncclGetUniqueId and Sets it under the store key "nccl/unique_id"; the
// others Get it (CommOptions::timeout). Each rank then calls
// ncclCommInitRankConfig non-blocking and polls ncclCommGetAsyncError until
// done; past the timeout it calls ncclCommAbort and returns DeadlineExceeded.
// The store must be a fresh namespace per world communicator (a PrefixStore).
//
// Mesh groups (device_mesh's MeshRuntime::Group) are created this same way,
// not by ncclCommSplit: each group's leader (its rank 0) makes the unique id
// and Sets it under the group's own store namespace, and only the group's
// members init, with the group's NcclOptions (config, stream, synchronize).
// Why: ncclCommSplit is collective over the parent (bootstrapSplit
// all-gathers every parent rank's (color, key)), so splitting per dim needs
// a world communicator and an O(world) step, which a mesh with no
// world-sized dim never needs; splitShare's resource sharing is the one
// thing lost, and NcclOptions::split_share still applies to a user's own
// Split. Per group and rank: one store round trip (Set for the leader, Get
// for the others) and the id's 128 bytes.
//
// Collectives are enqueued on the stream (the communicator's, or per call
// the caller's NcclStreamScope's: comm/nccl/nccl_stream.h); the call then
// waits for the stream (polling ncclCommGetAsyncError, bounded by the
// timeout) unless NcclOptions::synchronize is false.
//
// The I* calls (IAllReduce, ...) have no progress thread here: the caller's
// thread enqueues the call on the stream, as the blocking form would, and
// records a CUDA event after it; the Work ends when the event has. Its
// Wait polls the event and ncclCommGetAsyncError every 50 us: an NCCL
// error, or the timeout (CommOptions::timeout from the I* call) passing
// first, aborts the communicator (ncclCommAbort) and ends the Work with the
// error, or DeadlineExceeded. Test queries the event once. A Work whose
// event completes after Abort or Revoke ends with FailedPrecondition. A
// Work may outlive its communicator (it then watches only its event).
// Calls on one stream run in issue order; calls on different streams are
// not ordered with each other, and a blocking call does not wait for I*
// calls on other streams. Through a ForwardingCommunicator (mesh groups)
// the same holds: the wrapper hands its I* calls to this backend. Split is
// ncclCommSplit with the same config (splitShare from NcclOptions); the child's
// global ranks come from one all-gather of (color, key) through NCCL.
//
// Bounds (T = CommOptions::timeout; read from the code, no GPU here to run
// multi-rank chaos tests): every wait on NCCL is a poll of
// ncclCommGetAsyncError / cudaStreamQuery against a deadline that ends in
// ncclCommAbort: init (store Get + init, one deadline T), Split (the
// (color, key) all-gather, itself a parent collective bounded by the
// parent's T, and the child's init, by one deadline: the child's T from the
// start of Split), each
// collective and Barrier (T; Barrier waits for its stream, bounded, even
// when synchronize is false), destruction (ncclCommFinalize polled for T,
// else ncclCommAbort). Margin: one poll period (200 us) plus
// ncclCommAbort's own time. Abort is ncclCommAbort (NCCL documents it as
// safe while a peer is gone). Not bounded by devmesh: the caller's own
// waits on a stream when synchronize is false.
//
// Shrink and Revoke (comm/shrinkable_communicator.h; the communicators
// CreateNcclCommunicator and Split return are NcclCommunicators, which
// derive from ShrinkableCommunicator): ncclCommShrink on NCCL >= 2.27,
// ncclCommRevoke on NCCL >= 2.28.7, chosen when compiling from nccl.h's
// NCCL_VERSION_CODE (NcclShrinkBuiltIn, NcclRevokeBuiltIn); Unimplemented
// otherwise. A shrunk child has its parent's options; the parent of a
// shrink that aborts in-flight work is then released with ncclCommAbort,
// never finalized or destroyed (pytorch/pytorch#194679). Checked here
// without a GPU: the argument checks and the build against NCCL 2.28.9;
// tools/gpu_check.sh runs what one GPU can (a world of one cannot shrink:
// NCCL refuses to exclude the caller and a one-rank group has no one else).
//
// Grow (GrowNcclCommunicator below): ncclCommGrow on NCCL >= 2.29
// (NcclGrowBuiltIn), a fresh ncclCommInitRankConfig over the grown group
// otherwise; checked here without a GPU against NCCL 2.28.9 (the re-create
// path) and, compile only, against the documented 2.29 declarations
// (tests/comm/nccl_grow).
//
// Thread-safety: as Communicator (one collective at a time per communicator;
// Abort and Revoke from any thread).
#ifndef DEVMESH_COMM_NCCL_NCCL_COMMUNICATOR_H_
#define DEVMESH_COMM_NCCL_NCCL_COMMUNICATOR_H_

// First, before any other include: a build without C++17 stops here with
// one line naming the fix.
#include "config/require_cxx17.h"

#include <memory>

#include "absl/status/statusor.h"
#include "store/store.h"
#include "comm/communicator.h"
#include "comm/options.h"

namespace devmesh {

// True when this build has the NCCL backend compiled in.
bool NcclBuiltIn();
// True when it was compiled against an NCCL with ncclCommShrink (>= 2.27),
// resp. ncclCommRevoke (>= 2.28.7). False without NCCL.
bool NcclShrinkBuiltIn();
bool NcclRevokeBuiltIn();
// True when it was compiled against an NCCL with ncclCommGrow (>= 2.29).
// False without NCCL.
bool NcclGrowBuiltIn();

// Number of visible CUDA devices. Errors: Unavailable when built without
// NCCL, or when the CUDA runtime reports no device or no driver (the message
// says "no CUDA device visible"). Never crashes without a driver.
absl::StatusOr<int> CudaDeviceCount();

// Makes device (local_rank % number of visible devices) the calling thread's
// CUDA device: one rank per GPU on a host, as torchrun's LOCAL_RANK
// convention. Errors: Unavailable as CudaDeviceCount; InvalidArgument for a
// negative local_rank; Internal with CUDA's message when cudaSetDevice fails.
absl::Status UseLocalCudaDevice(int local_rank);

// Creates rank `rank` of a `size`-rank NCCL communicator. Errors:
// InvalidArgument (null store, size < 1, rank outside [0, size), timeout not
// positive, global_ranks of the wrong length, cuda_device out of range);
// Unavailable (built without NCCL, no CUDA device, NCCL system/remote
// error); DeadlineExceeded (unique id or init not done within the timeout).
absl::StatusOr<std::unique_ptr<Communicator>> CreateNcclCommunicator(
    std::shared_ptr<Store> store, int rank, int size,
    const CommOptions& options);

// What GrowNcclCommunicator made.
struct NcclGrowResult {
  std::unique_ptr<Communicator> comm;  // the grown group, new_size ranks
  // True: made by ncclCommGrow from the parent; false: created anew.
  bool grown_from_parent = false;
};

// Grows an NCCL group of `old_size` ranks to `new_size`: the parent's
// members keep their ranks, the new ranks are old_size .. new_size - 1.
// Called once by every member of the parent, with `parent` (its NCCL
// communicator, or a ForwardingCommunicator over one; no call in flight on
// it) and new_rank = -1, and once by every new rank, with parent = nullptr
// and its rank in the grown group. `store`: a namespace of the job's store
// fresh for this grow and shared by all of them (a PrefixStore per grow).
// `options` as CreateNcclCommunicator's; options.global_ranks, when set,
// lists the grown group's global ranks (new_size of them).
//   NCCL >= 2.29 (NcclGrowBuiltIn): ncclCommGrow. The parent's rank 0 makes
//     the single-use grow id (ncclCommGetUniqueId), Sets it under the key
//     "nccl/grow_id" and passes it; the other members pass none; the new
//     ranks Get it (within options.timeout) and pass it with their rank.
//     The new communicator takes `options` (its config, stream).
//   Otherwise: every caller creates the grown group anew, as
//     CreateNcclCommunicator(store, rank, new_size, options) with rank the
//     member's parent rank or the new rank's.
// Either way the parent is left as it was, usable; once every caller
// succeeded its owner releases it (NCCL's recipe destroys the parent after
// a grow). Non-blocking, bounded by options.timeout and
// options.creation_cancel as creation is; on a failure the new
// communicator is aborted, and with ncclCommGrow the parent too when its
// own wait ran out or was cancelled (it is then in the failed grow).
// Errors:
//   InvalidArgument     null store; old_size < 1 or new_size <= old_size;
//                       a member whose parent is not an NCCL communicator,
//                       whose size is not old_size, or with new_rank other
//                       than -1; a new rank outside [old_size, new_size);
//                       ResolveGroupRanks' (timeout, global_ranks' length)
//   FailedPrecondition  with ncclCommGrow: the parent was aborted or
//                       revoked
//   Unavailable         built without NCCL; no CUDA device; NCCL's system
//                       or remote errors (NcclStatus)
//   DeadlineExceeded    the grow id, or the grow, not done in time
//   others              the store's; creation_cancel's, with its code
// Thread-safety: one call per parent; not concurrent with calls on it.
absl::StatusOr<NcclGrowResult> GrowNcclCommunicator(
    Communicator* parent, std::shared_ptr<Store> store, int old_size,
    int new_size, int new_rank, const CommOptions& options);

}  // namespace devmesh

#endif  // DEVMESH_COMM_NCCL_NCCL_COMMUNICATOR_H_
