// A piece of GPU work recorded once as a CUDA graph and replayed: the launches of a training
// step's forward and backward (a thousand small kernels for XCiT-S12, each a few microseconds
// of host time) become one launch (docs/dino.md, "The step as a CUDA graph").
//
// Contract:
//  - available() is false without a CUDA device (always in a build whose LibTorch has no
//    CUDA); constructing a CudaGraph then throws xdino::UsageError.
//  - run_eagerly(fn) runs fn now, on the graph's own side stream (what capture needs done once
//    on that stream first: cuBLAS handles and workspaces, lazily built state), after the
//    current stream's work, and makes the current stream wait for it.
//  - capture(fn) records fn's work on the side stream, into a memory pool of the graph's own:
//    nothing executes. The capture is thread-local (cudaStreamCaptureModeThreadLocal): other
//    threads (the loader's, pinning memory) may make CUDA calls meanwhile. fn itself must not
//    read a device value on the host (.item(), .cpu(), a comparison in an if), allocate pinned
//    memory or copy from pageable host memory; CUDA then refuses, and capture throws
//    xdino::Error with CUDA's reason. Tensors that fn creates keep their addresses for every
//    replay: a replay rewrites them. A second capture frees the first graph before it begins.
//  - replay() launches the recorded work on the current stream; copy the new inputs into the
//    tensors fn read first (copy_), read the outputs after. Throws before any capture.
//  - Random numbers drawn inside fn (drop path) advance with each replay: LibTorch registers
//    the CUDA generator with the graph.
#pragma once

#include <functional>
#include <memory>

namespace xdino::train {

class CudaGraph {
 public:
  static bool available();

  CudaGraph();
  ~CudaGraph();
  CudaGraph(const CudaGraph&) = delete;
  CudaGraph& operator=(const CudaGraph&) = delete;

  void run_eagerly(const std::function<void()>& fn);
  void capture(const std::function<void()>& fn);
  void replay();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace xdino::train
