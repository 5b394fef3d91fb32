#include "bootstrap/rendezvous.h"

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

#include "gtest/gtest.h"

namespace devmesh {
namespace {

EnvLookup Env(std::map<std::string, std::string> vars) {
  return [vars](absl::string_view name) -> std::optional<std::string> {
    auto it = vars.find(std::string(name));
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

TEST(RendezvousTest, Torchrun) {
  auto info = RendezvousInfoFromEnv(Env({{"MASTER_ADDR", "10.0.0.1"},
                                         {"MASTER_PORT", "29400"},
                                         {"RANK", "5"},
                                         {"WORLD_SIZE", "8"},
                                         {"LOCAL_RANK", "1"},
                                         {"LOCAL_WORLD_SIZE", "4"}}));
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->rank, 5);
  EXPECT_EQ(info->world_size, 8);
  EXPECT_EQ(info->local_rank, 1);
  EXPECT_EQ(info->local_world_size, 4);
  EXPECT_EQ(info->store_host, "10.0.0.1");
  EXPECT_EQ(info->store_port, 29400);
  EXPECT_EQ(info->source, "torchrun");
}

TEST(RendezvousTest, TorchrunErrorsNameTheVariable) {
  std::map<std::string, std::string> good = {
      {"MASTER_ADDR", "h"}, {"MASTER_PORT", "1234"}, {"RANK", "0"},
      {"WORLD_SIZE", "2"}};
  auto without = [&](const std::string& var) {
    auto env = good;
    env.erase(var);
    return env;
  };
  for (const char* var : {"MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE"}) {
    auto info = RendezvousInfoFromEnv(Env(without(var)));
    EXPECT_EQ(info.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(info.status().message().find(var), std::string::npos)
        << info.status();
  }
  auto bad = good;
  bad["RANK"] = "2";
  auto info = RendezvousInfoFromEnv(Env(bad));
  EXPECT_EQ(info.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(info.status().message(), "RANK=2 is not below WORLD_SIZE=2");
  bad = good;
  bad["MASTER_PORT"] = "99999";
  EXPECT_EQ(RendezvousInfoFromEnv(Env(bad)).status().message(),
            "environment variable MASTER_PORT='99999' is outside [1, 65535]");
  bad = good;
  bad["WORLD_SIZE"] = "two";
  EXPECT_EQ(RendezvousInfoFromEnv(Env(bad)).status().message(),
            "environment variable WORLD_SIZE='two' is not an integer");
  bad = good;
  bad["LOCAL_WORLD_SIZE"] = "3";
  EXPECT_EQ(RendezvousInfoFromEnv(Env(bad)).status().message(),
            "LOCAL_WORLD_SIZE=3 is above WORLD_SIZE=2");
}

TEST(RendezvousTest, SlurmWithNodeListAndTasksPerNode) {
  auto info = RendezvousInfoFromEnv(Env({{"SLURM_PROCID", "6"},
                                         {"SLURM_NTASKS", "7"},
                                         {"SLURM_LOCALID", "0"},
                                         {"SLURM_NODEID", "2"},
                                         {"SLURM_TASKS_PER_NODE", "3(x2),1"},
                                         {"SLURM_JOB_NODELIST", "gpu[07-09],x"}}));
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->rank, 6);
  EXPECT_EQ(info->world_size, 7);
  EXPECT_EQ(info->local_rank, 0);
  EXPECT_EQ(info->local_world_size, 1);  // node 2 is the "1" entry
  EXPECT_EQ(info->store_host, "gpu07");
  EXPECT_EQ(info->store_port, kDefaultStorePort);
  EXPECT_EQ(info->source, "slurm");
}

TEST(RendezvousTest, SlurmMasterAddrWinsAndMissingVariablesAreNamed) {
  auto info = RendezvousInfoFromEnv(Env({{"SLURM_PROCID", "0"},
                                         {"SLURM_NTASKS", "4"},
                                         {"SLURM_LOCALID", "0"},
                                         {"SLURM_NTASKS_PER_NODE", "4"},
                                         {"MASTER_ADDR", "head"},
                                         {"MASTER_PORT", "5000"},
                                         {"SLURM_NODELIST", "n1"}}));
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->store_host, "head");
  EXPECT_EQ(info->store_port, 5000);
  EXPECT_EQ(info->local_world_size, 4);
  auto missing = RendezvousInfoFromEnv(
      Env({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "4"}}));
  EXPECT_EQ(missing.status().message(),
            "environment variable SLURM_LOCALID is not set");
  auto no_host = RendezvousInfoFromEnv(Env({{"SLURM_PROCID", "0"},
                                            {"SLURM_NTASKS", "4"},
                                            {"SLURM_LOCALID", "0"},
                                            {"SLURM_NTASKS_PER_NODE", "4"}}));
  EXPECT_EQ(no_host.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(RendezvousTest, SlurmTaskCountsMustAddUpToNtasks) {
  std::map<std::string, std::string> env = {
      {"SLURM_PROCID", "0"},          {"SLURM_NTASKS", "8"},
      {"SLURM_LOCALID", "0"},         {"SLURM_NODEID", "0"},
      {"SLURM_TASKS_PER_NODE", "3(x2),1"}, {"MASTER_ADDR", "h"}};
  auto info = RendezvousInfoFromEnv(Env(env));
  EXPECT_EQ(info.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(info.status().message(),
            "environment variable SLURM_TASKS_PER_NODE='3(x2),1' adds up to 7 "
            "tasks, but SLURM_NTASKS=8");
  env["SLURM_TASKS_PER_NODE"] = "4(x2)";
  info = RendezvousInfoFromEnv(Env(env));
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->local_world_size, 4);
  env.erase("SLURM_NTASKS");
  env["SLURM_NPROCS"] = "9";
  EXPECT_EQ(RendezvousInfoFromEnv(Env(env)).status().message(),
            "environment variable SLURM_TASKS_PER_NODE='4(x2)' adds up to 8 "
            "tasks, but SLURM_NPROCS=9");
}

TEST(RendezvousTest, Ipv6StoreHostsBareOrBracketed) {
  std::map<std::string, std::string> env = {
      {"MASTER_PORT", "1234"}, {"RANK", "0"}, {"WORLD_SIZE", "2"}};
  for (const auto& [given, parsed] :
       std::vector<std::pair<std::string, std::string>>{
           {"::1", "::1"},
           {"[::1]", "::1"},
           {"fe80::1%eth0", "fe80::1%eth0"},
           {"[2001:db8::7]", "2001:db8::7"},
           {"127.0.0.1", "127.0.0.1"},
           {"node-7.cluster", "node-7.cluster"}}) {
    env["MASTER_ADDR"] = given;
    auto info = RendezvousInfoFromEnv(Env(env));
    ASSERT_TRUE(info.ok()) << given << ": " << info.status();
    EXPECT_EQ(info->store_host, parsed);
  }
  for (const char* bad : {"[::1]:29500", "host:29500", "[::1", "[]",
                          "[node]", "a b", "::zz",
                          // An empty or misplaced zone, control characters.
                          "::1%", "[fe80::1%]", "%", "node%eth0", "node\n",
                          "no\x01" "de"}) {
    env["MASTER_ADDR"] = bad;
    auto info = RendezvousInfoFromEnv(Env(env));
    EXPECT_EQ(info.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_EQ(info.status().message().rfind(
                  absl::StrCat("environment variable MASTER_ADDR='", bad, "'"),
                  0),
              0u)
        << info.status();
  }
  // The same rules in the other families.
  auto ompi = RendezvousInfoFromEnv(Env({{"OMPI_COMM_WORLD_RANK", "0"},
                                         {"OMPI_COMM_WORLD_SIZE", "1"},
                                         {"OMPI_COMM_WORLD_LOCAL_RANK", "0"},
                                         {"OMPI_COMM_WORLD_LOCAL_SIZE", "1"},
                                         {"MASTER_ADDR", "[::1]"}}));
  ASSERT_TRUE(ompi.ok()) << ompi.status();
  EXPECT_EQ(ompi->store_host, "::1");
}

TEST(RendezvousTest, TorchrunAgentStoreOnlyForTheExactStringTrue) {
  std::map<std::string, std::string> env = {
      {"MASTER_ADDR", "h"}, {"MASTER_PORT", "1234"}, {"RANK", "1"},
      {"WORLD_SIZE", "2"}};
  auto info = RendezvousInfoFromEnv(Env(env));
  ASSERT_TRUE(info.ok());
  EXPECT_FALSE(info->use_agent_store);
  for (const char* not_true : {"False", "true", "1", ""}) {
    env["TORCHELASTIC_USE_AGENT_STORE"] = not_true;
    info = RendezvousInfoFromEnv(Env(env));
    ASSERT_TRUE(info.ok());
    EXPECT_FALSE(info->use_agent_store) << not_true;
    EXPECT_EQ(info->store_namespace, "");
  }
  env["TORCHELASTIC_USE_AGENT_STORE"] = "True";
  info = RendezvousInfoFromEnv(Env(env));
  ASSERT_TRUE(info.ok());
  EXPECT_TRUE(info->use_agent_store);
  EXPECT_EQ(info->store_namespace, "devmesh/none/attempt_0");
  env["TORCHELASTIC_RUN_ID"] = "job42";
  env["TORCHELASTIC_RESTART_COUNT"] = "3";
  info = RendezvousInfoFromEnv(Env(env));
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->store_namespace, "devmesh/job42/attempt_3");
  env["TORCHELASTIC_RESTART_COUNT"] = "-1";
  EXPECT_EQ(RendezvousInfoFromEnv(Env(env)).status().message(),
            "environment variable TORCHELASTIC_RESTART_COUNT='-1' is outside "
            "[0, 1073741824]");
}

TEST(RendezvousTest, ExternalStoreWinsOverMasterAddrAndTheAgentStore) {
  // torchrun's variables and the agent store flag: DEVMESH_STORE_ADDR wins.
  std::map<std::string, std::string> env = {
      {"MASTER_ADDR", "m"}, {"MASTER_PORT", "1234"}, {"RANK", "1"},
      {"WORLD_SIZE", "2"}, {"TORCHELASTIC_USE_AGENT_STORE", "True"},
      {"DEVMESH_STORE_ADDR", "store.example:29600"}};
  auto info = RendezvousInfoFromEnv(Env(env));
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_TRUE(info->external_store);
  EXPECT_FALSE(info->use_agent_store);
  EXPECT_EQ(info->store_namespace, "");
  EXPECT_EQ(info->store_host, "store.example");
  EXPECT_EQ(info->store_port, 29600);
  // MASTER_ADDR / MASTER_PORT are not needed then, in any family.
  env.erase("MASTER_ADDR");
  env.erase("MASTER_PORT");
  env["DEVMESH_STORE_ADDR"] = "[::1]:7";
  info = RendezvousInfoFromEnv(Env(env));
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->store_host, "::1");
  EXPECT_EQ(info->store_port, 7);
  auto mpi = RendezvousInfoFromEnv(Env({{"OMPI_COMM_WORLD_RANK", "0"},
                                        {"OMPI_COMM_WORLD_SIZE", "1"},
                                        {"OMPI_COMM_WORLD_LOCAL_RANK", "0"},
                                        {"OMPI_COMM_WORLD_LOCAL_SIZE", "1"},
                                        {"DEVMESH_STORE_ADDR", "10.0.0.9:80"}}));
  ASSERT_TRUE(mpi.ok()) << mpi.status();
  EXPECT_TRUE(mpi->external_store);
  EXPECT_EQ(mpi->store_host, "10.0.0.9");
  EXPECT_EQ(mpi->store_port, 80);
  auto slurm = RendezvousInfoFromEnv(
      Env({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "1"}, {"SLURM_LOCALID", "0"},
           {"SLURM_NTASKS_PER_NODE", "1"}, {"MASTER_PORT", "99999"},
           {"DEVMESH_STORE_ADDR", "s:81"}}));
  ASSERT_TRUE(slurm.ok()) << slurm.status();  // MASTER_PORT is not read
  EXPECT_EQ(slurm->store_host, "s");
  EXPECT_EQ(slurm->store_port, 81);
  // Unset: MASTER_ADDR, as before.
  env.erase("DEVMESH_STORE_ADDR");
  env["MASTER_ADDR"] = "m";
  env["MASTER_PORT"] = "1234";
  info = RendezvousInfoFromEnv(Env(env));
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_FALSE(info->external_store);
  EXPECT_TRUE(info->use_agent_store);
  EXPECT_EQ(info->store_host, "m");
}

TEST(RendezvousTest, BadExternalStoreAddressesAreNamed) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"host", "is not host:port (an IPv6 host in brackets: [::1]:29500)"},
      {"host:", "is not host:port (an IPv6 host in brackets: [::1]:29500)"},
      {"", "is not host:port (an IPv6 host in brackets: [::1]:29500)"},
      {":29500", "names no host"},
      {"::1:29500", "has an IPv6 host without brackets (write [::1]:29500)"},
      {"host:0", "does not end with a port in 1..65535"},
      {"host:65536", "does not end with a port in 1..65535"},
      {"host:http", "does not end with a port in 1..65535"},
  };
  for (const auto& [value, why] : cases) {
    auto info = RendezvousInfoFromEnv(Env({{"RANK", "0"},
                                           {"WORLD_SIZE", "1"},
                                           {"DEVMESH_STORE_ADDR", value}}));
    EXPECT_EQ(info.status().message(),
              absl::StrCat("environment variable DEVMESH_STORE_ADDR='", value,
                           "' ", why))
        << value;
  }
  auto spaces = RendezvousInfoFromEnv(Env({{"RANK", "0"},
                                           {"WORLD_SIZE", "1"},
                                           {"DEVMESH_STORE_ADDR", "a b:1"}}));
  EXPECT_EQ(spaces.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(RendezvousTest, OpenMpi) {
  auto info = RendezvousInfoFromEnv(Env({{"OMPI_COMM_WORLD_RANK", "3"},
                                         {"OMPI_COMM_WORLD_SIZE", "4"},
                                         {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                                         {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
                                         {"MASTER_ADDR", "m"},
                                         {"SLURM_PROCID", "9"}}));
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->source, "openmpi");
  EXPECT_EQ(info->rank, 3);
  EXPECT_EQ(info->local_world_size, 2);
  EXPECT_EQ(info->store_port, kDefaultStorePort);
  auto bad = RendezvousInfoFromEnv(Env({{"OMPI_COMM_WORLD_RANK", "3"},
                                        {"OMPI_COMM_WORLD_SIZE", "4"},
                                        {"OMPI_COMM_WORLD_LOCAL_RANK", "2"},
                                        {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
                                        {"MASTER_ADDR", "m"}}));
  EXPECT_EQ(bad.status().message(),
            "OMPI_COMM_WORLD_LOCAL_RANK=2 is not below "
            "OMPI_COMM_WORLD_LOCAL_SIZE=2");
}

TEST(RendezvousTest, NoEnvironmentIsNotFound) {
  EXPECT_EQ(RendezvousInfoFromEnv(Env({})).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_FALSE(HasRendezvousEnv(Env({})));
  EXPECT_TRUE(HasRendezvousEnv(Env({{"SLURM_PROCID", "0"}})));
}

TEST(RendezvousTest, FirstHostOfNodeList) {
  EXPECT_EQ(*FirstHostOfNodeList("node[01-04],x"), "node01");
  EXPECT_EQ(*FirstHostOfNodeList("node[3,5-7]"), "node3");
  EXPECT_EQ(*FirstHostOfNodeList("a[1-2]b[3-4]"), "a1b3");
  EXPECT_EQ(*FirstHostOfNodeList("solo"), "solo");
  EXPECT_EQ(*FirstHostOfNodeList("h1,h2"), "h1");
  EXPECT_EQ(FirstHostOfNodeList("node[01-04").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(FirstHostOfNodeList("").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(FirstHostOfNodeList("a]b").status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace devmesh
