#include "store/tcp_store_server.h"

#include <uv.h>

#include <atomic>
#include <cstdio>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "status/status_macros.h"
#include "store/c10d_session.h"
#include "store/c10d_wire_format.h"
#include "store/socket.h"
#include "store/store_service.h"
#include "store/wire_format.h"

namespace devmesh {
namespace {

absl::Status UvError(absl::string_view what, int rc) {
  return absl::InternalError(absl::StrCat(what, ": ", uv_strerror(rc)));
}

// "host:port" of the peer of `tcp` ("[v6]:port"), or "an unknown peer".
std::string PeerName(const uv_tcp_t* tcp) {
  sockaddr_storage addr;
  int len = sizeof(addr);
  if (uv_tcp_getpeername(tcp, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    return "an unknown peer";
  }
  char host[INET6_ADDRSTRLEN] = "";
  if (addr.ss_family == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&addr);
    uv_ip6_name(a, host, sizeof(host));
    return absl::StrCat("[", host, "]:", ntohs(a->sin6_port));
  }
  const auto* a = reinterpret_cast<const sockaddr_in*>(&addr);
  uv_ip4_name(a, host, sizeof(host));
  return absl::StrCat(host, ":", ntohs(a->sin_port));
}

}  // namespace

// Everything below runs on the loop thread, except the constructor, Run's
// start and RequestStop.
class TcpStoreServer::Impl {
 public:
  TcpStoreServerStats Stats() const {
    TcpStoreServerStats out;
    out.connections = connections_.load(std::memory_order_relaxed);
    out.requests = requests_.load(std::memory_order_relaxed);
    out.request_bytes = request_bytes_.load(std::memory_order_relaxed);
    return out;
  }

  explicit Impl(const TcpStoreServerOptions& options)
      : service_(options.token),
        c10d_hello_token_(options.c10d_clients_with_token ? options.token
                                                          : ""),
        log_(options.log) {}

  absl::Status Init(Socket listener) {
    int rc = uv_loop_init(&loop_);
    if (rc != 0) return UvError("uv_loop_init", rc);
    loop_initialized_ = true;
    uv_tcp_init(&loop_, &listener_);
    listener_.data = this;
    rc = uv_tcp_open(&listener_, listener.fd());
    if (rc != 0) return UvError("uv_tcp_open", rc);
    listener.Release();  // libuv owns the fd now
    rc = uv_listen(reinterpret_cast<uv_stream_t*>(&listener_),
                   ListenBacklog(), &Impl::OnConnection);
    if (rc != 0) return UvError("uv_listen", rc);
    uv_async_init(&loop_, &stop_, &Impl::OnStop);
    stop_.data = this;
    thread_ = std::thread([this] { uv_run(&loop_, UV_RUN_DEFAULT); });
    return absl::OkStatus();
  }

  ~Impl() {
    if (thread_.joinable()) {
      uv_async_send(&stop_);
      thread_.join();
    } else if (loop_initialized_) {
      uv_close(reinterpret_cast<uv_handle_t*>(&listener_), nullptr);
      uv_run(&loop_, UV_RUN_DEFAULT);
    }
    if (loop_initialized_) uv_loop_close(&loop_);
  }

 private:
  struct Client {
    Impl* server;
    StoreService::ClientId id;
    uv_tcp_t tcp;
    uv_timer_t timer;
    // The protocol, chosen by the first kC10dGreetingBytes bytes; until
    // then they are kept in `sniffed`.
    enum class Protocol { kUnknown, kDevmesh, kC10d } protocol =
        Protocol::kUnknown;
    std::string sniffed;
    FrameParser parser;                    // kDevmesh
    std::unique_ptr<C10dSession> c10d;     // kC10d
    bool closing = false;       // uv_close called
    bool draining = false;      // last reply queued; close when written
    int open_handles = 2;
  };
  struct Write {
    uv_write_t req;
    std::string data;
    Client* client;
    bool close_after;
  };

