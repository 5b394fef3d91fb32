#include "store/etcd_http.h"

#include <curl/curl.h>

#include <algorithm>
#include <functional>
#include <optional>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "store/curl_library.h"

namespace devmesh {
namespace {

// Idle handles kept for reuse; more are closed when returned.
constexpr size_t kMaxIdleHandles = 8;

// How long a request goes on trying while every endpoint refuses
// connections (a member restarting takes about a second to listen).
constexpr absl::Duration kAllRefusedGrace = absl::Seconds(1);

// libcurl, once LoadCurlLibrary() has succeeded (EtcdHttp::Send checks it
// before any handle is made; every other use of libcurl is under Send).
const store_internal::CurlLibrary& Curl() {
  return **store_internal::LoadCurlLibrary();
}

int64_t MillisUntil(absl::Time deadline) {
  // Rounded up: curl must not give up before `deadline`.
  return std::max<int64_t>(
      1, absl::ToInt64Milliseconds(
             absl::Ceil(deadline - absl::Now(), absl::Milliseconds(1))));
}

// etcd's answer to a request over its size limits: the server's own
// (--max-request-bytes, 1.5 MiB by default) or the gateway's gRPC cap (2 MiB).
bool IsTooLarge(absl::string_view message) {
  return absl::StrContains(message, "request is too large") ||
         absl::StrContains(message, "larger than max");
}

// An error reply of the gateway ({"error", "message", "code"}, or a stream's
// {"error": {"grpc_code", "message"}}) as a Status naming the endpoint.
absl::Status EtcdError(const nlohmann::json& reply, long http,
                       absl::string_view endpoint, absl::string_view path,
                       size_t request_bytes) {
  const nlohmann::json* error = &reply;
  if (reply.is_object() && reply.contains("error") &&
      reply["error"].is_object()) {
    error = &reply["error"];
  }
  std::string message;
  int code = static_cast<int>(absl::StatusCode::kUnknown);
  if (error->is_object()) {
    if (error->contains("message") && (*error)["message"].is_string()) {
      message = (*error)["message"].get<std::string>();
    }
    for (const char* field : {"code", "grpc_code"}) {
      if (error->contains(field) && (*error)[field].is_number_integer()) {
        code = (*error)[field].get<int>();
      }
    }
  }
  if (message.empty()) {
    message = absl::StrCat("HTTP ", http, ": ", reply.dump().substr(0, 200));
  }
  if (IsTooLarge(message)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "etcd at ", endpoint, " refused a request to ", path, " (",
        request_bytes,
        " bytes of JSON, values base64-encoded): over etcd's "
        "request-size limit (--max-request-bytes, 1.5 MiB by default, on the "
        "decoded keys and values): ",
        message));
  }
  if (code <= 0 ||
      code > static_cast<int>(absl::StatusCode::kUnauthenticated)) {
    code = static_cast<int>(absl::StatusCode::kUnknown);
  }
  return absl::Status(
      static_cast<absl::StatusCode>(code),
      absl::StrCat("etcd at ", endpoint, " (", path, "): ", message));
}

// Whether an error reply says the member's own server is going away rather
// than answering the request: the gateway (etcd's HTTP front, a gRPC client
// of its own member) gives gRPC's CANCELLED when its connection to the
// member closes under it, as when the member is shutting down ("grpc: the
// client connection is closing"; HTTP 499, or 408 from older gateways).
// Another member may serve the request; whether this one applied it is
// unknown. (UNAVAILABLE comes as HTTP 503, handled apart.)
bool MemberGoing(long http, const std::string& body) {
  if (http == 200) return false;
  const nlohmann::json reply = nlohmann::json::parse(body, nullptr, false);
  if (!reply.is_object()) return false;
  const nlohmann::json* error = &reply;
  if (reply.contains("error") && reply["error"].is_object()) {
    error = &reply["error"];
  }
  for (const char* field : {"code", "grpc_code"}) {
    if (error->contains(field) && (*error)[field].is_number_integer()) {
      return (*error)[field].get<int>() ==
             static_cast<int>(absl::StatusCode::kCancelled);
    }
  }
  return false;
}

}  // namespace

