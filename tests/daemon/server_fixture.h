// Starts the real Api + Server on a free loopback port over the fake runtime.
#pragma once

#include <memory>

#include "fake_runtime.h"
#include "ragd/daemon/api.h"
#include "ragd/daemon/client.h"
#include "ragd/daemon/server.h"
#include "test_util.h"

namespace ragd::testing {

class ServerFixture : public ::testing::Test {
 protected:
  void start(daemon::DaemonConfig cfg = {}, bool attach_runtime = true) {
    cfg.server.listen = "127.0.0.1:0";
    cfg.server.threads = 2;
    api_ = std::make_shared<daemon::Api>(cfg);
    if (attach_runtime) api_->set_runtime(&ex_, &docs_);
    auto s = daemon::Server::start(cfg.server, api_);
    ASSERT_TRUE(s.ok()) << s.status().to_string();
    server_ = std::move(s).value();
    port_ = server_->port();
  }
  void TearDown() override {
    if (server_) server_->stop();
    EXPECT_TRUE(ex_.wait_idle(10000));
  }
  daemon::ClientResponse call(const std::string& method, const std::string& target, const std::string& body = "",
                              const daemon::Headers& headers = {}) {
    daemon::HttpClient c("127.0.0.1", port_, 20000);
    auto r = c.request(method, target, body, headers);
    EXPECT_TRUE(r.ok()) << r.status().to_string();
    return r.ok() ? *r : daemon::ClientResponse{};
  }
  int in_flight() {
    Json j(call("GET", "/v1/cache/stats").body);
    return static_cast<int>(j.num("/requests/in_flight"));
  }

  FakeExecutor ex_;
  FakeDocuments docs_;
  std::shared_ptr<daemon::Api> api_;
  std::unique_ptr<daemon::Server> server_;
  uint16_t port_ = 0;
};

}  // namespace ragd::testing