  static void OnStop(uv_async_t* async) {
    Impl* self = static_cast<Impl*>(async->data);
    uv_close(reinterpret_cast<uv_handle_t*>(&self->listener_), nullptr);
    uv_close(reinterpret_cast<uv_handle_t*>(&self->stop_), nullptr);
    std::vector<Client*> all;
    for (auto& [id, client] : self->clients_) all.push_back(client.get());
    for (Client* c : all) self->Close(c);
  }

  static void OnConnection(uv_stream_t* listener, int status) {
    Impl* self = static_cast<Impl*>(listener->data);
    if (status != 0) return;
    auto owned = std::make_unique<Client>();
    Client* c = owned.get();
    c->server = self;
    c->id = ++self->next_id_;
    self->connections_.fetch_add(1, std::memory_order_relaxed);
    uv_tcp_init(&self->loop_, &c->tcp);
    uv_timer_init(&self->loop_, &c->timer);
    c->tcp.data = c;
    c->timer.data = c;
    self->clients_[c->id] = std::move(owned);
    if (uv_accept(listener, reinterpret_cast<uv_stream_t*>(&c->tcp)) != 0) {
      self->Close(c);
      return;
    }
    uv_tcp_nodelay(&c->tcp, 1);
    uv_read_start(reinterpret_cast<uv_stream_t*>(&c->tcp), &Impl::OnAlloc,
                  &Impl::OnRead);
  }

  static void OnAlloc(uv_handle_t* handle, size_t, uv_buf_t* buf) {
    Impl* self = static_cast<Client*>(handle->data)->server;
    buf->base = self->read_buffer_;
    buf->len = sizeof(self->read_buffer_);
  }

  static void OnRead(uv_stream_t* stream, ssize_t nread, const uv_buf_t* buf) {
    Client* c = static_cast<Client*>(stream->data);
    Impl* self = c->server;
    if (nread < 0) {  // EOF or error: the client is gone
      self->Close(c);
      return;
    }
    if (c->closing || c->draining) return;
    absl::string_view bytes(buf->base, static_cast<size_t>(nread));
    if (c->protocol == Client::Protocol::kUnknown) {
      c->sniffed.append(bytes.data(), bytes.size());
      // Wait for more only while the bytes could still be a c10d greeting.
      if (c->sniffed.size() < kC10dGreetingBytes &&
          CouldBeC10dGreeting(c->sniffed)) {
        return;
      }
      if (IsC10dGreeting(c->sniffed)) {
        c->protocol = Client::Protocol::kC10d;
        c->c10d = std::make_unique<C10dSession>(self->c10d_hello_token_);
      } else {
        c->protocol = Client::Protocol::kDevmesh;
      }
      bytes = c->sniffed;
    }
    if (c->c10d) {
      c->c10d->Feed(bytes);
    } else {
      c->parser.Feed(bytes);
    }
    std::string().swap(c->sniffed);
    // A parked client may not pile up more than one frame's worth of bytes.
    const size_t buffered =
        c->c10d ? c->c10d->buffered() : c->parser.buffered();
    if (buffered > size_t{kMaxFrameBytes} + 4) {
      if (c->c10d) {
        self->DropC10d(c, absl::StrCat("it sent ", buffered,
                                       " bytes that do not end a request, "
                                       "over the limit of ",
                                       kMaxFrameBytes));
      } else {
        self->Close(c);
      }
      return;
    }
    self->Process(c);
    self->DeliverCompleted();
  }

  static void OnTimer(uv_timer_t* timer) {
    Client* c = static_cast<Client*>(timer->data);
    Impl* self = c->server;
    self->SendServiceReply(c, self->service_.Expire(c->id), false, true);
    self->Process(c);
    self->DeliverCompleted();
  }

  static void OnWritten(uv_write_t* req, int status) {
    std::unique_ptr<Write> w(static_cast<Write*>(req->data));
    if (status != 0 || w->close_after) w->client->server->Close(w->client);
  }

  static void OnClosed(uv_handle_t* handle) {
    Client* c = static_cast<Client*>(handle->data);
    if (--c->open_handles == 0) c->server->clients_.erase(c->id);
  }

