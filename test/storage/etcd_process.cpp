#include "test/storage/etcd_process.hpp"

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <thread>

namespace kwatch::storage::test {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

namespace {

bool on_path(const char* name) {
  const char* path = std::getenv("PATH");
  if (!path) return false;
  std::string p(path);
  std::size_t start = 0;
  while (start <= p.size()) {
    auto end = p.find(':', start);
    if (end == std::string::npos) end = p.size();
    fs::path candidate = fs::path(p.substr(start, end - start)) / name;
    if (::access(candidate.c_str(), X_OK) == 0) return true;
    start = end + 1;
  }
  return false;
}

// Free loopback ports: every socket stays bound until all are picked, so they differ.
std::vector<int> free_ports(std::size_t n) {
  std::vector<int> fds;
  std::vector<int> ports;
  for (std::size_t i = 0; i < n; ++i) {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    socklen_t len = sizeof addr;
    if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      if (fd >= 0) ::close(fd);
      break;
    }
    fds.push_back(fd);
    ports.push_back(ntohs(addr.sin_port));
  }
  for (int fd : fds) ::close(fd);
  return ports;
}

// Waits for `pid` to exit, up to `timeout`. True if it was reaped.
bool reap(pid_t pid, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    int status = 0;
    pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid || (r < 0 && errno == ECHILD)) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(5ms);  // polling a child's exit, bounded by the deadline
  }
}

}  // namespace

bool EtcdCluster::available() { return on_path("etcd") && on_path("etcdctl"); }

std::unique_ptr<EtcdCluster> EtcdCluster::start(std::size_t members, const EtcdTls* tls,
                                                std::chrono::milliseconds deadline) {
  std::unique_ptr<EtcdCluster> cluster(new EtcdCluster());
  std::string templ = (fs::temp_directory_path() / "kwatch-etcd-XXXXXX").string();
  if (!::mkdtemp(templ.data())) {
    std::cerr << "mkdtemp failed\n";
    return nullptr;
  }
  cluster->dir_ = templ;
  if (tls) {
    cluster->tls_ = true;
    cluster->tls_files_ = *tls;
  }
  auto ports = free_ports(2 * members);
  if (ports.size() != 2 * members) {
    std::cerr << "no free ports\n";
    return nullptr;
  }
  std::string initial_cluster;
  for (std::size_t i = 0; i < members; ++i) {
    Member m;
    m.name = "m" + std::to_string(i);
    m.client_port = ports[2 * i];
    m.peer_port = ports[2 * i + 1];
    if (!initial_cluster.empty()) initial_cluster += ",";
    initial_cluster += m.name + "=http://127.0.0.1:" + std::to_string(m.peer_port);
    cluster->members_.push_back(m);
  }
  for (auto& m : cluster->members_) {
    const std::string client_url =
        (tls ? "https://127.0.0.1:" : "http://127.0.0.1:") + std::to_string(m.client_port);
    const std::string peer_url = "http://127.0.0.1:" + std::to_string(m.peer_port);
    std::vector<std::string> args = {"etcd",
                                     "--name",
                                     m.name,
                                     "--data-dir",
                                     cluster->dir_ + "/" + m.name,
                                     "--listen-client-urls",
                                     client_url,
                                     "--advertise-client-urls",
                                     client_url,
                                     "--listen-peer-urls",
                                     peer_url,
                                     "--initial-advertise-peer-urls",
                                     peer_url,
                                     "--initial-cluster",
                                     initial_cluster,
                                     "--initial-cluster-state",
                                     "new",
                                     "--initial-cluster-token",
                                     "kwatch-test",
                                     "--heartbeat-interval",
                                     "10",
                                     "--election-timeout",
                                     "100",
                                     "--logger",
                                     "zap",
                                     "--log-level",
                                     "warn"};
    if (tls) {
      args.insert(args.end(), {"--cert-file", tls->cert_file, "--key-file", tls->key_file,
                               "--trusted-ca-file", tls->ca_file, "--client-cert-auth"});
    }
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    const std::string log = cluster->dir_ + "/" + m.name + ".log";
    const pid_t parent = ::getpid();
    pid_t pid = ::fork();
    if (pid < 0) {
      std::cerr << "fork failed\n";
      return nullptr;
    }
    if (pid == 0) {
      // Only async-signal-safe calls between fork and exec.
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(126);
      int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (fd >= 0) {
        ::dup2(fd, 1);
        ::dup2(fd, 2);
        ::close(fd);
      }
      ::execvp("etcd", argv.data());
      ::_exit(127);
    }
    m.pid = pid;
  }
  const auto until = std::chrono::steady_clock::now() + deadline;
  for (std::size_t i = 0; i < members; ++i) {
    while (!cluster->healthy(i)) {
      int status = 0;
      if (::waitpid(cluster->members_[i].pid, &status, WNOHANG) == cluster->members_[i].pid) {
        cluster->members_[i].pid = -1;
        std::cerr << "etcd member " << i << " exited; see " << cluster->dir_ << "\n";
        return nullptr;
      }
      if (std::chrono::steady_clock::now() >= until) {
        std::cerr << "etcd member " << i << " not healthy before the deadline\n";
        return nullptr;
      }
      std::this_thread::sleep_for(20ms);  // probe interval, bounded by the deadline
    }
  }
  return cluster;
}

