// devmesh/comm/error_info.h
// -----------------------------------------------------------------------------
// The facts a devmesh error carries for programs, as absl::Status payloads:
// the peer it is about, whether that peer's process is gone or it left
// normally, whether the members disagreed, whether this rank was fenced or
// removed from the mesh in an epoch. The message and code are for people and
// for the broad class of the error; a program that acts on an error reads
// these, never the text:
//
//   absl::Status s = tp->AllReduce(absl::MakeSpan(grads), ReduceOp::kSum);
//   devmesh::ErrorInfo info = devmesh::GetErrorInfo(s);
//   if (info.fenced || info.removed_in_epoch >= 0) return Exit();
//   if (info.peer >= 0 && !info.peer_left) Report(info.peer);
//
// Set where the fact is known: the backends (comm/shm, comm/gloo), the
// per-call check (comm/call_check.h), InitDeviceMesh's agreement, the
// failure watch, the guard and DeviceMesh::Shrink (device_mesh/). Each With*
// function returns `error` unchanged when it is OK. Thread-safety: pure.
#ifndef DEVMESH_COMM_ERROR_INFO_H_
#define DEVMESH_COMM_ERROR_INFO_H_

// First, before any other include: a build without C++17 stops here with
// one line naming the fix.
#include "config/require_cxx17.h"

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace devmesh {

// Every payload of an error, read at once; each field keeps its "none" value
// when the error has no such payload (or a malformed one).
struct ErrorInfo {
  // The global rank of the one peer the error is about (kPeerPayload, else
  // kProcessGonePayload); -1 when it names none.
  int peer = -1;
  // That peer's process is gone, as this host's kernel saw it.
  bool process_gone = false;
  // That peer left normally (destroyed its communicator, or ended its
  // runtime): it did not die.
  bool peer_left = false;
  // The global rank whose call or mesh differed from rank 0's
  // (kDisagreementPayload); -1 when none did.
  int disagreeing = -1;
  // This rank was declared dead by the others and is fenced out of the job
  // (kFencedPayload): it must not take part in a collective again.
  bool fenced = false;
  // The epoch (>= 1) in which DeviceMesh::Shrink removed this rank's
  // replica (kRemovedPayload); -1 when it was not removed.
  int64_t removed_in_epoch = -1;
};

// The payloads of `error` (all none for OK).
ErrorInfo GetErrorInfo(const absl::Status& error);

// The absl::Status payload (type URL) of an error for which the backend saw,
// through this host's kernel, that a member's process is gone; its value is
// that member's global rank in decimal.
inline constexpr absl::string_view kProcessGonePayload =
    "devmesh/process-gone";

// `error` with that payload naming `global_rank`.
absl::Status WithProcessGone(absl::Status error, int global_rank);

// The global rank `error`'s kProcessGonePayload names; -1 when it has none
// (or one that is not a rank).
int ProcessGoneRank(const absl::Status& error);

// The absl::Status payload (type URL) of an error about one peer: the
// global rank of the member whose connection, message or arrival failed
// (Gloo: the peer its connection names; shm: the member that died, left or
// aborted), in decimal. Errors about several members (a timeout naming
// many) carry none.
inline constexpr absl::string_view kPeerPayload = "devmesh/peer";

// `error` with that payload naming `global_rank`.
absl::Status WithPeer(absl::Status error, int global_rank);

// The global rank `error`'s kPeerPayload names, else its
// kProcessGonePayload's (a gone process is a peer too); -1 when neither.
int PeerRank(const absl::Status& error);

// The absl::Status payload (type URL) of an error for which the peer left
// normally (it destroyed its communicator, or its runtime ended): it did not
// die. Its value is that peer's global rank, in decimal.
inline constexpr absl::string_view kPeerLeftPayload = "devmesh/peer-left";

// `error` with that payload (and kPeerPayload) naming `global_rank`.
absl::Status WithPeerLeft(absl::Status error, int global_rank);

// The global rank `error`'s kPeerLeftPayload names; -1 when it has none.
int PeerLeftRank(const absl::Status& error);

// `error` with `message` as its message: its code and every payload kept
// (absl::Status(code, message) drops the payloads).
absl::Status Reworded(const absl::Status& error, absl::string_view message);

// The absl::Status payload (type URL) of an error for which the members of a
// call disagreed (comm/call_check.h: another kind, dtype, count, op, root or
// sequence number than the group's rank 0); its value is the global rank of
// the member whose call differed, in decimal.
inline constexpr absl::string_view kDisagreementPayload =
    "devmesh/disagreement";

// `error` with that payload naming `global_rank`.
absl::Status WithDisagreement(absl::Status error, int global_rank);

// The global rank `error`'s kDisagreementPayload names; -1 when it has none.
int DisagreeingRank(const absl::Status& error);


// The absl::Status payload (type URL) of an error because this rank is
// fenced (the others declared it dead and went on); its value is this
// rank's global rank, in decimal.
inline constexpr absl::string_view kFencedPayload = "devmesh/fenced";

// `error` with that payload naming `global_rank` (this rank).
absl::Status WithFenced(absl::Status error, int global_rank);

// The absl::Status payload (type URL) of an error because DeviceMesh::Shrink
// removed this rank's replica; its value is the epoch it was removed in, in
// decimal.
inline constexpr absl::string_view kRemovedPayload = "devmesh/removed";

// `error` with that payload naming `epoch`.
absl::Status WithRemoved(absl::Status error, int64_t epoch);

// `out` with every payload of `from` that `out` does not have yet.
absl::Status WithPayloadsOf(absl::Status out, const absl::Status& from);

}  // namespace devmesh

#endif  // DEVMESH_COMM_ERROR_INFO_H_