  // Handles the complete requests buffered for `c`, in order, until one
  // parks.
  void Process(Client* c) {
    if (c->c10d) {
      ProcessC10d(c);
      return;
    }
    while (!c->closing && !c->draining && !service_.IsParked(c->id)) {
      absl::StatusOr<std::optional<absl::string_view>> frame =
          c->parser.Next();
      if (!frame.ok()) {  // a length over the limit: cannot resynchronise
        Close(c);
        return;
      }
      if (!frame->has_value()) break;
      HandleInService(c, **frame);
    }
    c->parser.ReleaseConsumed();
  }

  // Process for a c10d client: its session turns requests into service
  // payloads (or answers PING / CANCEL_WAIT itself).
  void ProcessC10d(Client* c) {
    while (!c->closing && !c->draining) {
      C10dSession::Step step = c->c10d->Next(service_.IsParked(c->id));
      switch (step.kind) {
        case C10dSession::Step::kNeedMore:
          return;
        case C10dSession::Step::kClose:
          DropC10d(c, step.error);
          return;
        case C10dSession::Step::kSendNow:
          Send(c, std::move(step.bytes), false);
          break;
        case C10dSession::Step::kCancelWait:
          uv_timer_stop(&c->timer);
          if (!service_.Expire(c->id).empty()) c->c10d->DropParked();
          Send(c, std::move(step.bytes), false);
          break;
        case C10dSession::Step::kForward:
          HandleInService(c, step.bytes);
          break;
      }
    }
  }

  void HandleInService(Client* c, absl::string_view payload) {
    requests_.fetch_add(1, std::memory_order_relaxed);
    request_bytes_.fetch_add(static_cast<int64_t>(payload.size()),
                             std::memory_order_relaxed);
    StoreService::Outcome out = service_.Handle(c->id, payload);
    // What the request woke goes out first: torch's server sends a woken
    // WAIT's STOP_WAITING before the reply of the ADD that woke it.
    SendCompleted();
    if (out.reply) {
      SendServiceReply(c, std::move(*out.reply), out.close, false);
    } else if (c->c10d) {
      c->c10d->MarkParked();
    }
    if (out.park_timeout_ms >= 0) {
      uv_timer_start(&c->timer, &Impl::OnTimer,
                     static_cast<uint64_t>(out.park_timeout_ms), 0);
    }
  }

  // Sends a reply frame of the service, in the client's protocol: the reply
  // to the request just handled, or (`parked`) to the parked one.
  void SendServiceReply(Client* c, std::string frame, bool close_after,
                        bool parked) {
    if (frame.empty() || !c->c10d) {
      Send(c, std::move(frame), close_after);
      return;
    }
    absl::StatusOr<std::string> reply =
        parked ? c->c10d->TranslateParkedReply(frame)
               : c->c10d->TranslateReply(frame);
    if (!reply.ok()) {  // c10d has no error replies: drop the client
      DropC10d(c, reply.status().message());
      return;
    }
    if (!reply->empty()) {
      Send(c, *std::move(reply), close_after);
    } else if (close_after) {
      DropC10d(c, "the store service closed the connection");
    }
  }

  // Closes a c10d client and logs why (c10d has no error reply to say so).
  void DropC10d(Client* c, absl::string_view reason) {
    if (c->closing) return;
    const std::string line =
        absl::StrCat("devmesh store server: dropped the c10d client at ",
                     PeerName(&c->tcp), ": ", reason);
    if (log_) {
      log_(line);
    } else {
      std::fprintf(stderr, "%s\n", line.c_str());
    }
    Close(c);
  }

  // Sends the replies of the parked requests that the last request
  // completed, at once (so that they go out before the replies of requests
  // the woken clients pipelined after them, as on torch's server), and
  // remembers those clients for DeliverCompleted.
  void SendCompleted() {
    for (auto& [id, reply] : service_.TakeCompleted()) {
      auto it = clients_.find(id);
      if (it == clients_.end()) continue;
      Client* c = it->second.get();
      uv_timer_stop(&c->timer);
      SendServiceReply(c, std::move(reply), false, true);
      resume_.push_back(id);
    }
  }

