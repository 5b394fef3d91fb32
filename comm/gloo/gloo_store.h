// devmesh/comm/gloo/gloo_store.h
// -----------------------------------------------------------------------------
// GlooStore: gloo::rendezvous::Store implemented over a devmesh Store, with
// every key put under `prefix` (so one devmesh store can hold the rendezvous
// of many Gloo contexts: "split/<seq>/<color>/" for Split's children).
//
// Gloo's store interface reports failure by throwing; this adapter throws
// gloo_internal::StoreStatusError carrying the devmesh Status, and GlooCall
// (gloo_status.h) turns it back into that Status. Waits use `timeout` unless
// Gloo passes its own. Thread-safety: as the underlying Store.
#ifndef DEVMESH_COMM_GLOO_GLOO_STORE_H_
#define DEVMESH_COMM_GLOO_GLOO_STORE_H_

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "bootstrap/store.h"
#include "gloo/rendezvous/store.h"

namespace devmesh {
namespace gloo_internal {

class GlooStore : public ::gloo::rendezvous::Store {
 public:
  GlooStore(std::shared_ptr<devmesh::Store> store, std::string prefix,
            absl::Duration timeout);

  void set(const std::string& key, const std::vector<char>& data) override;
  std::vector<char> get(const std::string& key) override;
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override;

  // Number of store calls made through this adapter (for benchmarks).
  int64_t round_trips() const { return round_trips_; }

 private:
  std::vector<std::string> Prefixed(const std::vector<std::string>& keys) const;

  std::shared_ptr<devmesh::Store> store_;
  std::string prefix_;
  absl::Duration timeout_;
  int64_t round_trips_ = 0;
};

}  // namespace gloo_internal
}  // namespace devmesh

#endif  // DEVMESH_COMM_GLOO_GLOO_STORE_H_
