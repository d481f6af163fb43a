// Tests of the device/host placement plan (runner/placement.h): which
// steps run where and which values cross, with no device involved.
#include "runner/placement.h"

#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "lib/ir/ir.h"
#include "lib/ir/topo.h"
#include "tests/util/model_builder.h"

namespace onnxkit::runner {
namespace {

using testing::GraphBuilder;
using testing::ModelFromGraph;

struct Planned {
  std::unique_ptr<ir::Model> model;
  std::vector<ir::Node*> order;
  PlacementPlan plan;
};

// Plans `graph` with Relu, Add and MatMul on the device.
Planned Plan(pb::GraphProto graph) {
  Planned p;
  auto model = ir::FromProto(ModelFromGraph(std::move(graph), 17));
  EXPECT_TRUE(model.ok()) << model.status();
  p.model = std::move(*model);
  auto order = ir::TopologicalOrder(p.model->graph());
  EXPECT_TRUE(order.ok());
  p.order = *order;
  p.plan = PlanPlacement(p.model->graph(), p.order, [](const ir::Node& n) {
    return n.op_type() == "Relu" || n.op_type() == "Add" || n.op_type() == "MatMul";
  });
  return p;
}

// "name->device" / "name->host" for the copies before step `step`.
std::vector<std::string> Copies(const std::vector<Transfer>& transfers) {
  std::vector<std::string> out;
  for (const Transfer& t : transfers) {
    out.push_back(t.value->name() + (t.to == Place::kDevice ? "->device" : "->host"));
  }
  return out;
}

TEST(PlacementTest, CopiesOnlyAtBoundaries) {
  // x -> Relu -> a -> Sin (host) -> b -> Relu -> c -> Add(c, a) -> y
  Planned p = Plan(GraphBuilder("g")
                       .Input("x", pb::kFloat, {{4}})
                       .Node("Relu", {"x"}, {"a"})
                       .Node("Sin", {"a"}, {"b"})
                       .Node("Relu", {"b"}, {"c"})
                       .Node("Add", {"c", "a"}, {"y"})
                       .Output("y", pb::kFloat)
                       .Build());
  ASSERT_EQ(p.plan.place.size(), 4u);
  EXPECT_EQ(p.plan.place[0], Place::kDevice);
  EXPECT_EQ(p.plan.place[1], Place::kHost);
  EXPECT_EQ(p.plan.place[2], Place::kDevice);
  EXPECT_EQ(p.plan.place[3], Place::kDevice);
  EXPECT_EQ(Copies(p.plan.before[0]), std::vector<std::string>{"x->device"});
  EXPECT_EQ(Copies(p.plan.before[1]), std::vector<std::string>{"a->host"});
  EXPECT_EQ(Copies(p.plan.before[2]), std::vector<std::string>{"b->device"});
  // a is still on the device: no copy for the Add.
  EXPECT_TRUE(p.plan.before[3].empty());
  EXPECT_EQ(Copies(p.plan.at_end), std::vector<std::string>{"y->host"});
  EXPECT_EQ(p.plan.num_transfers, 4);
  EXPECT_EQ(p.plan.device_steps, 3);
}

TEST(PlacementTest, ValueReadByManyDeviceNodesCrossesOnce) {
  Planned p = Plan(GraphBuilder("g")
                       .Input("x", pb::kFloat, {{4}})
                       .Node("Sin", {"x"}, {"s"})
                       .Node("Relu", {"s"}, {"a"})
                       .Node("Add", {"s", "a"}, {"b"})
                       .Node("Add", {"b", "s"}, {"y"})
                       .Output("y", pb::kFloat)
                       .Output("s", pb::kFloat)
                       .Build());
  EXPECT_TRUE(p.plan.before[0].empty());
  EXPECT_EQ(Copies(p.plan.before[1]), std::vector<std::string>{"s->device"});
  EXPECT_TRUE(p.plan.before[2].empty());
  EXPECT_TRUE(p.plan.before[3].empty());
  // s was made on the host: only y comes back.
  EXPECT_EQ(Copies(p.plan.at_end), std::vector<std::string>{"y->host"});
  EXPECT_EQ(p.plan.num_transfers, 2);
}

TEST(PlacementTest, AllHostNeedsNoCopies) {
  Planned p = Plan(GraphBuilder("g")
                       .Input("x", pb::kFloat, {{4}})
                       .Node("Sin", {"x"}, {"a"})
                       .Node("Cos", {"a"}, {"y"})
                       .Output("y", pb::kFloat)
                       .Build());
  EXPECT_EQ(p.plan.device_steps, 0);
  EXPECT_EQ(p.plan.num_transfers, 0);
  EXPECT_TRUE(p.plan.at_end.empty());
}

TEST(PlacementTest, NodesWithSubgraphsStayOnTheHostWithTheirOuterValues) {
  auto model = ir::FromProto(testing::IfModelWithOuterRefs());
  ASSERT_TRUE(model.ok()) << model.status();
  auto order = ir::TopologicalOrder((*model)->graph());
  ASSERT_TRUE(order.ok());
  PlacementPlan plan = PlanPlacement((*model)->graph(), *order, [](const ir::Node&) { return true; });
  ASSERT_EQ(plan.place.size(), 1u);
  EXPECT_EQ(plan.place[0], Place::kHost);
  EXPECT_EQ(plan.num_transfers, 0);
}

}  // namespace
}  // namespace onnxkit::runner
