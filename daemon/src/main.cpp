// ragd: the RAG serving daemon.
//
//   ragd --model DIR --data DIR --listen 127.0.0.1:8080
//   ragd --config configs/ragd.toml --set server.threads=8
//   ragd --config configs/ragd.toml --print-config
//
// Starts listening at once (/healthz 200, /readyz 503), loads the runtime, then /readyz turns
// 200. SIGINT/SIGTERM: /readyz and new runs answer 503 while in-flight requests finish within
// server.shutdown_deadline_ms; the rest are cancelled, then the daemon stops accepting, flushes
// cache metadata and exits 0.
#include "ragd/common/process.h"
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <mutex>
#include <optional>
#include <thread>

#include <pthread.h>
#include <sys/resource.h>

#include <CLI/CLI.hpp>

#include "ragd/common/log.h"
#include "ragd/daemon/api.h"
#include "ragd/daemon/config.h"
#include "ragd/daemon/server.h"
#include "ragd/pipelines/runtime.h"
#include "ragd/seqparallel/mpi_communicator.h"
#include "ragd/seqparallel/nccl_communicator.h"
#include "ragd/seqparallel/sp_group.h"  // SpTransport

using namespace ragd;

namespace {

// Every connection is a descriptor: raise the open-file soft limit to the hard limit (the
// server caps connections below whatever limit results).
void raise_open_file_limit() {
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0) {
    log::daemon()->warn("cannot read the open-file limit (RLIMIT_NOFILE): {}", std::strerror(errno));
    return;
  }
  const rlim_t before = rl.rlim_cur;
  if (rl.rlim_cur != rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &rl) != 0) {
      log::daemon()->warn("cannot raise the open-file limit from {} to its hard limit {}: {}", before, rl.rlim_max,
                          std::strerror(errno));
      return;
    }
  }
  if (rl.rlim_cur == RLIM_INFINITY) log::daemon()->info("open-file limit: unlimited");
  else if (before != rl.rlim_cur) log::daemon()->info("open-file limit raised from {} to {} (the hard limit)", before, rl.rlim_cur);
  else log::daemon()->info("open-file limit: {} (the hard limit)", rl.rlim_cur);
}

// mpirun / mpiexec (Open MPI, or a PMI launcher) sets these for every rank it starts.
bool launched_by_mpi() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"}) {
    if (std::getenv(v) != nullptr) return true;
  }
  return false;
}

