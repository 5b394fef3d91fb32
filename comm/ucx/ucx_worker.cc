// devmesh/comm/ucx/ucx_worker.cc
#include "comm/ucx/ucx_worker.h"

#include <dirent.h>
#include <poll.h>
#include <ucs/config/global_opts.h>

#include <algorithm>
#include <cstdlib>
#include <ctime>

#include "absl/strings/str_cat.h"
#include "comm/ucx/ucx_status.h"

namespace devmesh {
namespace ucx_internal {
namespace {

// Whether this host has an RDMA device (InfiniBand, RoCE, iWARP, soft-RoCE):
// the kernel lists each under /sys/class/infiniband.
bool HasRdmaDevice() {
  DIR* dir = opendir("/sys/class/infiniband");
  if (dir == nullptr) return false;
  bool found = false;
  while (dirent* entry = readdir(dir)) {
    if (entry->d_name[0] != '.') {
      found = true;
      break;
    }
  }
  closedir(dir);
  return found;
}

}  // namespace

absl::StatusOr<UcxWorker*> UcxWorker::Process() {
  // Made once, never destroyed: communicators may outlive static
  // destruction order, and the process's exit closes UCX's sockets.
  static absl::StatusOr<UcxWorker*>* const result = [] {
    auto* worker = new UcxWorker();
    absl::Status s = worker->Init();
    if (!s.ok()) {
      return new absl::StatusOr<UcxWorker*>(absl::UnavailableError(
          absl::StrCat("the UCX worker could not be made: ", s.message())));
    }
    return new absl::StatusOr<UcxWorker*>(worker);
  }();
  return *result;
}

absl::Status UcxWorker::Init() {
  absl::Status s = InitHandles();
  if (!s.ok()) {
    // Nothing half-made is kept: the failure is the process's answer.
    if (worker_ != nullptr) ucp_worker_destroy(worker_);
    if (context_ != nullptr) ucp_cleanup(context_);
    worker_ = nullptr;
    context_ = nullptr;
  }
  return s;
}

void SetUcxEnvironmentDefaults() {
  // UCX's TCP segment sizes and connection retries: through the
  // environment, where UCX's TCP transport reads them (ucx_worker.h);
  // setenv's 0 keeps a value the user set.
  setenv("UCX_TCP_TX_SEG_SIZE", "256K", /*overwrite=*/0);
  setenv("UCX_TCP_RX_SEG_SIZE", "256K", /*overwrite=*/0);
  setenv("UCX_TCP_MAX_CONN_RETRIES", "254", /*overwrite=*/0);
}

absl::Status UcxWorker::InitHandles() {
  // Already done before main where //comm is linked (builtin_backends.cc);
  // then this changes nothing.
  SetUcxEnvironmentDefaults();
  // Without RDMA devices, UCX's ib, rdmacm and cma modules only cost
  // ucp_init their probes (ucx_worker.h); the user's UCX_MODULES or UCX_TLS
  // keeps UCX's own list.
  const bool trim_modules = std::getenv("UCX_MODULES") == nullptr &&
                            std::getenv("UCX_TLS") == nullptr &&
                            !HasRdmaDevice();
  ucs_status_t st = UCS_OK;
  if (trim_modules) {
    st = ucs_global_opts_set_value("MODULES", "^ib,rdmacm,cma");
    if (st != UCS_OK) return UcxStatus(st, "ucs_global_opts_set_value MODULES");
  }
  ucp_config_t* config = nullptr;
  st = ucp_config_read(nullptr, nullptr, &config);
  if (st != UCS_OK) return UcxStatus(st, "ucp_config_read");
  // devmesh's defaults, each kept only where the environment does not set
  // the variable (ucx_worker.h).
  struct Default {
    const char* name;
    const char* value;
  };
  for (const Default& d :
       {Default{"TLS", trim_modules ? "^sysv,posix" : "^sysv,posix,cma"},
        Default{"RNDV_THRESH", "inf"}}) {
    if (std::getenv(absl::StrCat("UCX_", d.name).c_str()) != nullptr) continue;
    st = ucp_config_modify(config, d.name, d.value);
    if (st != UCS_OK) {
      ucp_config_release(config);
      return UcxStatus(st, absl::StrCat("ucp_config_modify ", d.name, "=",
                                        d.value));
    }
  }
  ucp_params_t params = {};
  params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED;
  params.features = UCP_FEATURE_TAG | UCP_FEATURE_WAKEUP;
  params.mt_workers_shared = 0;
  st = ucp_init(&params, config, &context_);
  ucp_config_release(config);
  if (st != UCS_OK) return UcxStatus(st, "ucp_init");

  ucp_worker_params_t wparams = {};
  wparams.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  wparams.thread_mode = UCS_THREAD_MODE_SERIALIZED;
  st = ucp_worker_create(context_, &wparams, &worker_);
  if (st != UCS_OK) return UcxStatus(st, "ucp_worker_create");
  st = ucp_worker_get_efd(worker_, &event_fd_);
  if (st != UCS_OK) return UcxStatus(st, "ucp_worker_get_efd");

  ucp_worker_attr_t attr = {};
  attr.field_mask = UCP_WORKER_ATTR_FIELD_ADDRESS;
  st = ucp_worker_query(worker_, &attr);
  if (st != UCS_OK) return UcxStatus(st, "ucp_worker_query");
  address_.assign(reinterpret_cast<const char*>(attr.address),
                  attr.address_length);
  ucp_worker_release_address(worker_, attr.address);

  return absl::OkStatus();
}

unsigned UcxWorker::Progress() {
  std::lock_guard<std::mutex> lock(mu_);
  return ucp_worker_progress(worker_);
}

bool UcxWorker::Sleep(int extra_fd, absl::Duration timeout,
                      bool watch_worker) {
  const int64_t ms = absl::ToInt64Milliseconds(timeout);
  if (!watch_worker) {
    // A nap: only extra_fd and the timeout end it (microseconds kept).
    pollfd fd = {extra_fd, POLLIN, 0};
    const int64_t us = std::max<int64_t>(1, absl::ToInt64Microseconds(timeout));
    timespec ts = {static_cast<time_t>(us / 1000000),
                   static_cast<long>(us % 1000000) * 1000};
    ppoll(&fd, extra_fd >= 0 ? 1 : 0, &ts, nullptr);
    return false;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    // Busy: events are pending, progress again at once.
    if (ucp_worker_arm(worker_) == UCS_ERR_BUSY) return true;
  }
  pollfd fds[2] = {{event_fd_, POLLIN, 0}, {extra_fd, POLLIN, 0}};
  poll(fds, extra_fd >= 0 ? 2 : 1, ms < 1 ? 1 : static_cast<int>(ms));
  return (fds[0].revents & POLLIN) != 0;
}

}  // namespace ucx_internal
}  // namespace devmesh
