// Helpers for the daemon tests: JSON access on responses, polling waits.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include <gtest/gtest.h>
#include <simdjson.h>

#include "ragd/daemon/client.h"

namespace ragd::testing {

// Owns its parser so that the element stays valid.
struct Json {
  std::shared_ptr<simdjson::dom::parser> parser = std::make_shared<simdjson::dom::parser>();
  simdjson::dom::element root;
  bool ok = false;

  explicit Json(const std::string& text) {
    ok = !parser->parse(text.data(), text.size(), true).get(root);
  }
  // The element at ptr; a failure and JSON null (a parsed "null", so callers never read an empty
  // element) when it is not there.
  simdjson::dom::element at(const std::string& ptr) const {
    simdjson::dom::element e;
    if (root.at_pointer(ptr).get(e)) {
      ADD_FAILURE() << "JSON pointer " << ptr << " not found";
      static thread_local simdjson::dom::parser p;
      static thread_local simdjson::dom::element null_element = [] {
        simdjson::dom::element n;
        if (p.parse("null", 4).get(n)) n = {};
        return n;
      }();
      return null_element;
    }
    return e;
  }
  bool has(const std::string& ptr) const {
    simdjson::dom::element e;
    return !root.at_pointer(ptr).get(e);
  }
  std::string str(const std::string& ptr) const {
    std::string_view sv;
    if (at(ptr).get_string().get(sv)) {
      ADD_FAILURE() << ptr << " is not a string";
      return {};
    }
    return std::string(sv);
  }
  int64_t num(const std::string& ptr) const {
    int64_t v = 0;
    if (at(ptr).get_int64().get(v)) ADD_FAILURE() << ptr << " is not an integer";
    return v;
  }
  double dbl(const std::string& ptr) const {
    double v = 0;
    if (at(ptr).get_double().get(v)) ADD_FAILURE() << ptr << " is not a number";
    return v;
  }
  size_t size(const std::string& ptr) const {
    simdjson::dom::array a;
    if (at(ptr).get_array().get(a)) {
      ADD_FAILURE() << ptr << " is not an array";
      return 0;
    }
    return a.size();
  }
};

// Polls cond every 5 ms until true or timeout (a liveness bound, not a timing assertion).
inline bool wait_for(const std::function<bool()>& cond, int timeout_ms = 10000) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (!cond()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

// Checks status, the JSON error body, its code, and that the message names `mentions`.
inline void expect_error(const daemon::ClientResponse& r, int status, const std::string& code,
                         const std::string& mentions) {
  EXPECT_EQ(r.status, status) << r.body;
  EXPECT_NE(r.header("content-type").find("application/json"), std::string::npos);
  Json j(r.body);
  ASSERT_TRUE(j.ok) << r.body;
  EXPECT_EQ(j.str("/error/code"), code) << r.body;
  EXPECT_NE(j.str("/error/message").find(mentions), std::string::npos)
      << "message should mention '" << mentions << "': " << r.body;
}

}  // namespace ragd::testing
