// devmesh/tests/comm/shm_names_test.cc
// The segment names (who made a segment) and the removal of segments whose
// maker is gone, in a directory of the test's own.
#include "comm/shm/shm_names.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace devmesh {
namespace shm_internal {
namespace {

TEST(ShmNamesTest, NameSaysWhoMadeItAndParsesBack) {
  const SegmentMaker maker{4026531836u, ProcessIdentity{4194303, 123456789}};
  const std::string name = SegmentName(maker, 0xabcdefu);
  EXPECT_EQ(name, "/devmesh-4026531836-4194303-123456789-0000000000abcdef");
  EXPECT_LE(name.size(), kMaxSegmentNameLength);
  for (const std::string& text : {name, name.substr(1)}) {
    auto parsed = ParseSegmentName(text);
    ASSERT_TRUE(parsed.has_value()) << text;
    EXPECT_EQ(parsed->pid_namespace, 4026531836u);
    EXPECT_EQ(parsed->process.pid, 4194303);
    EXPECT_EQ(parsed->process.start_time, 123456789u);
  }
}

TEST(ShmNamesTest, OtherNamesDoNotParse) {
  for (const char* text : {
           "", "devmesh-",
           "/devmesh-123-0123456789abcdef",            // older devmesh
           "devmesh-1-2-3-0123456789abcde",            // 15 hex digits
           "devmesh-1-2-3-0123456789ABCDEF",           // upper case
           "devmesh-1-2-3-0123456789abcdef-4",         // a fifth part
           "devmesh-+1-2-3-0123456789abcdef",          // a sign
           "devmesh-1-0-3-0123456789abcdef",           // pid 0
           "devmesh-1-4294967296-3-0123456789abcdef",  // pid > INT32_MAX
           "devmesh-99999999999999999999-2-3-0123456789abcdef",  // overflow
           "other-1-2-3-0123456789abcdef",
           "/devmesh-x-0123456789abcdef",  // UnsweptSegmentName's form
       }) {
    EXPECT_FALSE(ParseSegmentName(text).has_value()) << text;
  }
}

TEST(ShmNamesTest, OwnPidNamespaceIsTheNsLinksInode) {
  auto ns = OwnPidNamespace();
  ASSERT_TRUE(ns.ok()) << ns.status();
  struct stat st;
  ASSERT_EQ(stat("/proc/self/ns/pid", &st), 0);
  EXPECT_EQ(*ns, static_cast<uint64_t>(st.st_ino));
}

class RemoveStaleSegmentsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/shm_names_test.XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
    auto ns = OwnPidNamespace();
    ASSERT_TRUE(ns.ok()) << ns.status();
    ns_ = *ns;
    auto self = SelfIdentity();
    ASSERT_TRUE(self.ok()) << self.status();
    self_ = *self;
    // A process that has exited and been reaped: its identity is dead.
    int fds[2];
    ASSERT_EQ(pipe(fds), 0);
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      auto id = SelfIdentity();
      const uint64_t start = id.ok() ? id->start_time : 0;
      (void)!write(fds[1], &start, sizeof(start));
      _exit(0);
    }
    close(fds[1]);
    uint64_t start = 0;
    ASSERT_EQ(read(fds[0], &start, sizeof(start)),
              static_cast<ssize_t>(sizeof(start)));
    close(fds[0]);
    int status = 0;
    ASSERT_EQ(waitpid(child, &status, 0), child);
    dead_ = ProcessIdentity{child, start};
  }
  void TearDown() override {
    for (const std::string& name : Listing()) {
      unlink(absl::StrCat(dir_, "/", name).c_str());
    }
    rmdir(dir_.c_str());
  }
  std::string Make(const SegmentMaker& maker, uint64_t random) {
    const std::string name = SegmentName(maker, random).substr(1);
    Touch(name);
    return name;
  }
  void Touch(const std::string& name) {
    const int fd =
        open(absl::StrCat(dir_, "/", name).c_str(), O_CREAT | O_WRONLY, 0600);
    ASSERT_GE(fd, 0) << name;
    close(fd);
  }
  std::set<std::string> Listing() {
    std::set<std::string> out;
    if (DIR* d = opendir(dir_.c_str())) {
      while (dirent* e = readdir(d)) {
        const std::string name = e->d_name;
        if (name != "." && name != "..") out.insert(name);
      }
      closedir(d);
    }
    return out;
  }

  std::string dir_;
  uint64_t ns_ = 0;
  ProcessIdentity self_, dead_;
};

TEST_F(RemoveStaleSegmentsTest, RemovesOnlyTheDeadMakersOfThisNamespace) {
  const std::string dead1 = Make({ns_, dead_}, 1);
  const std::string dead2 = Make({ns_, dead_}, 2);
  // This process's pid with another start time: a maker whose pid was
  // reused since, so it is gone.
  const std::string reused =
      Make({ns_, ProcessIdentity{self_.pid, self_.start_time + 1}}, 3);
  const std::string live = Make({ns_, self_}, 4);
  const std::string other_namespace = Make({ns_ + 1, dead_}, 5);
  const std::string older =
      absl::StrCat("devmesh-", dead_.pid, "-0123456789abcdef");
  Touch(older);
  Touch("unrelated");

  auto removed = RemoveStaleSegments(0, dir_);
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_EQ(*removed, 3);
  EXPECT_EQ(Listing(),
            (std::set<std::string>{live, other_namespace, older, "unrelated"}));
  // Nothing more to remove.
  removed = RemoveStaleSegments(0, dir_);
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_EQ(*removed, 0);
}

TEST_F(RemoveStaleSegmentsTest, OnlyPidLimitsTheRemovalToThatMaker) {
  const std::string dead = Make({ns_, dead_}, 1);
  const std::string reused =
      Make({ns_, ProcessIdentity{self_.pid, self_.start_time + 1}}, 2);
  auto removed = RemoveStaleSegments(dead_.pid, dir_);
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_EQ(*removed, 1);
  EXPECT_EQ(Listing(), std::set<std::string>{reused});
  // The live pid's own entries are judged by start time, not by the pid.
  removed = RemoveStaleSegments(self_.pid, dir_);
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_EQ(*removed, 1);
  EXPECT_TRUE(Listing().empty());
}

TEST_F(RemoveStaleSegmentsTest, MissingDirectoryIsInternalNamingIt) {
  auto removed = RemoveStaleSegments(0, dir_ + "/absent");
  EXPECT_EQ(removed.status().code(), absl::StatusCode::kInternal);
  EXPECT_NE(removed.status().message().find(dir_ + "/absent"),
            std::string::npos)
      << removed.status();
}

}  // namespace
}  // namespace shm_internal
}  // namespace devmesh
