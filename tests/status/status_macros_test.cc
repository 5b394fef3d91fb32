// devmesh/tests/status/status_macros_test.cc
// DEVMESH_RETURN_IF_ERROR and DEVMESH_ASSIGN_OR_RETURN: what they return,
// what they assign, that they evaluate their expression once, and the forms
// of lhs the header promises.
#include "status/status_macros.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/cord.h"
#include "gtest/gtest.h"

namespace devmesh {
namespace {

// Counts its calls and returns `result`.
struct Source {
  int calls = 0;
  absl::Status Status(absl::Status result) {
    ++calls;
    return result;
  }
  absl::StatusOr<int> Int(absl::StatusOr<int> result) {
    ++calls;
    return result;
  }
};

// ---- DEVMESH_RETURN_IF_ERROR -----------------------------------------------

absl::Status TwoSteps(Source& src, absl::Status first, std::vector<int>& trace) {
  DEVMESH_RETURN_IF_ERROR(src.Status(first));
  trace.push_back(1);
  DEVMESH_RETURN_IF_ERROR(src.Status(absl::OkStatus()));
  trace.push_back(2);
  return absl::OkStatus();
}

TEST(ReturnIfErrorTest, OkGoesOnAndEvaluatesOnce) {
  Source src;
  std::vector<int> trace;
  EXPECT_EQ(TwoSteps(src, absl::OkStatus(), trace), absl::OkStatus());
  EXPECT_EQ(trace, (std::vector<int>{1, 2}));
  EXPECT_EQ(src.calls, 2);
}

TEST(ReturnIfErrorTest, ErrorIsReturnedUnchanged) {
  Source src;
  std::vector<int> trace;
  absl::Status error = absl::NotFoundError("no dim named \"pp\"");
  error.SetPayload("devmesh.test", absl::Cord("payload"));
  absl::Status got = TwoSteps(src, error, trace);
  EXPECT_EQ(got.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(got.message(), "no dim named \"pp\"");
  EXPECT_EQ(got.GetPayload("devmesh.test"), absl::Cord("payload"));
  EXPECT_EQ(got, error);
  EXPECT_TRUE(trace.empty());
  EXPECT_EQ(src.calls, 1);
}

absl::StatusOr<std::string> ReturnIfErrorInStatusOr(absl::Status s) {
  DEVMESH_RETURN_IF_ERROR(s);
  return std::string("reached");
}

TEST(ReturnIfErrorTest, WorksInAFunctionReturningStatusOr) {
  EXPECT_EQ(*ReturnIfErrorInStatusOr(absl::OkStatus()), "reached");
  absl::StatusOr<std::string> got =
      ReturnIfErrorInStatusOr(absl::DeadlineExceededError("late"));
  EXPECT_EQ(got.status(), absl::DeadlineExceededError("late"));
}

TEST(ReturnIfErrorTest, IsOneStatementUnderAnUnbracedIf) {
  auto f = [](bool check, absl::Status s) -> absl::Status {
    if (check)
      DEVMESH_RETURN_IF_ERROR(s);
    else
      return absl::CancelledError("else branch");
    return absl::OkStatus();
  };
  EXPECT_EQ(f(true, absl::OkStatus()), absl::OkStatus());
  EXPECT_EQ(f(true, absl::InternalError("x")), absl::InternalError("x"));
  EXPECT_EQ(f(false, absl::OkStatus()), absl::CancelledError("else branch"));
}

// ---- DEVMESH_ASSIGN_OR_RETURN ----------------------------------------------

absl::StatusOr<int> SumWithAuto(Source& src, absl::StatusOr<int> a,
                                absl::StatusOr<int> b) {
  DEVMESH_ASSIGN_OR_RETURN(auto x, src.Int(a));
  DEVMESH_ASSIGN_OR_RETURN(const int y, src.Int(b));
  return x + y;
}

TEST(AssignOrReturnTest, DeclaresWithAutoAndWithAType) {
  Source src;
  EXPECT_EQ(*SumWithAuto(src, 40, 2), 42);
  EXPECT_EQ(src.calls, 2);
}

TEST(AssignOrReturnTest, ErrorIsReturnedAndLaterLinesDoNotRun) {
  Source src;
  absl::StatusOr<int> got =
      SumWithAuto(src, absl::OutOfRangeError("dim 3 of a 2-d mesh"), 2);
  EXPECT_EQ(got.status(), absl::OutOfRangeError("dim 3 of a 2-d mesh"));
  EXPECT_EQ(src.calls, 1);
  src.calls = 0;
  got = SumWithAuto(src, 1, absl::InvalidArgumentError("second"));
  EXPECT_EQ(got.status(), absl::InvalidArgumentError("second"));
  EXPECT_EQ(src.calls, 2);
}

absl::Status AssignToDeclared(absl::StatusOr<std::string> in,
                              std::string& out, std::vector<int>& v) {
  std::string local = "before";
  DEVMESH_ASSIGN_OR_RETURN(local, std::move(in));
  DEVMESH_ASSIGN_OR_RETURN(v[1], absl::StatusOr<int>(7));
  out = local;
  return absl::OkStatus();
}

TEST(AssignOrReturnTest, AssignsToAnExistingVariableOrElement) {
  std::string out = "untouched";
  std::vector<int> v = {0, 0, 0};
  EXPECT_EQ(AssignToDeclared(std::string("value"), out, v), absl::OkStatus());
  EXPECT_EQ(out, "value");
  EXPECT_EQ(v, (std::vector<int>{0, 7, 0}));

  out = "untouched";
  v = {0, 0, 0};
  EXPECT_EQ(AssignToDeclared(absl::UnavailableError("retry"), out, v),
            absl::UnavailableError("retry"));
  EXPECT_EQ(out, "untouched");
  EXPECT_EQ(v, (std::vector<int>{0, 0, 0}));
}

absl::StatusOr<std::unique_ptr<int>> MakeBox(absl::Status s, int value) {
  if (!s.ok()) return s;
  return std::make_unique<int>(value);
}

absl::StatusOr<int> Unbox(absl::Status s) {
  DEVMESH_ASSIGN_OR_RETURN(std::unique_ptr<int> box, MakeBox(s, 5));
  std::unique_ptr<int> second;
  DEVMESH_ASSIGN_OR_RETURN(second, MakeBox(absl::OkStatus(), 6));
  return *box * 10 + *second;
}

TEST(AssignOrReturnTest, MovesAMoveOnlyValue) {
  EXPECT_EQ(*Unbox(absl::OkStatus()), 56);
  EXPECT_EQ(Unbox(absl::ResourceExhaustedError("no memory")).status(),
            absl::ResourceExhaustedError("no memory"));
}

// Two uses on one line (and so in one scope) need distinct hidden names.
absl::StatusOr<int> TwoOnOneLine(absl::StatusOr<int> a, absl::StatusOr<int> b) {
  // clang-format off
  DEVMESH_ASSIGN_OR_RETURN(int x, a); DEVMESH_ASSIGN_OR_RETURN(int y, b);
  // clang-format on
  return x * 100 + y;
}

TEST(AssignOrReturnTest, TwoUsesOnOneLine) {
  EXPECT_EQ(*TwoOnOneLine(3, 4), 304);
  EXPECT_EQ(TwoOnOneLine(3, absl::AbortedError("b")).status(),
            absl::AbortedError("b"));
}

// In a function returning absl::Status, and into a const reference (the
// hidden temporary lives to the end of the scope).
absl::Status LengthOf(absl::StatusOr<std::string> in, size_t& out) {
  DEVMESH_ASSIGN_OR_RETURN(const auto& s, std::move(in));
  out = s.size();
  return absl::OkStatus();
}

TEST(AssignOrReturnTest, ConstReferenceInAFunctionReturningStatus) {
  size_t n = 0;
  EXPECT_EQ(LengthOf(std::string("abcd"), n), absl::OkStatus());
  EXPECT_EQ(n, 4u);
  EXPECT_EQ(LengthOf(absl::NotFoundError("nope"), n),
            absl::NotFoundError("nope"));
  EXPECT_EQ(n, 4u);
}

}  // namespace
}  // namespace devmesh