EtcdCluster::~EtcdCluster() {
  for (std::size_t i = 0; i < members_.size(); ++i) kill(i);
  if (!dir_.empty()) {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
}

std::vector<std::string> EtcdCluster::endpoints() const {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < members_.size(); ++i) out.push_back(endpoint(i));
  return out;
}

std::string EtcdCluster::endpoint(std::size_t member) const {
  return (tls_ ? "https://127.0.0.1:" : "http://127.0.0.1:") +
         std::to_string(members_.at(member).client_port);
}

void EtcdCluster::kill(std::size_t member) {
  auto& m = members_.at(member);
  if (m.pid <= 0) return;
  ::kill(m.pid, SIGKILL);
  reap(m.pid, 10s);
  m.pid = -1;
}

void EtcdCluster::pause(std::size_t member) {
  const auto& m = members_.at(member);
  if (m.pid > 0) ::kill(m.pid, SIGSTOP);
}

void EtcdCluster::resume(std::size_t member) {
  const auto& m = members_.at(member);
  if (m.pid > 0) ::kill(m.pid, SIGCONT);
}

void EtcdCluster::stop(std::size_t member, std::chrono::milliseconds grace) {
  auto& m = members_.at(member);
  if (m.pid <= 0) return;
  ::kill(m.pid, SIGTERM);
  if (!reap(m.pid, grace)) kill(member);
  m.pid = -1;
}

std::string EtcdCluster::etcdctl_flags(const std::string& endpoints) const {
  std::string flags = "--endpoints=" + endpoints + " --dial-timeout=300ms --command-timeout=2s";
  if (tls_) {
    flags += " --cacert=" + tls_files_.ca_file + " --cert=" + tls_files_.cert_file +
             " --key=" + tls_files_.key_file;
  }
  return flags;
}

bool EtcdCluster::healthy(std::size_t member) const {
  const std::string cmd = "ETCDCTL_API=3 etcdctl " + etcdctl_flags(endpoint(member)) +
                          " endpoint health >/dev/null 2>&1";
  return std::system(cmd.c_str()) == 0;
}

int EtcdCluster::etcdctl(const std::string& args) const {
  std::string all;
  for (const auto& e : endpoints()) all += (all.empty() ? "" : ",") + e;
  const std::string cmd = "ETCDCTL_API=3 etcdctl " + etcdctl_flags(all) + " " + args;
  return std::system(cmd.c_str());
}

}  // namespace kwatch::storage::test