// A rank > 0 of `mpirun -np N ragd`: the runtime serves rank 0's sequence-parallel commands until
// it shuts the group down.
int serve_rank(const daemon::DaemonConfig& cfg, seqparallel::Communicator& comm) {
  if (Status st = pipelines::serve_sp_rank(cfg.runtime, comm); !st.ok()) {
    std::fprintf(stderr, "ragd rank %d: %s\n", comm.rank(), st.to_string().c_str());
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  ragd::ensure_passive_omp_wait(argv);
  CLI::App app{"ragd - retrieval-augmented generation serving daemon"};
  std::string config_path, model, data, listen, pipelines_dir, device, weights, kv_dtype, log_level;
  int threads = -1, sp_workers = 0;
  std::vector<std::string> sets, api_keys;
  bool print_config = false, show_secrets = false;
  app.add_option("-c,--config", config_path, "TOML config file (configs/ragd.toml documents every option)");
  app.add_option("--model", model, "model directory (runtime.model_dir)");
  app.add_option("--data", data, "data directory: document store, index, SSD cache (runtime.data_dir)");
  app.add_option("--listen", listen, "host:port (server.listen); port 0 picks a free port");
  app.add_option("--pipelines", pipelines_dir, "directory of pipeline *.toml specs (runtime.pipelines_dir)");
  app.add_option("--device", device, "cpu | cuda | cuda:N (runtime.device)");
  app.add_option("--weights", weights, enum_choices<engine::WeightFormat>() + ": weights in memory (runtime.weights)");
  app.add_option("--kv-dtype", kv_dtype, enum_choices<kernels::KvDtype>() + ": KV pool storage (runtime.kv_dtype)");
  app.add_option("--threads", threads, "io threads (server.threads)");
  app.add_option("--sp-workers", sp_workers,
                 "sequence-parallel workers for long prompts, in this process (runtime.sp_workers; 1 = off)");
  app.add_option("--log-level", log_level, enum_choices<log::Level>());
  app.add_option("--api-key", api_keys, "KEY=TENANT; repeatable; enables auth");
  std::vector<std::string> admin_keys;
  app.add_option("--admin-key", admin_keys, "KEY=TENANT with operator rights; repeatable; enables auth");
  app.add_option("--set", sets, "any option as section.key=value; repeatable");
  app.add_flag("--print-config", print_config, "print the effective config as TOML and exit");
  app.add_flag("--show-secrets", show_secrets, "with --print-config: print API keys unmasked");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }

  daemon::DaemonConfig cfg;
  auto die = [](const Status& st) {
    std::fprintf(stderr, "ragd: %s\n", st.to_string().c_str());
    return 2;
  };
  if (!config_path.empty()) {
    Status st = daemon::load_config_file(cfg, config_path);
    if (!st.ok()) return die(st);
  }
  std::vector<std::pair<std::string, std::string>> overrides;
  if (!model.empty()) overrides.emplace_back("runtime.model_dir", model);
  if (!data.empty()) overrides.emplace_back("runtime.data_dir", data);
  if (!listen.empty()) overrides.emplace_back("server.listen", listen);
  if (!pipelines_dir.empty()) overrides.emplace_back("runtime.pipelines_dir", pipelines_dir);
  if (!device.empty()) overrides.emplace_back("runtime.device", device);
  if (!weights.empty()) overrides.emplace_back("runtime.weights", weights);
  if (!kv_dtype.empty()) overrides.emplace_back("runtime.kv_dtype", kv_dtype);
  if (threads >= 0) overrides.emplace_back("server.threads", std::to_string(threads));
  if (sp_workers > 0) overrides.emplace_back("runtime.sp_workers", std::to_string(sp_workers));
  if (!log_level.empty()) overrides.emplace_back("log_level", log_level);
  for (const auto& s : sets) {
    auto eq = s.find('=');
    if (eq == std::string::npos) return die(Status::InvalidArgument("--set '" + s + "': expected section.key=value"));
    overrides.emplace_back(s.substr(0, eq), s.substr(eq + 1));
  }
  for (const auto& [k, v] : overrides) {
    Status st = daemon::apply_override(cfg, k, v);
    if (!st.ok()) return die(st.with_context("flag"));
  }
  for (const auto& kv : api_keys)
    if (Status st = daemon::apply_key_flag(cfg, false, kv); !st.ok()) return die(st);
  for (const auto& kv : admin_keys)
    if (Status st = daemon::apply_key_flag(cfg, true, kv); !st.ok()) return die(st);
  if (Status st = daemon::validate(cfg); !st.ok()) return die(st);
  if (print_config) {
    std::cout << daemon::to_toml(cfg, show_secrets);
    return 0;
  }
  if (cfg.runtime.model_dir.empty()) return die(Status::InvalidArgument("runtime.model_dir: required (--model DIR)"));
  if (cfg.runtime.data_dir.empty()) return die(Status::InvalidArgument("runtime.data_dir: required (--data DIR)"));
  spdlog::set_level(log::to_spdlog(cfg.log_level));
  log::daemon()->set_level(log::to_spdlog(cfg.log_level));

  // Started by mpirun with more than one rank: rank 0 serves HTTP and drives long prompts; every
  // other rank only holds its share of their KV (seqparallel::serve); an idle rank sleeps between polls.
  std::unique_ptr<seqparallel::Communicator> sp_comm;
  if (launched_by_mpi()) {
    auto c = seqparallel::make_mpi_communicator(&argc, &argv);
    if (!c.ok()) return die(c.status().with_context("mpirun"));
    if ((*c)->size() > 1 && cfg.runtime.sp_transport == seqparallel::SpTransport::kNccl) {
      c = seqparallel::make_nccl_communicator(std::move(c).value());  // MPI stays the bootstrap
      if (!c.ok()) return die(c.status().with_context("mpirun with runtime.sp_transport = nccl"));
    }
    if ((*c)->size() > 1) {
      if ((*c)->rank() > 0) return serve_rank(cfg, **c);
      sp_comm = std::move(c).value();
    }
  }

  // Signals are taken synchronously by this thread; every other thread inherits the mask.
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGINT);
  sigaddset(&sigs, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);
  std::signal(SIGPIPE, SIG_IGN);

  raise_open_file_limit();
  auto api = std::make_shared<daemon::Api>(cfg);
  auto server = daemon::Server::start(cfg.server, api);
  if (!server.ok()) return die(server.status());
  std::printf("ragd listening on http://%s\n", (*server)->address().c_str());
  std::fflush(stdout);
  log::daemon()->info("listening on {} ({} io threads, up to {} connections); loading model {} with data {}",
                      (*server)->address(), (*server)->threads(), (*server)->max_connections(), cfg.runtime.model_dir,
                      cfg.runtime.data_dir);

  // Load in the background so that /healthz answers and /readyz says 503 meanwhile.
  std::mutex mu;
  std::optional<Result<pipelines::Runtime>> loaded;
  std::thread loader([&] {
    auto t0 = std::chrono::steady_clock::now();
    auto r = pipelines::open_runtime(cfg.runtime, std::move(sp_comm));
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    std::lock_guard<std::mutex> l(mu);
    if (r.ok()) {
      api->set_runtime(r->executor.get(), r->documents.get());
      log::daemon()->info("runtime ready in {:.0f} ms: model '{}'", ms, r->executor->model_name());
    }
    loaded.emplace(std::move(r));
  });

  int exit_code = 0;
  for (;;) {
    timespec ts{0, 200 * 1000 * 1000};
    int sig = sigtimedwait(&sigs, nullptr, &ts);
    if (sig == SIGINT || sig == SIGTERM) {
      log::daemon()->info("received {}: shutting down", sig == SIGINT ? "SIGINT" : "SIGTERM");
      break;
    }
    std::lock_guard<std::mutex> l(mu);
    if (loaded && !loaded->ok()) {
      log::daemon()->error("cannot start runtime: {}", loaded->status().to_string());
      exit_code = 1;
      break;
    }
  }

  // Graceful stop. New connections are still accepted while in-flight runs finish: health probes
  // get /readyz 503 and new runs 503 shutting_down rather than a refused connection.
  api->begin_shutdown();
  loader.join();
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(cfg.server.shutdown_deadline_ms);
  while (api->in_flight() > 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  if (int n = api->in_flight(); n > 0) {
    log::daemon()->warn("shutdown deadline passed with {} run(s) in flight; cancelling", n);
    api->cancel_all();
    auto grace = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    while (api->in_flight() > 0 && std::chrono::steady_clock::now() < grace)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  (*server)->stop_accepting();
  api->stop_background();
  if (loaded && loaded->ok() && (*loaded)->stop) {
    log::daemon()->info("stopping runtime (flushing cache metadata)");
    (*loaded)->stop();
  }
  (*server)->stop();
  api->set_runtime(nullptr, nullptr);
  log::daemon()->info("bye");
  return exit_code;
}
