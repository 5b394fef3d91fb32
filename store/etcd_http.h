// devmesh/store/etcd_http.h
// -----------------------------------------------------------------------------
// EtcdHttp: the transport of EtcdStore. It POSTs JSON to etcd's v3 JSON
// gateway (the grpc-gateway on every client URL: /v3/kv/range, /v3/kv/txn,
// /v3/watch, ...) over libcurl, and turns every failure into an absl::Status
// (the one place where curl's and etcd's error codes become Status).
//
// Endpoints and failover: a request goes to the endpoint that answered last
// and, when that one cannot be reached or does not answer within the
// attempt timeout (a stopped member, one without a leader), to the next ones
// in order, round after round until the deadline (or, when every endpoint
// refuses connections, for about a second: nothing runs there). Each attempt
// that got no answer doubles the next one's window (a loaded cluster is not
// sent everything again every attempt timeout); with one endpoint, every
// request waits for it until the deadline (a kIfNotSent txn as a kOnce one,
// below: there is no other member to send it to).
// A stream not answered by its deadline is DeadlineExceeded, as any watch. A request
// that may have reached etcd before its connection failed is sent again
// elsewhere only when it is idempotent (Retry::kIdempotent): a conditional
// txn (Retry::kIfNotSent) is retried only when it never left this process.
// A request that must never apply twice (Retry::kOnce) is not given up
// after attempt_timeout either: its member is waited for until the deadline
// (a member that is only slow still applies it), unless it reports having
// no leader (asked after attempt_timeout, then after 2x, 4x ... as long as
// no answer has come): Unavailable then, naming the lost quorum, the request
// may or may not have been applied.
//
// Deadlines: every request is bounded by its deadline (curl's total timeout);
// connecting to one endpoint by min(connect_timeout, what is left). A stream
// (a watch) is also checked against its deadline at least once a second by
// curl's progress callback.
//
// Errors:
//   Unavailable       no endpoint answered by the deadline (names each
//                     endpoint and curl's error for it, and when a member
//                     reported it, that the cluster has no leader: lost
//                     quorum), or etcd answered Unavailable
//   DeadlineExceeded  the deadline passed after the request was sent
//   InvalidArgument   etcd refused the request as too large (names the
//                     limit) or as malformed
//   others            etcd's gRPC code, as the same absl::StatusCode, with
//                     etcd's message and the endpoint
//
// Thread-safety: every method may be called from any number of threads; each
// call borrows a curl easy handle of a small pool (handles keep their
// connections open between calls).
#ifndef DEVMESH_STORE_ETCD_HTTP_H_
#define DEVMESH_STORE_ETCD_HTTP_H_

// First, before any other include: a build without C++17 stops here with
// one line naming the fix.
#include "config/require_cxx17.h"

// clang-format off
// clang-format on

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"
#include "sync/annotated_mutex.h"

namespace devmesh {

class EtcdHttp {
 public:
  // Whether a request whose connection failed after it was sent may be sent
  // again to another endpoint (kIdempotent), or not (kIfNotSent: the caller
  // gets Unavailable, "may or may not have been applied", after its member
  // failed or did not answer within attempt_timeout, or with one endpoint as
  // kOnce; kOnce: likewise, but the member is given until the deadline to
  // answer, unless it reports no leader: Unavailable naming the lost quorum).
  enum class Retry { kIdempotent, kIfNotSent, kOnce };

  // A message of a stream: return true to end the stream (the call returns
  // OK), false for more, or an error to end it with that error.
  using OnMessage = std::function<absl::StatusOr<bool>(const nlohmann::json&)>;

  // `endpoints` are "host:port" (checked by the caller); `connect_timeout`
  // bounds each connection attempt; `attempt_timeout` how long one member
  // may take to answer a request (a stream: to send its first bytes) before
  // the next one is tried.
  EtcdHttp(std::vector<std::string> endpoints, absl::Duration connect_timeout,
           absl::Duration attempt_timeout);
  ~EtcdHttp();
  EtcdHttp(const EtcdHttp&) = delete;
  EtcdHttp& operator=(const EtcdHttp&) = delete;

  // POSTs `body` to `path` ("/v3/kv/range") and returns etcd's JSON reply.
  // Also a stream that etcd ends after one message ("/v3/lease/keepalive"):
  // the reply is {"result": ...}; its {"error": ...} is returned as a Status.
  absl::StatusOr<nlohmann::json> Post(absl::string_view path,
                                      const nlohmann::json& body,
                                      absl::Time deadline, Retry retry);

  // POSTs `body` to a streaming `path` ("/v3/watch") and calls `on_message`
  // with each message's "result" until it returns true or an error, or until
  // `deadline` (DeadlineExceeded). Idempotent: fails over like a read, and a
  // stream a member closes cleanly is opened again (every 50 ms) until the
  // deadline.
  absl::Status Stream(absl::string_view path, const nlohmann::json& body,
                      absl::Time deadline, const OnMessage& on_message);

  // "a:1, b:2": for messages.
  std::string EndpointList() const;

  // HTTP requests sent so far: every attempt on every endpoint, a stream
  // opened counting one.
  int64_t requests() const { return requests_.load(std::memory_order_relaxed); }

  struct Attempt;  // one request on one endpoint; defined in the .cc

 private:
  class Handle;  // a curl easy handle, in the .cc

  // Runs one request on each endpoint in turn (from the last one that
  // answered) until one answers; `stream` is null for a plain POST.
  absl::StatusOr<Attempt> Send(absl::string_view path, const std::string& body,
                               absl::Time deadline, Retry retry,
                               const OnMessage* stream);
  // What `endpoint` says of its own health when it reports errors ("member
  // a:1 reports 'etcdserver: no leader'"), else "". Bounded by 500 ms and
  // `deadline`; uses `curl` (a borrowed handle, reset after).
  std::string QuorumNote(void* curl, const std::string& endpoint,
                         absl::Time deadline);
  std::unique_ptr<Handle> Borrow();
  void Return(std::unique_ptr<Handle> handle);

  const std::vector<std::string> endpoints_;
  const absl::Duration connect_timeout_;
  const absl::Duration attempt_timeout_;
  std::atomic<size_t> preferred_{0};  // index of the endpoint that answered
  std::atomic<int64_t> requests_{0};
  sync_internal::Mutex mu_;
  std::vector<std::unique_ptr<Handle>> idle_ ABSL_GUARDED_BY(mu_);
};

}  // namespace devmesh

#endif  // DEVMESH_STORE_ETCD_HTTP_H_
