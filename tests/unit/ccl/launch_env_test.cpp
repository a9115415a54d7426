// What reccl reads from launchers (core/launch_env.h): Slurm's node lists and tasks-per-node
// lists, the rendezvous address each launcher yields with nothing set by hand, and the message
// that names what to set when nothing yields one.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "core/launch_env.h"

namespace reccl {
namespace {

using Env = std::map<std::string, std::string>;

Result<core::LaunchEnv> parse(const Env& m) {
  return core::parseLaunchEnv([&m](const char* n) -> const char* {
    auto it = m.find(n);
    return it == m.end() ? nullptr : it->second.c_str();
  });
}

struct NodeListCase {
  const char* list;
  const char* first;  // nullptr: malformed
};

class SlurmNodeList : public ::testing::TestWithParam<NodeListCase> {};

TEST_P(SlurmNodeList, FirstHost) {
  auto r = core::firstHostOfNodeList(GetParam().list);
  if (!GetParam().first) {
    EXPECT_FALSE(r.ok()) << GetParam().list << " -> " << (r.ok() ? *r : "");
    return;
  }
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(*r, GetParam().first);
}

INSTANTIATE_TEST_SUITE_P(Table, SlurmNodeList,
                         ::testing::Values(NodeListCase{"node1", "node1"}, NodeListCase{"node1,node2", "node1"},
                                           NodeListCase{"gpu[07-09,11]", "gpu07"},
                                           NodeListCase{"gpu[007-009],login1", "gpu007"},
                                           NodeListCase{"gpu[3,1-2]", "gpu3"}, NodeListCase{"r[1-2]-n[3-4]", "r1-n3"},
                                           NodeListCase{"a-b.c[10-11].d", "a-b.c10.d"},
                                           NodeListCase{"localhost", "localhost"}, NodeListCase{"", nullptr},
                                           NodeListCase{"gpu[1-2", nullptr}, NodeListCase{"gpu]1", nullptr},
                                           NodeListCase{"gpu[x-y]", nullptr}, NodeListCase{",node2", nullptr}));

struct TasksCase {
  const char* list;
  int node;
  int tasks;  // -1: an error
};

class SlurmTasksPerNode : public ::testing::TestWithParam<TasksCase> {};

TEST_P(SlurmTasksPerNode, TasksOnNode) {
  auto r = core::tasksOnNode(GetParam().list, GetParam().node);
  if (GetParam().tasks < 0) {
    EXPECT_FALSE(r.ok()) << GetParam().list << " node " << GetParam().node;
    return;
  }
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(*r, GetParam().tasks);
}

INSTANTIATE_TEST_SUITE_P(Table, SlurmTasksPerNode,
                         ::testing::Values(TasksCase{"4", 0, 4}, TasksCase{"2(x3),1", 0, 2}, TasksCase{"2(x3),1", 2, 2},
                                           TasksCase{"2(x3),1", 3, 1}, TasksCase{"2(x3),1", 4, -1},
                                           TasksCase{"1,3(x2)", 2, 3}, TasksCase{"8(x128)", 127, 8},
                                           TasksCase{"2(3)", 0, -1}, TasksCase{"2(x0)", 0, -1},
                                           TasksCase{"x", 0, -1}, TasksCase{"2(x3", 0, -1}, TasksCase{"", 0, -1}));

// srun's variables for task `rank` of `ntasks` on node `node`.
Env srun(int rank, int ntasks, int node, const std::string& stepNodes = "gpu[07-08]", const std::string& me = "gpu07") {
  return {{"SLURM_PROCID", std::to_string(rank)},
          {"SLURM_NTASKS", std::to_string(ntasks)},
          {"SLURM_LOCALID", "0"},
          {"SLURM_NODEID", std::to_string(node)},
          {"SLURM_STEP_NODELIST", stepNodes},
          {"SLURM_JOB_NODELIST", "gpu[01-08]"},
          {"SLURM_STEP_TASKS_PER_NODE", "2(x2)"},
          {"SLURM_TASKS_PER_NODE", "1(x8)"},
          {"SLURM_JOB_ID", "4711"},
          {"SLURM_STEP_ID", "3"},
          {"SLURMD_NODENAME", me}};
}

TEST(LaunchEnvSlurm, SrunNeedsNoAddress) {
  auto e0 = parse(srun(0, 4, 0));
  ASSERT_TRUE(e0.ok()) << e0.status().message();
  EXPECT_EQ(e0->source, "slurm");
  EXPECT_EQ(e0->rendezvous, core::Rendezvous::kAddress);
  EXPECT_EQ(e0->rootHost, "gpu07");  // the step's first node, not the job's
  EXPECT_EQ(e0->rootPort, core::slurmStepPort("4711", "3"));
  EXPECT_GE(e0->rootPort, 20000);
  EXPECT_LT(e0->rootPort, 30000);
  EXPECT_EQ(e0->localNranks, 2);  // from the step's tasks per node, not the job's
  EXPECT_EQ(e0->addressFrom, "SLURM_STEP_NODELIST and SLURM_JOB_ID/SLURM_STEP_ID");
  auto e3 = parse(srun(3, 4, 1, "gpu[07-08]", "gpu08"));
  ASSERT_TRUE(e3.ok()) << e3.status().message();
  EXPECT_EQ(e3->rootHost, e0->rootHost);
  EXPECT_EQ(e3->rootPort, e0->rootPort);
  EXPECT_EQ(e3->jobId, e0->jobId);  // every task derives the same job id
}

TEST(LaunchEnvSlurm, AnotherStepOfTheJobGetsAnotherPortAndJobId) {
  Env a = srun(0, 4, 0), b = srun(0, 4, 0);
  b["SLURM_STEP_ID"] = "4";
  auto ea = parse(a), eb = parse(b);
  ASSERT_TRUE(ea.ok() && eb.ok());
  EXPECT_NE(ea->rootPort, eb->rootPort);
  EXPECT_NE(ea->jobId, eb->jobId);
}

TEST(LaunchEnvSlurm, MasterAddrOrPortAloneOverridesItsHalf) {
  Env e = srun(0, 4, 0);
  e["MASTER_ADDR"] = "10.1.2.3";
  auto a = parse(e);
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_EQ(a->rootHost, "10.1.2.3");
  EXPECT_EQ(a->rootPort, core::slurmStepPort("4711", "3"));
  e.erase("MASTER_ADDR");
  e["MASTER_PORT"] = "29500";
  auto p = parse(e);
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->rootHost, "gpu07");
  EXPECT_EQ(p->rootPort, 29500);
  e["RECCL_COMM_ID"] = "h:1234";  // wins over everything
  auto c = parse(e);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->rootHost, "h");
  EXPECT_EQ(c->rootPort, 1234);
  EXPECT_EQ(c->addressFrom, "RECCL_COMM_ID");
}

