// devmesh/tests/store/etcd_testing.h
// -----------------------------------------------------------------------------
// EtcdCluster: real /usr/bin/etcd members on free 127.0.0.1 ports, for
// tests of the etcd store and of jobs over it. Start(n) starts an n-member
// cluster and waits (up to 20 s) until every member answers; the destructor
// stops each member (SIGCONT, SIGTERM, then SIGKILL after 5 s; always
// reaped) and removes the data dirs. Members never outlive the test process
// (PR_SET_PDEATHSIG). Ports are found by binding port 0: run such tests
// exclusive.
//
// Thread-safety: call from the test's main thread, before forking ranks.
#ifndef DEVMESH_TESTS_STORE_ETCD_TESTING_H_
#define DEVMESH_TESTS_STORE_ETCD_TESTING_H_

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/status/status.h"

namespace devmesh {
namespace testing {

class EtcdCluster {
 public:
  EtcdCluster() = default;
  ~EtcdCluster();
  EtcdCluster(const EtcdCluster&) = delete;
  EtcdCluster& operator=(const EtcdCluster&) = delete;

  // Starts `members` members. Errors: FailedPrecondition without
  // /usr/bin/etcd; Internal when a member exits or no port is free;
  // DeadlineExceeded when a member does not answer within 20 s.
  absl::Status Start(int members);

  // "127.0.0.1:port" of every member's client URL, in member order.
  std::vector<std::string> endpoints() const;
  // "etcd://a,b,c" + prefix: DEVMESH_STORE_ADDR's form.
  std::string Address(const std::string& prefix) const;

  // SIGKILLs member `i` (reaped); SIGSTOP / SIGCONT it.
  void Kill(int i);
  void Stop(int i);
  void Continue(int i);
  pid_t pid(int i) const { return members_[i].pid; }

 private:
  struct Member {
    pid_t pid = 0;
    int client_port = 0;
    int peer_port = 0;
  };
  std::string dir_;
  std::vector<Member> members_;
};

// A port nothing listens on right now, or 0.
int FreeLoopbackPort();

}  // namespace testing
}  // namespace devmesh

#endif  // DEVMESH_TESTS_STORE_ETCD_TESTING_H_