// A curl easy handle; cleaned up with it.
class EtcdHttp::Handle {
 public:
  Handle() : curl_(Curl().easy_init()) {}
  ~Handle() {
    if (curl_ != nullptr) Curl().easy_cleanup(curl_);
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  CURL* get() const { return curl_; }

 private:
  CURL* const curl_;
};

// What one endpoint did with a request.
struct EtcdHttp::Attempt {
  std::string endpoint;
  CURLcode code = CURLE_OK;
  long http = 0;
  std::string body;  // a POST's reply (a stream's unparsed tail)
  char error[CURL_ERROR_SIZE] = {};
  // A stream: its deadline, whether on_message ended it, and its error.
  absl::Time deadline;
  // A stream whose member sent nothing by then is given up (no_answer) and
  // the next member tried: a member that is stopped accepts connections
  // but never answers.
  absl::Time answer_by = absl::InfiniteFuture();
  bool got_data = false;
  bool no_answer = false;
  const OnMessage* on_message = nullptr;
  bool done = false;
  absl::Status stream_status;
  // A request sent once (Retry::kOnce), waited for until its deadline: while
  // no answer has come, the member is asked from next_probe on whether it
  // has a leader (quorum_probe, every probe_every, doubling); one that has
  // none ends the attempt with its note (quorum_note).
  const std::function<std::string()>* quorum_probe = nullptr;
  absl::Time next_probe = absl::InfiniteFuture();
  absl::Duration probe_every;
  std::string quorum_note;
};

namespace {

size_t OnPostData(char* data, size_t size, size_t n, void* user) {
  static_cast<std::string*>(user)->append(data, size * n);
  return size * n;
}

// A stream's bytes: newline-separated JSON messages, each {"result": ...} or
// {"error": ...}. Returns 0 (ending the transfer) when the stream is done.
size_t OnStreamData(char* data, size_t size, size_t n, void* user) {
  auto* a = static_cast<EtcdHttp::Attempt*>(user);
  a->got_data = true;
  a->body.append(data, size * n);
  size_t newline;
  while ((newline = a->body.find('\n')) != std::string::npos) {
    const std::string line = a->body.substr(0, newline);
    a->body.erase(0, newline + 1);
    if (line.empty()) continue;
    nlohmann::json message = nlohmann::json::parse(line, nullptr, false);
    if (message.is_discarded() || !message.is_object()) {
      a->stream_status = absl::UnavailableError(absl::StrCat(
          "etcd at ", a->endpoint,
          " sent a stream message that is not JSON: ", line.substr(0, 200)));
      return 0;
    }
    if (!message.contains("result")) {
      a->stream_status = EtcdError(message, a->http, a->endpoint, "stream", 0);
      return 0;
    }
    absl::StatusOr<bool> done = (*a->on_message)(message["result"]);
    if (!done.ok() || *done) {
      a->stream_status = done.status();
      a->done = true;
      return 0;
    }
  }
  return size * n;
}

int OnProgress(void* user, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  auto* a = static_cast<EtcdHttp::Attempt*>(user);
  const absl::Time now = absl::Now();
  if (!a->got_data && now >= a->answer_by) {
    a->no_answer = true;
    return 1;
  }
  return now >= a->deadline ? 1 : 0;
}

// A kOnce POST's progress: asks whether its member lost quorum while no
// answer has come (see Attempt::quorum_probe); 1 ends the transfer.
int OnOnceProgress(void* user, curl_off_t, curl_off_t, curl_off_t,
                   curl_off_t) {
  auto* a = static_cast<EtcdHttp::Attempt*>(user);
  const absl::Time now = absl::Now();
  if (!a->body.empty() || a->quorum_probe == nullptr || now < a->next_probe ||
      now >= a->deadline) {
    return 0;
  }
  std::string note = (*a->quorum_probe)();
  if (!note.empty()) {
    a->quorum_note = std::move(note);
    return 1;
  }
  a->probe_every *= 2;
  a->next_probe = absl::Now() + a->probe_every;
  return 0;
}

// Whether a failed attempt never sent its request (so it may go elsewhere).
bool NeverSent(CURL* curl, CURLcode code) {
  if (code == CURLE_COULDNT_CONNECT || code == CURLE_COULDNT_RESOLVE_HOST) {
    return true;
  }
  curl_off_t pretransfer = 0;
  return code == CURLE_OPERATION_TIMEDOUT &&
         Curl().easy_getinfo(curl, CURLINFO_PRETRANSFER_TIME_T, &pretransfer) ==
             CURLE_OK &&
         pretransfer == 0;
}

}  // namespace

EtcdHttp::EtcdHttp(std::vector<std::string> endpoints,
                   absl::Duration connect_timeout,
                   absl::Duration attempt_timeout)
    : endpoints_(std::move(endpoints)),
      connect_timeout_(connect_timeout),
      attempt_timeout_(attempt_timeout) {}

std::string EtcdHttp::QuorumNote(CURL* curl, const std::string& endpoint,
                                 absl::Time deadline) {
  // /v3/maintenance/status answers without a leader and lists the member's
  // errors ("etcdserver: no leader").
  const absl::Time by =
      std::min(deadline, absl::Now() + absl::Milliseconds(500));
  if (absl::Now() >= by) return "";
  std::string body;
  const std::string url =
      absl::StrCat("http://", endpoint, "/v3/maintenance/status");
  Curl().easy_reset(curl);
  Curl().easy_setopt(curl, CURLOPT_URL, url.c_str());
  Curl().easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  Curl().easy_setopt(curl, CURLOPT_POSTFIELDS, "{}");
  Curl().easy_setopt(curl, CURLOPT_TIMEOUT_MS,
                   static_cast<long>(MillisUntil(by)));
  Curl().easy_setopt(curl, CURLOPT_WRITEFUNCTION, OnPostData);
  Curl().easy_setopt(curl, CURLOPT_WRITEDATA, &body);
  const CURLcode code = Curl().easy_perform(curl);
  Curl().easy_reset(curl);
  if (code != CURLE_OK) return "";
  const nlohmann::json reply = nlohmann::json::parse(body, nullptr, false);
  if (!reply.is_object() || !reply.contains("errors") ||
      !reply["errors"].is_array() || reply["errors"].empty()) {
    return "";
  }
  std::vector<std::string> errors;
  for (const nlohmann::json& e : reply["errors"]) {
    if (e.is_string()) errors.push_back(e.get<std::string>());
  }
  return absl::StrCat("member ", endpoint, " reports '",
                      absl::StrJoin(errors, "', '"), "'");
}

EtcdHttp::~EtcdHttp() = default;

std::string EtcdHttp::EndpointList() const {
  return absl::StrJoin(endpoints_, ", ");
}

std::unique_ptr<EtcdHttp::Handle> EtcdHttp::Borrow() {
  {
    sync_internal::MutexLock lock(&mu_);
    if (!idle_.empty()) {
      std::unique_ptr<Handle> h = std::move(idle_.back());
      idle_.pop_back();
      return h;
    }
  }
  return std::make_unique<Handle>();
}

void EtcdHttp::Return(std::unique_ptr<Handle> handle) {
  sync_internal::MutexLock lock(&mu_);
  if (idle_.size() < kMaxIdleHandles) idle_.push_back(std::move(handle));
}

absl::StatusOr<EtcdHttp::Attempt> EtcdHttp::Send(absl::string_view path,
                                                 const std::string& body,
                                                 absl::Time deadline,
                                                 Retry retry,
                                                 const OnMessage* stream) {
  // libcurl is loaded here, at the first request (curl_library.h).
  if (auto loaded = store_internal::LoadCurlLibrary(); !loaded.ok()) {
    return loaded.status();
  }
  std::unique_ptr<Handle> handle = Borrow();
  CURL* curl = handle->get();
  if (curl == nullptr) return absl::InternalError("curl_easy_init failed");
  curl_slist* headers =
      Curl().slist_append(nullptr, "Content-Type: application/json");
  headers = Curl().slist_append(headers, "Expect:");  // no 100-continue wait
  std::vector<std::string> failures;  // the last round's, one per endpoint
  std::string quorum_note;  // a member's own account of its trouble
  std::optional<absl::StatusOr<Attempt>> result;
  // Rounds over every endpoint until one answers or the deadline passes: a
  // leader election, a member restarting, a cluster regaining quorum. When
  // every endpoint refuses connections for kAllRefusedGrace, nothing is
  // there to wait for: Unavailable then.
  absl::Time all_refused_since = absl::InfiniteFuture();
  // How long a member may take to answer (a stream: to send its first
  // bytes) before the next is tried: attempt_timeout_ at first (a stopped
  // member is left within it), doubled after each attempt that got no
  // answer, so that a loaded cluster is not sent every request again each
  // attempt_timeout_ (a request given up on is still served: 1024 ranks on
  // one member of 2 cores resent about 7000 requests that took over 1 s,
  // and the resends kept it too busy to answer in time). With one endpoint
  // every request waits until its deadline: another try would go to the
  // same member. A conditional txn (kIfNotSent) does too, asked like kOnce
  // whether its member has a leader: given up after attempt_timeout_, its
  // caller (a CompareSet) sent it again to that member, each copy probed
  // and served (1361 status probes in one 1024-rank round).
  absl::Duration window = attempt_timeout_;
  const bool wait_for_the_one =
      endpoints_.size() == 1 &&
      (retry == Retry::kIdempotent || retry == Retry::kIfNotSent ||
       stream != nullptr);
  bool stream_unanswered = false;  // the last stream attempt's member was slow
  for (int round = 0; !result.has_value(); ++round) {
   failures.clear();
   bool all_refused = true;
   const size_t first = preferred_.load();
   for (size_t i = 0; i < endpoints_.size(); ++i) {
    const size_t index = (first + i) % endpoints_.size();
    Attempt a;
    a.endpoint = endpoints_[index];
    a.deadline = deadline;
    a.on_message = stream;
    // A member that does not answer within attempt_timeout_ (stopped, cut
    // off, or without a leader) is left for the next one.
    const absl::Time attempt_end =
        retry == Retry::kOnce || wait_for_the_one
            ? deadline
            : std::min(deadline, absl::Now() + window);
    if (stream != nullptr) a.answer_by = attempt_end;
    const std::string url = absl::StrCat("http://", a.endpoint, path);
    Curl().easy_reset(curl);  // keeps the handle's open connections
    Curl().easy_setopt(curl, CURLOPT_URL, url.c_str());
    Curl().easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    Curl().easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
    Curl().easy_setopt(curl, CURLOPT_POSTFIELDS, body.data());
    Curl().easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE,
                     static_cast<curl_off_t>(body.size()));
    Curl().easy_setopt(curl, CURLOPT_ERRORBUFFER, a.error);
    Curl().easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS,
                     static_cast<long>(std::min(
                         MillisUntil(deadline),
                         std::max<int64_t>(
                             1, absl::ToInt64Milliseconds(connect_timeout_)))));
    Curl().easy_setopt(curl, CURLOPT_TIMEOUT_MS,
                     static_cast<long>(MillisUntil(
                         stream != nullptr ? deadline : attempt_end)));
    if (stream != nullptr) {
      Curl().easy_setopt(curl, CURLOPT_WRITEFUNCTION, OnStreamData);
      Curl().easy_setopt(curl, CURLOPT_WRITEDATA, &a);
      Curl().easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
      Curl().easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, OnProgress);
      Curl().easy_setopt(curl, CURLOPT_XFERINFODATA, &a);
    } else {
      Curl().easy_setopt(curl, CURLOPT_WRITEFUNCTION, OnPostData);
      Curl().easy_setopt(curl, CURLOPT_WRITEDATA, &a.body);
    }
    // A request sent once is waited for until its deadline; a member that
    // has lost quorum would hold it there (DeadlineExceeded, saying nothing
    // of the cluster): from attempt_timeout_ on, its member is asked
    // whether it has a leader, on a handle of the probe's own (this one is
    // mid-transfer), every attempt_timeout_, 2x, 4x ... (a loaded member is
    // not asked every second by every waiting request).
    const std::string once_endpoint = a.endpoint;
    const std::function<std::string()> probe = [&]() {
      CURL* own = Curl().easy_init();
      if (own == nullptr) return std::string();
      std::string note = QuorumNote(own, once_endpoint, deadline);
      Curl().easy_cleanup(own);
      return note;
    };
    if (stream == nullptr &&
        (retry == Retry::kOnce ||
         (retry == Retry::kIfNotSent && wait_for_the_one))) {
      a.quorum_probe = &probe;
      a.probe_every = attempt_timeout_;
      a.next_probe = absl::Now() + attempt_timeout_;
      Curl().easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
      Curl().easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, OnOnceProgress);
      Curl().easy_setopt(curl, CURLOPT_XFERINFODATA, &a);
    }
    requests_.fetch_add(1, std::memory_order_relaxed);
    a.code = Curl().easy_perform(curl);
    if (!a.quorum_note.empty()) {
      quorum_note = a.quorum_note;
      failures.push_back(absl::StrCat(a.endpoint, " (no answer; no leader)"));
      result = absl::UnavailableError(absl::StrCat(
          "the etcd cluster at ", EndpointList(),
          " has no leader (it has lost quorum: fewer than a majority of its "
          "members are up and connected): ", quorum_note, "; ", path,
          " was sent to ", a.endpoint,
          " and not answered: it may or may not have been applied (a "
          "member holds it until quorum returns)"));
      break;
    }
    // Read now: QuorumNote below uses the handle, and its reset zeroes the
    // timings NeverSent reads (a txn that was sent would look unsent and go
    // again: an Add applied twice).
    const bool never_sent = NeverSent(curl, a.code);
    Curl().easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &a.http);
    if (a.done) {  // the stream's on_message ended it
      result = std::move(a);
      break;
    }
    const bool answered = a.code == CURLE_OK || a.code == CURLE_WRITE_ERROR;
    const bool going =
        answered && stream == nullptr && MemberGoing(a.http, a.body);
    if (answered) {
      // etcd answered (an error reply is a fine answer, except Unavailable
      // from a member that cannot serve: a read goes elsewhere then; and a
      // member going away, MemberGoing: a read goes elsewhere, a write
      // fails below as one that may or may not have been applied).
      const bool unavailable =
          going || (a.http == 503 && retry == Retry::kIdempotent);
      if (!unavailable) {
        preferred_.store(index);
        result = std::move(a);
        break;
      }
      // The next call starts at the next member, not at this one again.
      if (going) preferred_.store((index + 1) % endpoints_.size());
    }
    const bool timed_out = a.code == CURLE_OPERATION_TIMEDOUT ||
                           a.code == CURLE_ABORTED_BY_CALLBACK;
    const bool past_deadline = absl::Now() >= deadline;
    // The member did not answer in time, but the call's deadline is not
    // past: another member may.
    const bool slow_member =
        timed_out && !past_deadline && (a.no_answer || stream == nullptr);
    std::string why =
        a.error[0] != '\0' ? std::string(a.error) : Curl().easy_strerror(a.code);
    if (slow_member) {
      why = absl::StrCat("no answer within ", absl::FormatDuration(window));
    }
    if (stream != nullptr) stream_unanswered = timed_out && !a.got_data;
    if (a.http == 503 || going) {
      why = absl::StrCat("HTTP ", a.http, ": ", a.body.substr(0, 200));
    }
    failures.push_back(absl::StrCat(a.endpoint, " (", why, ")"));
    if (slow_member) window *= 2;
    if (a.code != CURLE_COULDNT_CONNECT &&
        a.code != CURLE_COULDNT_RESOLVE_HOST) {
      all_refused = false;
    }
    // A member without a leader still serves watches: a stream's silence
    // says nothing of quorum, and the question would load a busy member.
    if (a.http == 503 || (slow_member && stream == nullptr)) {
      std::string note = QuorumNote(curl, a.endpoint, deadline);
      if (!note.empty()) quorum_note = std::move(note);
    }
    if (timed_out && !slow_member && !quorum_note.empty()) {
      break;  // the deadline passed on a cluster without a leader: named below
    }
    if (timed_out && !slow_member && !never_sent) {
      result = absl::DeadlineExceededError(
          absl::StrCat("etcd at ", a.endpoint, " did not finish ", path,
                       " before its deadline (", why, ")",
                       quorum_note.empty() ? "" : "; ", quorum_note));
      break;
    }
    if (retry != Retry::kIdempotent && !never_sent) {
      result = absl::UnavailableError(absl::StrCat(
          "the connection to etcd at ", a.endpoint, " failed during ", path,
          " (", why, "); the request may or may not have been applied",
          quorum_note.empty() ? "" : "; ", quorum_note));
      break;
    }
    if (absl::Now() >= deadline) break;
   }
   if (result.has_value() || absl::Now() >= deadline) break;
   if (!all_refused) {
     all_refused_since = absl::InfiniteFuture();
   } else if (all_refused_since == absl::InfiniteFuture()) {
     all_refused_since = absl::Now();
   } else if (absl::Now() - all_refused_since >= kAllRefusedGrace) {
     break;
   }
   absl::SleepFor(std::min(absl::Milliseconds(round < 5 ? 20 : 100),
                           deadline - absl::Now()));
  }
  Curl().easy_reset(curl);  // forgets the pointers into this frame
  Curl().slist_free_all(headers);
  Return(std::move(handle));
  if (!result.has_value()) {
    if (stream != nullptr && stream_unanswered && quorum_note.empty()) {
      // Connected (or connecting) but not answered by the deadline: a busy
      // member. The stream's deadline passed, as it does for any watch.
      return absl::DeadlineExceededError(absl::StrCat(
          "etcd did not answer ", path, " before its deadline; tried: ",
          absl::StrJoin(failures, "; ")));
    }
    if (!quorum_note.empty()) {
      return absl::UnavailableError(absl::StrCat(
          "the etcd cluster at ", EndpointList(),
          " has no leader (it has lost quorum: fewer than a majority of its "
          "members are up and connected) and did not serve ", path,
          " before the deadline: ", quorum_note,
          "; tried: ", absl::StrJoin(failures, "; ")));
    }
    return absl::UnavailableError(absl::StrCat(
        "no etcd endpoint answered ", path,
        "; tried: ", absl::StrJoin(failures, "; "),
        ". Is etcd running there, and are these its client URLs?"));
  }
  return *std::move(result);
}