  // Lets the clients whose parked requests completed go on with their
  // buffered requests (a loop, not recursion: their requests may complete
  // more parked ones).
  void DeliverCompleted() {
    SendCompleted();
    while (!resume_.empty()) {
      std::vector<StoreService::ClientId> ids = std::exchange(resume_, {});
      for (StoreService::ClientId id : ids) {
        auto it = clients_.find(id);
        if (it != clients_.end()) Process(it->second.get());
      }
    }
  }

  void Send(Client* c, std::string frame, bool close_after) {
    if (c->closing || c->draining || frame.empty()) return;
    if (close_after) c->draining = true;
    // Most replies fit the socket's buffer: write them at once, without a
    // write request (uv_write's path re-arms the socket's epoll watcher, one
    // more epoll_ctl per reply). uv_try_write writes nothing while earlier
    // replies are still queued, so the order holds; what it cannot write
    // goes through uv_write as before.
    uv_buf_t now =
        uv_buf_init(frame.data(), static_cast<unsigned>(frame.size()));
    const int written =
        uv_try_write(reinterpret_cast<uv_stream_t*>(&c->tcp), &now, 1);
    if (written == static_cast<int>(frame.size())) {
      if (close_after) Close(c);
      return;
    }
    if (written < 0 && written != UV_EAGAIN) {
      Close(c);
      return;
    }
    const size_t sent = written > 0 ? static_cast<size_t>(written) : 0;
    auto w = std::make_unique<Write>();
    w->data = std::move(frame);
    w->client = c;
    w->close_after = close_after;
    w->req.data = w.get();
    // The unwritten rest, in place (no copy of a 16 MiB value).
    uv_buf_t buf = uv_buf_init(w->data.data() + sent,
                               static_cast<unsigned>(w->data.size() - sent));
    if (uv_write(&w->req, reinterpret_cast<uv_stream_t*>(&c->tcp), &buf, 1,
                 &Impl::OnWritten) == 0) {
      w.release();  // OnWritten owns it
    } else {
      Close(c);
    }
  }

  void Close(Client* c) {
    if (c->closing) return;
    c->closing = true;
    service_.Forget(c->id);
    uv_close(reinterpret_cast<uv_handle_t*>(&c->tcp), &Impl::OnClosed);
    uv_close(reinterpret_cast<uv_handle_t*>(&c->timer), &Impl::OnClosed);
  }

  StoreService service_;
  std::atomic<int64_t> connections_{0};
  std::atomic<int64_t> requests_{0};
  std::atomic<int64_t> request_bytes_{0};
  const std::string c10d_hello_token_;
  const std::function<void(absl::string_view)> log_;
  uv_loop_t loop_;
  bool loop_initialized_ = false;
  uv_tcp_t listener_;
  uv_async_t stop_;
  std::thread thread_;
  StoreService::ClientId next_id_ = 0;
  absl::flat_hash_map<StoreService::ClientId, std::unique_ptr<Client>>
      clients_;
  std::vector<StoreService::ClientId> resume_;  // see DeliverCompleted
  char read_buffer_[64 * 1024];
};

TcpStoreServer::TcpStoreServer(std::unique_ptr<Impl> impl, int port)
    : impl_(std::move(impl)), port_(port) {}

TcpStoreServer::~TcpStoreServer() = default;

TcpStoreServerStats TcpStoreServer::stats() const { return impl_->Stats(); }

absl::StatusOr<std::unique_ptr<TcpStoreServer>> TcpStoreServer::Start(
    const TcpStoreServerOptions& options) {
  DEVMESH_ASSIGN_OR_RETURN(Socket listener,
                           Socket::Listen(options.host, options.port));
  return StartOnFd(listener.Release(), options);
}

absl::StatusOr<std::unique_ptr<TcpStoreServer>> TcpStoreServer::StartOnFd(
    int listening_fd, const TcpStoreServerOptions& options) {
  Socket listener(listening_fd);
  DEVMESH_ASSIGN_OR_RETURN(int port, listener.LocalPort());
  auto impl = std::make_unique<Impl>(options);
  DEVMESH_RETURN_IF_ERROR(impl->Init(std::move(listener)));
  return std::unique_ptr<TcpStoreServer>(
      new TcpStoreServer(std::move(impl), port));
}

}  // namespace devmesh
