// devmesh/comm/gloo/gloo_communicator.cc
// Collectives of the Gloo backend. Creation and Split: gloo_connect.cc.
#include "comm/gloo/gloo_communicator.h"

#include <cstdint>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "comm/dtype.h"
#include "comm/gloo/gloo_reduce_scatter.h"
#include "comm/gloo/gloo_status.h"
#include "comm/reduce_functions.h"
#include "gloo/allgather.h"
#include "gloo/allreduce.h"
#include "gloo/alltoall.h"
#include "gloo/barrier.h"
#include "gloo/broadcast.h"
#include "gloo/common/error.h"
#include "gloo/transport/tcp/address.h"
#include "gloo/transport/unbound_buffer.h"
#include "status/status_macros.h"

namespace devmesh {
namespace {

using gloo_internal::GlooCall;

// Slots for devmesh's own unbound-buffer traffic, above Gloo's prefixes.
constexpr uint64_t kSendRecvSlot = uint64_t{0x7e} << 56;
constexpr uint64_t kReduceScatterSlot = uint64_t{0x7d} << 56;

// `in` null: in place in `buf`. Otherwise Gloo copies `in` into `buf` a
// segment at a time as its ring reaches it (one pass fewer than copying the
// whole buffer first); `in` and `buf` must then not overlap.
//
// The algorithm: Gloo's bcube (recursive halving and doubling where the size
// is a power of two: 2 log2(n) steps) up to kGlooBcubeMaxBytes, Gloo's ring
// (2 (n - 1) steps, each moving 1/n of the buffer) above. Small messages cost
// a latency per step, and on a loaded host each step waits for two processes
// to be scheduled: 1024 ranks starting on 2 cores, a one-float all-reduce
// over a 32-member group took up to 4.4 s as a ring (62 steps).
template <typename T>
void GlooAllreduce(const std::shared_ptr<::gloo::Context>& context,
                   const void* in, void* buf, size_t count,
                   const reduce_internal::ReduceFunc& fn,
                   std::chrono::milliseconds timeout) {
  ::gloo::AllreduceOptions opts(context);
  if (count * sizeof(T) <= kGlooBcubeMaxBytes) {
    opts.setAlgorithm(::gloo::AllreduceOptions::Algorithm::BCUBE);
  }
  if (in != nullptr) {
    opts.setInput<T>(static_cast<T*>(const_cast<void*>(in)), count);
  }
  opts.setOutput<T>(static_cast<T*>(buf), count);
  opts.setReduceFunction(fn);
  opts.setTimeout(timeout);
  ::gloo::allreduce(opts);
}

void AllreduceBySize(const std::shared_ptr<::gloo::Context>& context,
                     const void* in, void* buf, size_t count,
                     size_t elem_size, const reduce_internal::ReduceFunc& fn,
                     std::chrono::milliseconds timeout) {
  switch (elem_size) {
    case 1:
      return GlooAllreduce<uint8_t>(context, in, buf, count, fn, timeout);
    case 2:
      return GlooAllreduce<uint16_t>(context, in, buf, count, fn, timeout);
    case 4:
      return GlooAllreduce<uint32_t>(context, in, buf, count, fn, timeout);
    default:
      return GlooAllreduce<uint64_t>(context, in, buf, count, fn, timeout);
  }
}

// True when [a, a + bytes) and [b, b + bytes) share a byte.
bool Overlap(const void* a, const void* b, size_t bytes) {
  const auto x = reinterpret_cast<uintptr_t>(a);
  const auto y = reinterpret_cast<uintptr_t>(b);
  return x < y + bytes && y < x + bytes;
}

std::string Describe(absl::string_view op, DataType dtype, size_t count) {
  return absl::StrCat("gloo ", op, " (", DataTypeName(dtype), ", ", count,
                      " elements)");
}

}  // namespace

std::chrono::milliseconds GlooCommunicator::timeout() const {
  return absl::ToChronoMilliseconds(options_.timeout);
}

absl::Status GlooCommunicator::Call(absl::string_view what,
                                    absl::FunctionRef<void()> fn) const {
  absl::Status status = GlooCall(what, fn);
  if (status.ok()) return status;
  // Gloo names a peer by the "[ip]:port" of its end of the connection;
  // say which global rank that is (endpoints exchanged at creation).
  for (const auto& [endpoint, global_rank] : peer_endpoints_) {
    if (absl::StrContains(status.message(), endpoint)) {
      return WithPeer(Reworded(status, absl::StrCat(status.message(),
                                                    " (peer: global rank ",
                                                    global_rank, ")")),
                      global_rank);
    }
  }
  return Reworded(status,
                  absl::StrCat(status.message(),
                               " (no single peer identified; group of "
                               "global ranks [",
                               absl::StrJoin(global_ranks_, ", "), "])"));
}

absl::Status GlooCommunicator::ConnectPending(absl::string_view op,
                                              int peer) {
  if (mesh_connected_.load(std::memory_order_acquire)) return absl::OkStatus();
  std::vector<gloo_internal::MeshLink> now;
  {
    sync_internal::MutexLock lock(&mesh_mu_);
    if (!mesh_failed_.ok()) {
      return Reworded(mesh_failed_,
                      absl::StrCat("gloo ", op,
                                   ": the group's connections failed at an "
                                   "earlier call: ",
                                   mesh_failed_.message()));
    }
    if (pending_.empty()) {
      mesh_connected_.store(true, std::memory_order_release);
      return absl::OkStatus();
    }
    std::vector<gloo_internal::MeshLink> rest;
    for (auto& link : pending_) {
      (peer < 0 || link.peer == peer ? now : rest).push_back(std::move(link));
    }
    pending_ = std::move(rest);
  }
  if (now.empty()) return absl::OkStatus();
  const std::string what = absl::StrCat(
      "gloo ", op, ": connecting the group's pairs at first use (rank ",
      rank_, " of ", size_, ", global rank ", global_ranks_[rank_], ")");
  absl::Status status = gloo_internal::ConnectLinks(
      what, now, device_, options_.timeout, absl::Now() + options_.timeout,
      [this] {
        return aborted_.load() ? absl::FailedPreconditionError(
                                     "the communicator was aborted")
                               : absl::OkStatus();
      },
      nullptr);
  if (aborted_.load()) {
    // Abort closed the pairs under the connects: whatever they returned
    // (a closed pair ends a wait as if connected; a connect that began
    // after the close fails inside Gloo), the answer is the abort's.
    return CheckOpen(op);
  }
  std::vector<gloo_internal::ConnectionEnd> ends;
  for (const auto& link : now) {
    if (link.has_end) ends.push_back(link.end);
  }
  std::map<int, sockaddr_storage> remotes;
  std::map<int, ino_t> found;
  if (status.ok()) found = gloo_internal::FindConnections(ends, &remotes);
  sync_internal::MutexLock lock(&mesh_mu_);
  if (!status.ok()) {
    mesh_failed_ = status;
    return status;
  }
  for (const auto& [p, inode] : found) connections_[p] = inode;
  // Gloo names a peer by its end of the connection: for a pair the peer
  // connected, its ephemeral port (Call maps it to the global rank).
  for (const auto& [p, remote] : remotes) {
    (void)GlooCall(what, [&, p = p, remote = remote] {
      peer_endpoints_[gloo_internal::EndpointName(
          ::gloo::transport::tcp::Address(remote))] = global_ranks_[p];
    });
  }
  return absl::OkStatus();
}

absl::Status GlooCommunicator::CheckOpen(absl::string_view op) const {
  if (aborted_.load()) {
    return absl::FailedPreconditionError(
        absl::StrCat("gloo ", op, ": communicator was aborted"));
  }
  return absl::OkStatus();
}

absl::Status GlooCommunicator::DoAllReduce(const void* send, void* recv,
                                           size_t count, DataType dtype,
                                           ReduceOp op) {
  DEVMESH_RETURN_IF_ERROR(CheckOpen("allreduce"));
  if (count == 0) return absl::OkStatus();
  const size_t elem = DataTypeSize(dtype);
  const size_t bytes = count * elem;
  // Separate buffers go to Gloo as input and output (it copies as it goes);
  // identical ones reduce in place; partly overlapping ones are moved first
  // (Gloo's copy is a memcpy).
  const void* in = nullptr;
  if (send != recv) {
    if (size_ == 1 || Overlap(send, recv, bytes)) {
      std::memmove(recv, send, bytes);
    } else {
      in = send;
    }
  }
  if (size_ == 1) return absl::OkStatus();
  const std::string what =
      absl::StrCat(Describe("allreduce", dtype, count), " ", ReduceOpName(op));
  absl::Status status;
  if (sync_ != nullptr && bytes <= sync_max_bytes_ &&
      sync_->Fits(count, dtype, op)) {
    status = Call(what, [&] {
      sync_->Run(in != nullptr ? in : recv, recv, count, dtype, op);
    });
  } else {
    DEVMESH_RETURN_IF_ERROR(ConnectPending("allreduce", -1));
    auto fn = reduce_internal::GetReduceFunction(dtype, op);
    status = Call(what, [&] {
      AllreduceBySize(context_, in, recv, count, elem, fn, timeout());
    });
  }
  if (!status.ok()) return status;
  if (op == ReduceOp::kAvg) {
    reduce_internal::DivideInPlace(recv, count, dtype, size_);
  }
  return absl::OkStatus();
}

absl::Status GlooCommunicator::DoAllGather(const void* send, void* recv,
                                           size_t count, DataType dtype) {
  DEVMESH_RETURN_IF_ERROR(CheckOpen("allgather"));
  if (count == 0) return absl::OkStatus();
  const size_t bytes = count * DataTypeSize(dtype);
  char* out = static_cast<char*>(recv);
  // Gloo copies the input into the output block of this rank; an in-place
  // call would make that a self-overlapping memcpy, so stage it.
  std::vector<char> staged;
  const char* in = static_cast<const char*>(send);
  if (in == out + rank_ * bytes) {
    staged.assign(in, in + bytes);
    in = staged.data();
  }
  if (size_ == 1) {
    std::memmove(out, in, bytes);
    return absl::OkStatus();
  }
  DEVMESH_RETURN_IF_ERROR(ConnectPending("allgather", -1));
  return Call(Describe("allgather", dtype, count), [&] {
    ::gloo::AllgatherOptions opts(context_);
    opts.setInput<char>(const_cast<char*>(in), bytes);
    opts.setOutput<char>(out, bytes * size_);
    opts.setTimeout(timeout());
    ::gloo::allgather(opts);
  });
}

absl::Status GlooCommunicator::DoReduceScatter(const void* send, void* recv,
                                               size_t count, DataType dtype,
                                               ReduceOp op) {
  DEVMESH_RETURN_IF_ERROR(CheckOpen("reduce_scatter"));
  if (count == 0) return absl::OkStatus();
  const size_t bytes = count * DataTypeSize(dtype);
  const char* in = static_cast<const char*>(send);
  std::vector<char> work(in, in + bytes * size_);
  auto fn = reduce_internal::GetReduceFunction(dtype, op);
  DEVMESH_RETURN_IF_ERROR(ConnectPending("reduce_scatter", -1));
  absl::Status status = Call(
      absl::StrCat(Describe("reduce_scatter", dtype, count), " ",
                   ReduceOpName(op)),
      [&] {
        gloo_internal::RingReduceScatter(context_, work.data(), count, bytes,
                                         fn, kReduceScatterSlot, timeout());
      });
  if (!status.ok()) return status;
  char* mine = work.data() + rank_ * bytes;
  if (op == ReduceOp::kAvg) {
    reduce_internal::DivideInPlace(mine, count, dtype, size_);
  }
  std::memmove(recv, mine, bytes);
  return absl::OkStatus();
}

absl::Status GlooCommunicator::DoBroadcast(const void* send, void* recv,
                                           size_t count, DataType dtype,
                                           int root) {
  DEVMESH_RETURN_IF_ERROR(CheckOpen("broadcast"));
  if (count == 0) return absl::OkStatus();
  const size_t bytes = count * DataTypeSize(dtype);
  if (rank_ == root && send != recv) std::memmove(recv, send, bytes);
  if (size_ == 1) return absl::OkStatus();
  DEVMESH_RETURN_IF_ERROR(ConnectPending("broadcast", -1));
  return Call(Describe("broadcast", dtype, count), [&] {
    ::gloo::BroadcastOptions opts(context_);
    opts.setOutput<char>(static_cast<char*>(recv), bytes);
    opts.setRoot(root);
    opts.setTimeout(timeout());
    ::gloo::broadcast(opts);
  });
}

absl::Status GlooCommunicator::DoAllToAll(const void* send, void* recv,
                                          size_t count, DataType dtype) {
  DEVMESH_RETURN_IF_ERROR(CheckOpen("alltoall"));
  if (count == 0) return absl::OkStatus();
  const size_t total = count * DataTypeSize(dtype) * size_;
  const char* in = static_cast<const char*>(send);
  std::vector<char> staged;
  if (send == recv) {  // In-place: Gloo needs distinct buffers.
    staged.assign(in, in + total);
    in = staged.data();
  }
  if (size_ == 1) {
    std::memmove(recv, in, total);
    return absl::OkStatus();
  }
  DEVMESH_RETURN_IF_ERROR(ConnectPending("alltoall", -1));
  return Call(Describe("alltoall", dtype, count), [&] {
    ::gloo::AlltoallOptions opts(context_);
    opts.setInput<char>(const_cast<char*>(in), total);
    opts.setOutput<char>(static_cast<char*>(recv), total);
    opts.setTimeout(timeout());
    ::gloo::alltoall(opts);
  });
}

// Send and Recv: the first message of each send is a 16-byte header (a
// magic word, the dtype, the count), followed in the same message by the
// data when it is at most kInlineBytes, else by a second message of data.
// The receiver posts kInlineBytes + 16 for the first message (Gloo aborts
// the process when a message is longer than the receive posted for it, so
// the first receive never depends on the sender's count), compares the
// header with its own call, and only then takes the data: a Send and a Recv
// that differ fail the receiver with InvalidArgument instead of a short
// read or a killed process.
namespace {

constexpr uint32_t kP2PMagic = 0x646d7031;  // "dmp1"
constexpr size_t kInlineBytes = 64 * 1024;

struct P2PHeader {
  uint32_t magic;
  uint32_t dtype;
  uint64_t count;
};
static_assert(sizeof(P2PHeader) == 16, "one wire layout");

}  // namespace

absl::Status GlooCommunicator::DoSend(const void* buf, size_t count,
                                      DataType dtype, int peer) {
  DEVMESH_RETURN_IF_ERROR(CheckOpen("send"));
  if (count == 0) return absl::OkStatus();
  const size_t bytes = count * DataTypeSize(dtype);
  DEVMESH_RETURN_IF_ERROR(ConnectPending("send", peer));
  const P2PHeader header{kP2PMagic, static_cast<uint32_t>(dtype),
                         static_cast<uint64_t>(count)};
  const bool inline_data = bytes <= kInlineBytes;
  std::vector<char> first(sizeof(header) + (inline_data ? bytes : 0));
  std::memcpy(first.data(), &header, sizeof(header));
  if (inline_data) std::memcpy(first.data() + sizeof(header), buf, bytes);
  return Call(absl::StrCat(Describe("send", dtype, count), " to ", peer),
              [&] {
                auto head =
                    context_->createUnboundBuffer(first.data(), first.size());
                head->send(peer, kSendRecvSlot);
                std::unique_ptr<::gloo::transport::UnboundBuffer> data;
                if (!inline_data) {
                  data = context_->createUnboundBuffer(const_cast<void*>(buf),
                                                       bytes);
                  data->send(peer, kSendRecvSlot);
                }
                if (!head->waitSend(timeout()) ||
                    (data != nullptr && !data->waitSend(timeout()))) {
                  throw ::gloo::IoException("send aborted");
                }
              });
}

absl::Status GlooCommunicator::DoRecv(void* buf, size_t count, DataType dtype,
                                      int peer) {
  DEVMESH_RETURN_IF_ERROR(CheckOpen("recv"));
  if (count == 0) return absl::OkStatus();
  const size_t bytes = count * DataTypeSize(dtype);
  DEVMESH_RETURN_IF_ERROR(ConnectPending("recv", peer));
  const std::string what =
      absl::StrCat(Describe("recv", dtype, count), " from ", peer);
  // One receive area per communicator (calls are one at a time).
  std::vector<char>& first = recv_head_;
  first.resize(sizeof(P2PHeader) + kInlineBytes);
  auto receive = [&](void* into, size_t n) {
    return Call(what, [&] {
      auto ub = context_->createUnboundBuffer(into, n);
      ub->recv(peer, kSendRecvSlot);
      if (!ub->waitRecv(timeout())) {
        throw ::gloo::IoException("recv aborted");
      }
    });
  };
  DEVMESH_RETURN_IF_ERROR(receive(first.data(), first.size()));
  P2PHeader header;
  std::memcpy(&header, first.data(), sizeof(header));
  const int global = global_ranks_[peer];
  if (header.magic != kP2PMagic) {
    return WithPeer(absl::InternalError(absl::StrCat(
                        what, ": global rank ", global,
                        " sent a message that is not a devmesh send")),
                    global);
  }
  const DataType theirs = static_cast<DataType>(header.dtype);
  const size_t their_width = DataTypeSize(theirs);
  if (header.dtype != static_cast<uint32_t>(dtype) || header.count != count) {
    // Their data, when it did not come inline, is drained so that the
    // pair's next message is read as a header.
    const bool known = their_width > 0 &&
                       header.count <= (uint64_t{1} << 40) / their_width;
    const size_t their_bytes = known ? header.count * their_width : 0;
    // Their data follows the header when it did not come inline: drained
    // into this receive's own buffer when it fits, else into memory of its
    // own. When it cannot be drained the pair's next message would be read
    // as a header: the error says the pair is unusable.
    std::string lost;
    if (!known) {
      lost = "; the pair can no longer be used";
    } else if (their_bytes > kInlineBytes) {
      std::unique_ptr<char[]> drain;
      char* into = static_cast<char*>(buf);
      if (their_bytes > bytes) {
        drain.reset(new (std::nothrow) char[their_bytes]);
        into = drain.get();
      }
      if (into == nullptr) {
        lost = "; its data could not be drained (out of memory) and the "
               "pair can no longer be used";
      } else
        DEVMESH_RETURN_IF_ERROR(receive(into, their_bytes));
    }
    return WithDisagreement(
        absl::InvalidArgumentError(absl::StrCat(
            what, ": global rank ", global, " sent ",
            known ? absl::StrCat(DataTypeName(theirs), " x ", header.count)
                  : absl::StrCat("dtype value ", header.dtype, " x ",
                                 header.count),
            " and this rank receives ", DataTypeName(dtype), " x ", count,
            " (a Send and its Recv must have the same dtype and count); "
            "nothing was received", lost)),
        global);
  }
  if (bytes <= kInlineBytes) {
    std::memcpy(buf, first.data() + sizeof(P2PHeader), bytes);
    return absl::OkStatus();
  }
  return receive(buf, bytes);
}

absl::Status GlooCommunicator::DoBarrier() {
  DEVMESH_RETURN_IF_ERROR(CheckOpen("barrier"));
  if (size_ == 1) return absl::OkStatus();
  DEVMESH_RETURN_IF_ERROR(ConnectPending("barrier", -1));
  return Call("gloo barrier", [&] {
    ::gloo::BarrierOptions opts(context_);
    opts.setTimeout(timeout());
    ::gloo::barrier(opts);
  });
}

int64_t GlooCommunicator::pending_pairs() const {
  sync_internal::MutexLock lock(&mesh_mu_);
  return static_cast<int64_t>(pending_.size());
}

int64_t GlooCommunicator::sync_builds() const {
  return sync_ == nullptr ? -1 : sync_->builds();
}

absl::Status GlooCommunicator::DoAbort() {
  if (aborted_.exchange(true)) return absl::OkStatus();
  if (sync_ != nullptr) sync_->Abort();
  if (context_ == nullptr) return absl::OkStatus();
  // 1. Shut the sockets down: the peers read "connection closed" at once, and
  //    Gloo's loop here fails every pending operation on them.
  std::map<int, ino_t> connections;
  {
    sync_internal::MutexLock lock(&mesh_mu_);
    connections = connections_;
  }
  (void)gloo_internal::ShutdownConnections(connections);
  return GlooCall("gloo abort", [&] {
    // 2. Close every pair. Pair::close takes the pair's lock, which Gloo's
    //    loop holds while it reads into or writes from a buffer, so once it
    //    returns no transport thread touches a caller's buffer again (a
    //    message halfway read is abandoned, not finished into freed memory).
    // 3. Only then wake every wait, those Gloo's pair errors never reach
    //    included, and fail every later send and receive
    //    (gloo_abortable_context.h): the woken call returns, and its caller
    //    may free its buffer.
    auto close_pairs = [&] {
      for (int i = 0; i < size_; ++i) {
        if (i == rank_) continue;
        if (auto& pair = context_->getPair(i)) pair->close();
      }
    };
    if (abortable_ != nullptr) {
      abortable_->Abort(close_pairs);
    } else {
      close_pairs();
    }
  });
}

}  // namespace devmesh
