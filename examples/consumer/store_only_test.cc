// A user's test on @devmesh//store alone (no launcher, no communicators): a
// TCP store server on a free loopback port, a client that sets, adds and
// reads back. Built by CI so that //store stays usable on its own.
#include <memory>

#include "gtest/gtest.h"
#include "store/tcp_store_client.h"
#include "store/tcp_store_server.h"

namespace {

TEST(StoreOnly, ServerAndClientOnLoopback) {
  devmesh::TcpStoreServerOptions server_options;
  server_options.host = "127.0.0.1";
  auto server = devmesh::TcpStoreServer::Start(server_options);
  ASSERT_TRUE(server.ok()) << server.status();
  devmesh::TcpStoreClientOptions client_options;
  client_options.port = (*server)->port();
  auto client = devmesh::TcpStoreClient::Connect(client_options);
  ASSERT_TRUE(client.ok()) << client.status();
  ASSERT_TRUE((*client)->Set("model", "llama").ok());
  auto value = (*client)->Get("model", absl::Seconds(5));
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_EQ(*value, "llama");
  auto count = (*client)->Add("ready", 3);
  ASSERT_TRUE(count.ok()) << count.status();
  EXPECT_EQ(*count, 3);
}

}  // namespace