TEST(LaunchEnvSlurm, TaskZeroOffTheFirstNodeIsToldToSetMasterAddr) {
  auto r = parse(srun(0, 4, 1, "gpu[07-08]", "gpu08"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Errc::kInvalidUsage);
  EXPECT_NE(r.status().message().find("set MASTER_ADDR"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("gpu08"), std::string::npos) << r.status().message();
}

TEST(LaunchEnvSlurm, LocalSizeFallsBackToTheJobListThenNtasksPerNode) {
  Env e = srun(0, 4, 0);
  e.erase("SLURM_STEP_TASKS_PER_NODE");
  auto job = parse(e);
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->localNranks, 1);
  e.erase("SLURM_TASKS_PER_NODE");
  e["SLURM_NTASKS_PER_NODE"] = "2";
  auto n = parse(e);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(n->localNranks, 2);
  e.erase("SLURM_NTASKS_PER_NODE");
  auto none = parse(e);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->localNranks, -1);
  e["SLURM_STEP_TASKS_PER_NODE"] = "2(y2)";
  auto bad = parse(e);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("SLURM_STEP_TASKS_PER_NODE=2(y2)"), std::string::npos) << bad.status().message();
}

TEST(LaunchEnvPmix, MpirunWithoutAddressRendezvousesThroughPmix) {
  Env e{{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "2"},   {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
        {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}, {"PMIX_NAMESPACE", "520159233"}, {"PMIX_RANK", "1"},
        {"OMPI_MCA_ess_base_jobid", "520159233"}};
  auto r = parse(e);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->source, "ompi");
  EXPECT_EQ(r->rendezvous, core::Rendezvous::kPmix);
  EXPECT_EQ(r->localNranks, 2);
  Env other = e;
  other["PMIX_NAMESPACE"] = "520159234";
  auto r2 = parse(other);
  ASSERT_TRUE(r2.ok());
  EXPECT_NE(r->jobId, r2->jobId);  // two mpirun jobs never share a job id
  e["MASTER_ADDR"] = "10.0.0.1";
  e["MASTER_PORT"] = "29500";
  auto m = parse(e);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->rendezvous, core::Rendezvous::kAddress);  // an explicit address wins
  EXPECT_EQ(m->rootHost, "10.0.0.1");
}

