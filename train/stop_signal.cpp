#include "train/stop_signal.h"

namespace xdino::train {
namespace {

volatile std::sig_atomic_t g_signal = 0;

extern "C" void on_stop_signal(int sig) { g_signal = sig; }

}  // namespace

StopSignalGuard::StopSignalGuard() {
  g_signal = 0;
  struct sigaction sa = {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;  // blocking reads in the data loader are resumed, not failed
  sigaction(SIGTERM, &sa, &old_term_);
  sigaction(SIGUSR1, &sa, &old_usr1_);
}

StopSignalGuard::~StopSignalGuard() {
  sigaction(SIGTERM, &old_term_, nullptr);
  sigaction(SIGUSR1, &old_usr1_, nullptr);
}

bool stop_requested() { return g_signal != 0; }
int stop_signal() { return static_cast<int>(g_signal); }

}  // namespace xdino::train