absl::StatusOr<nlohmann::json> EtcdHttp::Post(absl::string_view path,
                                              const nlohmann::json& body,
                                              absl::Time deadline,
                                              Retry retry) {
  const std::string request = body.dump();
  absl::StatusOr<Attempt> a = Send(path, request, deadline, retry, nullptr);
  if (!a.ok()) return a.status();
  nlohmann::json reply = nlohmann::json::parse(a->body, nullptr, false);
  if (a->http != 200) {
    if (reply.is_discarded()) {
      return absl::UnavailableError(
          absl::StrCat("the server at ", a->endpoint, " answered HTTP ",
                       a->http, " to ", path, " (", a->body.substr(0, 200),
                       "): is it an etcd 3.4 or later client URL?"));
    }
    return EtcdError(reply, a->http, a->endpoint, path, request.size());
  }
  if (reply.is_discarded() || !reply.is_object()) {
    return absl::UnavailableError(absl::StrCat(
        "the server at ", a->endpoint, " answered ", path,
        " with something that is not etcd's JSON: ", a->body.substr(0, 200)));
  }
  // A stream read as a POST (a lease keepalive: one message, then the
  // gateway ends it) reports its error in the body of an HTTP 200.
  if (reply.contains("error") && !reply.contains("result")) {
    return EtcdError(reply, a->http, a->endpoint, path, request.size());
  }
  return reply;
}

absl::Status EtcdHttp::Stream(absl::string_view path,
                              const nlohmann::json& body, absl::Time deadline,
                              const OnMessage& on_message) {
  // A member that closes the stream cleanly (a graceful restart) is not a
  // failed connection to Send: the stream is opened again, on whichever
  // endpoint answers, until the deadline (a watch is idempotent: events
  // seen before are seen again, which the callers' waits allow).
  const std::string request = body.dump();
  for (;;) {
    absl::StatusOr<Attempt> a =
        Send(path, request, deadline, Retry::kIdempotent, &on_message);
    if (!a.ok()) return a.status();
    if (a->done || !a->stream_status.ok()) return a->stream_status;
    if (a->http != 200) {
      nlohmann::json reply = nlohmann::json::parse(a->body, nullptr, false);
      return EtcdError(reply, a->http, a->endpoint, path, 0);
    }
    if (absl::Now() + absl::Milliseconds(50) >= deadline) {
      return absl::UnavailableError(
          absl::StrCat("etcd at ", a->endpoint, " ended the stream ", path,
                       " early, and the deadline left no time to open it "
                       "again"));
    }
    absl::SleepFor(absl::Milliseconds(50));
  }
}

}  // namespace devmesh
