#include "train/cuda_graph.h"

#include "core/check.h"
#include "core/compat.h"

#ifdef XDINO_WITH_CUDA
#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/cuda.h>
#endif

namespace xdino::train {

#ifdef XDINO_WITH_CUDA

struct CudaGraph::State {
  c10::cuda::CUDAStream side = c10::cuda::getStreamFromPool();
  std::unique_ptr<at::cuda::CUDAGraph> graph;

  // The side stream waits for what the current stream queued, runs fn, and the current
  // stream then waits for the side stream: the caller sees one ordered stream of work.
  void on_side_stream(const std::function<void()>& fn) {
    const c10::cuda::CUDAStream current = c10::cuda::getCurrentCUDAStream();
    at::cuda::CUDAEvent ready;
    ready.record(current);
    ready.block(side);
    {
      c10::cuda::CUDAStreamGuard guard(side);
      fn();
    }
    at::cuda::CUDAEvent done;
    done.record(side);
    done.block(current);
  }
};

CudaGraph::CudaGraph() {
  XDINO_CHECK_ARG(available(), "a CUDA graph needs a CUDA device");
  state_ = std::make_unique<State>();
}

void CudaGraph::run_eagerly(const std::function<void()>& fn) { state_->on_side_stream(fn); }

void CudaGraph::capture(const std::function<void()>& fn) {
  // As torch.cuda.graph does: nothing of the caller's may still run when capture begins.
  torch::cuda::synchronize();
  // The graph before goes first: two graphs and their pools at once can exhaust a card that
  // fits one.
  state_->graph.reset();
  auto graph = std::make_unique<at::cuda::CUDAGraph>();
  try {
    state_->on_side_stream([&] {
      // Thread-local: the loader's threads pin memory and query events while this thread
      // captures (torch's capture_error_mode="thread_local" case); in the global mode any
      // of those calls would invalidate the capture.
      graph->capture_begin({0, 0}, cudaStreamCaptureModeThreadLocal);
      try {
        fn();
      } catch (...) {
        try {
          graph->capture_end();
        } catch (...) {  // the first error is the one to report
        }
        throw;
      }
      graph->capture_end();
    });
  } catch (const std::exception& e) {
    XDINO_FAIL("capturing the training step as a CUDA graph failed: ", first_line(e.what()));
  }
  torch::cuda::synchronize();
  state_->graph = std::move(graph);
}

void CudaGraph::replay() {
  XDINO_CHECK(state_->graph != nullptr, "CudaGraph::replay before capture");
  state_->graph->replay();
}

#else  // a LibTorch without CUDA: no CudaGraph can be constructed, so no method is reached.

struct CudaGraph::State {};

CudaGraph::CudaGraph() {
  XDINO_FAIL_ARG("a CUDA graph needs a CUDA build of LibTorch and a CUDA device");
}
void CudaGraph::run_eagerly(const std::function<void()>&) { XDINO_FAIL("no CUDA graph here"); }
void CudaGraph::capture(const std::function<void()>&) { XDINO_FAIL("no CUDA graph here"); }
void CudaGraph::replay() { XDINO_FAIL("no CUDA graph here"); }

#endif

bool CudaGraph::available() { return compat::cuda_available(); }

CudaGraph::~CudaGraph() = default;

}  // namespace xdino::train
