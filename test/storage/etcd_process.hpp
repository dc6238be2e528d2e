// EtcdCluster: real etcd members on free loopback ports, for tests of the etcd backend.
//
// Each member runs the `etcd` binary from PATH with a temporary data directory and fast raft
// timing (--heartbeat-interval 10 --election-timeout 100); start() waits, with a deadline, until
// every member reports healthy (probed with `etcdctl endpoint health`). Members are stopped by
// PID: SIGTERM, then SIGKILL after a deadline; the destructor kills what is left and removes the
// data directory. Children get SIGKILL if the test process dies.
// Thread-safety: none; drive it from the test's main thread.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

namespace kwatch::storage::test {

struct EtcdTls {
  std::string ca_file;    // clients and members trust this CA
  std::string cert_file;  // the members' serving certificate (IP SAN 127.0.0.1)
  std::string key_file;
};

class EtcdCluster {
 public:
  // True if `etcd` and `etcdctl` are on PATH.
  static bool available();

  // Starts `members` members (TLS on the client port if `tls` is given). nullptr if they did
  // not all become healthy before `deadline` (the reason is printed to stderr).
  static std::unique_ptr<EtcdCluster> start(
      std::size_t members, const EtcdTls* tls = nullptr,
      std::chrono::milliseconds deadline = std::chrono::seconds(20));
  ~EtcdCluster();
  EtcdCluster(const EtcdCluster&) = delete;
  EtcdCluster& operator=(const EtcdCluster&) = delete;

  // "http://127.0.0.1:<port>" (or https) of each member, in member order.
  std::vector<std::string> endpoints() const;
  std::string endpoint(std::size_t member) const;
  std::size_t size() const { return members_.size(); }

  // SIGKILL: a crash. Returns once the process is reaped.
  void kill(std::size_t member);
  // SIGTERM, then SIGKILL if it has not exited within `grace`.
  void stop(std::size_t member, std::chrono::milliseconds grace = std::chrono::seconds(5));

  // SIGSTOP / SIGCONT: a member that keeps its connections open and never answers, as a machine
  // that hangs.
  void pause(std::size_t member);
  void resume(std::size_t member);

  // Runs `etcdctl <args>` against every member; returns its exit status.
  int etcdctl(const std::string& args) const;

  const std::string& dir() const { return dir_; }

 private:
  struct Member {
    std::string name;
    int client_port = 0;
    int peer_port = 0;
    pid_t pid = -1;
  };

  EtcdCluster() = default;
  bool healthy(std::size_t member) const;
  std::string etcdctl_flags(const std::string& endpoints) const;

  std::string dir_;
  std::vector<Member> members_;
  bool tls_ = false;
  EtcdTls tls_files_;
};

}  // namespace kwatch::storage::test
