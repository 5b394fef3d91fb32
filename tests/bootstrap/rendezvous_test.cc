#include "bootstrap/rendezvous.h"

#include <map>
#include <string>

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