TEST(LaunchEnvTorchrun, AnAgentHeldMasterPortIsLeftToTheAgent) {
  Env e{{"RANK", "0"},          {"WORLD_SIZE", "2"},        {"MASTER_ADDR", "node1"},
        {"MASTER_PORT", "29500"}, {"TORCHELASTIC_RUN_ID", "r1"}, {"TORCHELASTIC_RESTART_COUNT", "0"}};
  auto plain = parse(e);
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->rootPort, 29500);  // the c10d rendezvous leaves MASTER_PORT free
  e["TORCHELASTIC_USE_AGENT_STORE"] = "True";
  auto r0 = parse(e);
  ASSERT_TRUE(r0.ok()) << r0.status().message();
  EXPECT_NE(r0->rootPort, 29500);
  EXPECT_EQ(r0->rootPort, core::torchrunAgentStorePort("node1", "29500", "r1", "0"));
  EXPECT_GE(r0->rootPort, 20000);
  EXPECT_LT(r0->rootPort, 30000);
  EXPECT_EQ(r0->rootHost, "node1");
  e["RANK"] = "1";
  auto r1 = parse(e);
  ASSERT_TRUE(r1.ok());
  EXPECT_EQ(r1->rootPort, r0->rootPort);  // every worker alike
  EXPECT_EQ(r1->jobId, r0->jobId);
  e["TORCHELASTIC_RESTART_COUNT"] = "1";
  auto restarted = parse(e);
  ASSERT_TRUE(restarted.ok());
  EXPECT_NE(restarted->rootPort, r0->rootPort);  // a restarted run does not meet the old one
  e["RECCL_COMM_ID"] = "node1:29600";
  auto c = parse(e);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->rootPort, 29600);
}

struct MissingCase {
  Env env;
  const char* mentions;  // what the message must name
};

class LaunchEnvMissing : public ::testing::TestWithParam<MissingCase> {};

TEST_P(LaunchEnvMissing, IsInvalidUsageNamingWhatToSet) {
  auto r = parse(GetParam().env);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Errc::kInvalidUsage);
  EXPECT_NE(r.status().message().find(GetParam().mentions), std::string::npos) << r.status().message();
}

INSTANTIATE_TEST_SUITE_P(
    Table, LaunchEnvMissing,
    ::testing::Values(
        MissingCase{{}, "RANK/WORLD_SIZE"},
        MissingCase{{{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "2"}}, "set MASTER_ADDR and MASTER_PORT"},
        MissingCase{{{"PMI_RANK", "0"}, {"PMI_SIZE", "2"}}, "RECCL_COMM_ID=host:port"},
        MissingCase{{{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "a"}}, "MASTER_ADDR is set but no port is"},
        MissingCase{{{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "1"}}, "MASTER_PORT is set but no host is"},
        MissingCase{{{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}}, "set MASTER_ADDR and MASTER_PORT"},
        MissingCase{{{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"RECCL_COMM_ID", "nocolon"}}, "RECCL_COMM_ID=nocolon"},
        MissingCase{{{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "a"}, {"MASTER_PORT", "0"}}, "MASTER_PORT"}));

}  // namespace
}  // namespace reccl
