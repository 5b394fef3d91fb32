// ParseStoreAddress, UseStoreAddress and StoreAddressText
// (bootstrap/rendezvous.h): the etcd:// form of DEVMESH_STORE_ADDR beside
// host:port, from the environment and from code.
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bootstrap/rendezvous.h"
#include "gtest/gtest.h"

namespace devmesh {
namespace {

EnvLookup Env(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](
             absl::string_view name) -> std::optional<std::string> {
    auto it = vars.find(std::string(name));
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

TEST(StoreAddressTest, EtcdEndpointsAndPrefix) {
  auto a = ParseStoreAddress(
      "V", "etcd://10.0.0.1:2379,[::1]:2380,etcd-3:2381/jobs/42");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->etcd_endpoints,
            (std::vector<std::string>{"10.0.0.1:2379", "[::1]:2380",
                                      "etcd-3:2381"}));
  EXPECT_EQ(a->etcd_prefix, "/jobs/42/");
  EXPECT_EQ(a->host, "10.0.0.1");
  EXPECT_EQ(a->port, 2379);
  auto bare = ParseStoreAddress("V", "etcd://h:1");
  ASSERT_TRUE(bare.ok()) << bare.status();
  EXPECT_EQ(bare->etcd_prefix, "/devmesh/");
  auto slash = ParseStoreAddress("V", "etcd://h:1/");
  ASSERT_TRUE(slash.ok()) << slash.status();
  EXPECT_EQ(slash->etcd_prefix, "/devmesh/");
  auto kept = ParseStoreAddress("V", "etcd://h:1/a/b/");
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_EQ(kept->etcd_prefix, "/a/b/");
  auto tcp = ParseStoreAddress("V", "[::1]:29500");
  ASSERT_TRUE(tcp.ok()) << tcp.status();
  EXPECT_TRUE(tcp->etcd_endpoints.empty());
  EXPECT_EQ(tcp->host, "::1");
  EXPECT_EQ(tcp->port, 29500);
}

TEST(StoreAddressTest, MalformedAddressesAreNamed) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"etcd://", "names no etcd endpoint (etcd://host:port[,host:port...])"},
      {"etcd:///p", "names no etcd endpoint (etcd://host:port[,host:port...])"},
      {"etcd://a:1,,b:2", "has an empty etcd endpoint (two commas?)"},
      {"etcd://a:1,", "has an empty etcd endpoint (two commas?)"},
      {"etcd://a", "is not host:port (an IPv6 host in brackets: [::1]:29500)"},
      {"etcd://a:0", "does not end with a port in 1..65535"},
      {"etcd://a:1,b:x", "does not end with a port in 1..65535"},
      {"etcd://::1:2379",
       "has an IPv6 host without brackets (write [::1]:29500)"},
      {"etcd://a:1/p q", "has a key prefix with whitespace or control "
                         "characters"},
      {"http://a:1",
       "names a scheme other than etcd:// (host:port is devmesh's store; "
       "etcd://host:port[,host:port...][/prefix] an etcd cluster, without "
       "TLS)"},
  };
  for (const auto& [value, why] : cases) {
    auto env = RendezvousInfoFromEnv(Env(
        {{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"DEVMESH_STORE_ADDR", value}}));
    EXPECT_EQ(env.status().code(), absl::StatusCode::kInvalidArgument) << value;
    EXPECT_EQ(env.status().message(),
              absl::StrCat("environment variable DEVMESH_STORE_ADDR='", value,
                           "' ", why))
        << value;
    RendezvousInfo info;
    info.store_host = "unchanged";
    const absl::Status code = UseStoreAddress(value, info);
    EXPECT_EQ(code.message(), absl::StrCat("store address '", value, "' ", why))
        << value;
    EXPECT_EQ(info.store_host, "unchanged");
    EXPECT_FALSE(info.external_store);
  }
}

TEST(StoreAddressTest, FromTheEnvironmentInEveryFamily) {
  const std::string etcd = "etcd://e1:2379,e2:2379/job-7";
  for (const auto& vars : std::vector<std::map<std::string, std::string>>{
           {{"RANK", "1"}, {"WORLD_SIZE", "2"}},
           {{"OMPI_COMM_WORLD_RANK", "1"},
            {"OMPI_COMM_WORLD_SIZE", "2"},
            {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
            {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}},
           {{"SLURM_PROCID", "1"},
            {"SLURM_NTASKS", "2"},
            {"SLURM_LOCALID", "1"},
            {"SLURM_NTASKS_PER_NODE", "2"}}}) {
    auto env = vars;
    env["DEVMESH_STORE_ADDR"] = etcd;
    env["TORCHELASTIC_USE_AGENT_STORE"] = "True";
    auto info = RendezvousInfoFromEnv(Env(env));
    ASSERT_TRUE(info.ok()) << info.status();
    EXPECT_TRUE(info->external_store);
    EXPECT_FALSE(info->use_agent_store);
    EXPECT_EQ(info->etcd_endpoints,
              (std::vector<std::string>{"e1:2379", "e2:2379"}));
    EXPECT_EQ(info->etcd_prefix, "/job-7/");
    EXPECT_EQ(info->store_host, "e1");
    EXPECT_EQ(info->store_port, 2379);
    EXPECT_EQ(StoreAddressText(*info), "etcd://e1:2379,e2:2379/job-7/");
  }
}

TEST(StoreAddressTest, FromCodeReplacesTheStore) {
  RendezvousInfo info;
  ASSERT_TRUE(UseStoreAddress("etcd://127.0.0.1:2379", info).ok());
  EXPECT_TRUE(info.external_store);
  EXPECT_EQ(StoreAddressText(info), "etcd://127.0.0.1:2379/devmesh/");
  ASSERT_TRUE(UseStoreAddress("s:81", info).ok());
  EXPECT_TRUE(info.etcd_endpoints.empty());
  EXPECT_EQ(info.etcd_prefix, "");
  EXPECT_EQ(StoreAddressText(info), "s:81");
}

}  // namespace
}  // namespace devmesh
