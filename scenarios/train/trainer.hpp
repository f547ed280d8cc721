#pragma once
//! \file trainer.hpp
//! Training the perceptron on Fashion-MNIST in one of three execution modes that enqueue the same kernels and
//! library calls (cuBLASLt for the fused step, cuBLAS for the unfused one: step_kind) and differ only in how: `sync` (wait after every call), `stream` (asynchronous, one stream) and
//! `graph` (the step run through conveyor::graphed: captured once, replayed per batch). Every mode runs through the
//! scenarios' mode runner (common/mode_runner.hpp): a timed round is a chunk of steps.
//!
//! Batch selection without re-capture: the training set stays on the device; before each epoch the host uploads
//! that epoch's permutation (epoch_permutation) and zeroes a device batch counter, outside any graph. The first
//! kernel of a step gathers rows perm[counter * batch + i]; a later kernel increments the counter (and a global
//! step counter, which indexes the loss history and gives Adam its t): the last one in the unfused step, the loss
//! kernel in the fused step (before backward; Adam then reads the advanced counter). So the same captured step serves every
//! batch of every epoch.
//!
//! Determinism: every reduction has a fixed order (no float atomics; cuBLAS with a fixed workspace, default math,
//! atomics not allowed), so the three modes produce bitwise-identical losses and parameters for the same seed.
//! Every mode first runs one eager warm-up step (it loads the kernels and lets cuBLAS settle; in graph mode it
//! runs on the capture stream before capture), then resets parameters, optimizer state, counters and loss history
//! to the initial state: all modes then run exactly the same steps, and the warm-up is excluded from the timings.

#include "common/execution_mode.hpp"

#include <conveyor/assembly/graphed_types.hpp>
#include "train/dataset.hpp"
#include "train/mlp.hpp"
#include "train/parameters.hpp"

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace conveyor::scenarios {
class profiling;
} // namespace conveyor::scenarios

namespace conveyor {
class image_source;
} // namespace conveyor

namespace conveyor::train {

//! The execution modes (scenarios/common): sync, stream, graph (the training step captured once, replayed per batch).
using scenarios::all_execution_modes;
using scenarios::execution_mode;
using scenarios::parse_execution_mode;
using scenarios::to_string;

//! Which kernels a training step runs; every execution mode runs the same ones.
enum class step_kind {
  //! Eight cuBLASLt products whose epilogues add the biases, apply and differentiate the ReLUs and sum the bias
  //! gradients (fused_passes.hpp), the loss, its mean and the step counters in one kernel, the optimizer: 11 launches,
  //! 18 kernels (the eight cuBLASLt calls run 15, seven of them epilogue kernels).
  fused,
  //! cuBLAS GEMMs beside bias, ReLU, column-sum, loss, mean and counter kernels (mlp::forward, mlp::backward): 21
  //! launches. The data-parallel runs (run_data_parallel) always run this step.
  unfused,
};

//! "fused" or "unfused".
[[nodiscard]] std::string_view to_string(step_kind k) noexcept;

//! The step_kind named `name`. \throws std::invalid_argument naming the accepted values otherwise.
[[nodiscard]] step_kind parse_step_kind(std::string_view name);

//! Reported after each timed chunk of steps (outside the timed interval).
struct train_progress {
  execution_mode mode;             //!< mode being trained
  int epoch = 0;                   //!< current epoch, 0-based
  int epochs = 0;                  //!< epochs this run will execute (fewer than asked when max_steps cuts it short)
  std::size_t step = 0;            //!< steps completed
  std::size_t total_steps = 0;     //!< steps this run will execute
  std::size_t steps_per_epoch = 0; //!< batches per epoch, the last one partial when the batch does not divide it
  float loss = 0.0F;               //!< loss of the last completed step
};

//! Training settings.
struct train_options {
  int epochs = 10;            //!< passes over the training set, >= 1
  int batch = 128;            //!< samples per step, in [1, training set size]; the last batch of an epoch may be
                              //!< partial (padded to `batch`, its padding masked out of loss and gradients)
  optimizer_config optimizer; //!< update rule and hyper-parameters (Adam, lr 1e-3 by default)
  //! The kernels of a step (`--step`), the same in every mode; run_data_parallel ignores it (always unfused).
  step_kind step = step_kind::fused;
  std::uint64_t seed = 42;   //!< seeds the weights (he_init) and the per-epoch permutations
  std::size_t max_steps = 0; //!< when > 0, stop after this many steps in total
  int chunk_steps = 50;      //!< steps per timed chunk, >= 1 (chunks never straddle an epoch boundary)
  std::function<void(const train_progress&)> on_progress; //!< optional; called after every chunk
  //! Optional (--profile / --doctor): every training step is a profiled step of track to_string(mode); graph
  //! mode watches the graphed step's executable graph ("train step") and hands it to the doctor after the run.
  scenarios::profiling* profiling = nullptr;
  //! `--pdl` (graph mode only): the step is captured, conveyor::make_programmatic turns every edge into one of our
  //! kernels (all of which wait for their predecessors first: kernels.hpp) into a programmatic edge — from our
  //! kernels and from cuBLAS's GEMMs alike — and leaves the edges into cuBLAS's kernels full (they cannot promise
  //! to wait). It runs as graphed_options::transform of the graphed step, so every capture (the full batch, the
  //! partial last batch's update) is made programmatic before graphed instantiates or updates with it. The
  //! arithmetic is unchanged: losses stay bitwise identical.
  bool programmatic = false;
  //! `--debug-nonfinite` (graph mode only): every step runs node by node (graphed_options::step_through), with the
  //! logits, per-row losses, loss history, parameters, gradients and activations watched after each node: the first
  //! node after which one holds a NaN or an infinity throws conveyor::nonfinite_error naming it. A debugging run:
  //! slow, and its timings mean nothing.
  bool debug_nonfinite = false;
};

//! What one run produced.
struct train_result {
  execution_mode mode = execution_mode::sync;  //!< the mode that ran
  std::size_t steps = 0;                       //!< training steps executed (warm-up excluded)
  std::size_t steps_per_epoch = 0;             //!< training-set size / batch, rounded up (last batch partial)
  int epochs = 0;                              //!< epochs executed (the last may be partial under max_steps)
  std::vector<float> losses;                   //!< mean cross-entropy of every step, in order (`steps` values)
  double test_accuracy = 0.0;                  //!< fraction of test images classified correctly at the end
  std::vector<double> chunk_ms_per_step;       //!< wall-clock ms per step of each timed chunk
  double ms_per_step = 0.0;                    //!< median of chunk_ms_per_step
  double steps_per_second = 0.0;               //!< 1000 / ms_per_step
  host_parameters final_parameters;            //!< parameters after the last step
  std::size_t graph_nodes = 0;                 //!< graph mode: nodes of the captured step (0 otherwise)
  std::size_t graph_edges = 0;                 //!< graph mode: edges of the captured step (0 otherwise)
  std::string graph_dot;                       //!< graph mode: the captured step as Graphviz DOT (empty otherwise)
  conveyor::graphed_statistics graphed;        //!< graph mode: what the graphed step did (replays, updates, ...)
  std::string graphed_report;                  //!< graph mode: graphed's statistics and reasons, readable
  step_kind step = step_kind::fused;           //!< the kernels every step ran
  bool programmatic = false;                   //!< graph mode with train_options::programmatic
  std::size_t programmatic_changed = 0;        //!< edges of the full-batch step make_programmatic made programmatic
  std::size_t programmatic_left = 0;           //!< edges into kernel nodes it left full (into cuBLAS, ...)
  std::size_t programmatic_edges_before = 0;   //!< edges that were programmatic already (cuBLAS's own, if any)
  std::vector<std::string> programmatic_lines; //!< its report, one line per edge (programmatic_report::lines)
  // Data-parallel training (data_parallel.hpp); run_training leaves the defaults.
  int world_size = 1;                //!< GPUs the global batch was split over (ranks of the communicator)
  int local_replicas = 1;            //!< replicas this process drove (N with --gpus N, 1 per process with MPI)
  std::vector<int> devices;          //!< their CUDA device ordinals, replica 0 first (empty for run_training)
  bool replicas_identical = true;    //!< every local replica ended with bitwise replica 0's parameters and losses
  std::uint64_t parameters_hash = 0; //!< parameters_hash(final_parameters), to compare across processes (0 for
                                     //!< run_training)
};

//! Number of full batches in `train_count` samples: train_count / batch.
//! \throws std::invalid_argument when batch < 1.
[[nodiscard]] std::size_t steps_per_epoch(std::size_t train_count, int batch);

//! Samples in step `step_in_epoch` (0-based) of an epoch: `batch`, or the remainder for the last step.
//! \throws std::invalid_argument when the step starts past the training set.
[[nodiscard]] int rows_in_step(std::size_t train_count, int batch, std::size_t step_in_epoch);

//! The order in which epoch `epoch` visits `n` samples: a Fisher-Yates shuffle of 0..n-1 driven by
//! std::mt19937_64 seeded from (seed, epoch) alone, so the same seed gives the same orders in every mode.
[[nodiscard]] std::vector<int> epoch_permutation(std::uint64_t seed, int epoch, std::size_t n);

//! How the checks of check_options name the options they refuse (a command gives its option names).
struct option_names {
  std::string_view epochs = "epochs";       //!< train_options::epochs
  std::string_view batch = "batch";         //!< train_options::batch
  std::string_view max_steps = "max_steps"; //!< train_options::max_steps
};

//! Every check run_training makes of its options and data, for callers to make before the GPU is needed: the data
//! (validate()), epochs, batch (at most the training set), chunk_steps >= 1, and the steps in all (at most INT_MAX;
//! the message names the options to change as `names` says).
//! \throws std::invalid_argument naming the problem.
void check_options(const train_options& options, const dataset& data, const option_names& names = {});

//! Trains a freshly initialised network (he_init(options.seed)) on `data` in `mode` and evaluates it on the test
//! split. Uploads the data to the device, runs the warm-up step and the reset described in the file comment,
//! then `min(epochs * steps_per_epoch, max_steps)` steps timed in chunks.
//! \throws std::invalid_argument for invalid options or data (see validate()); conveyor::cuda_error or
//!         conveyor::libraries::library_error when a CUDA or cuBLAS call fails (no device, out of memory, capture
//!         refused...).
[[nodiscard]] train_result run_training(const train_options& options, const dataset& data, execution_mode mode);

//! The training step as a graph file (`conveyor bench graph-files`): each a median over `repeats`.
struct step_file_costs {
  double capture_instantiate_ms = 0.0; //!< conveyor::capture of one step, then instantiate
  double save_ms = 0.0;                //!< to_graph_file and to_bytes (kernel images embedded from `images`)
  double load_instantiate_ms = 0.0;    //!< from_bytes, load (kernels from the embedded images), instantiate
  double parse_ms = 0.0;               //!< of which from_bytes
  double kernels_ms = 0.0;             //!< of which load's kernel resolution (the images loaded)
  double buffers_ms = 0.0;             //!< of which load's buffer allocation
  double graphs_ms = 0.0;              //!< of which load's graph building
  std::size_t file_bytes = 0;          //!< the file's size (no buffer contents)
  std::size_t nodes = 0;               //!< nodes of the step's graph
  std::size_t kernels = 0;             //!< distinct kernels, and those with an embedded image
  std::size_t images = 0;              //!< kernel images in the file
};

//! Measures the step of `options.batch` samples over `data` (graph mode's step: gather, forward with cuBLAS,
//! loss, backward, optimizer) saved to and loaded from a graph file, after one eager warm-up step. `images` (may be
//! null) gives the kernels' images (profile::module_images, made before the first kernel ran).
//! \throws as run_training; save_error, load_error.
[[nodiscard]] step_file_costs measure_step_file_costs(const train_options& options, const dataset& data,
                                                      const conveyor::image_source* images, int repeats);

//! Fraction of test images the network with parameters `p` classifies correctly (argmax of the logits).
//! \throws std::invalid_argument for invalid data; conveyor::cuda_error / conveyor::libraries::library_error when a
//!         call fails.
[[nodiscard]] double test_accuracy(const host_parameters& p, const dataset& data);

//! Loss and gradients of one training step.
struct step_gradients {
  float loss = 0.0F;         //!< mean cross-entropy over the batch, before the update
  host_parameters gradients; //!< dLoss/dparameter, same shapes as the parameters
};

//! Runs one full training step (gather, forward, loss, backward, update, counter) on exactly the samples given,
//! in the given mode, with parameters `p`, and returns the loss and the gradients (with respect to `p`, i.e.
//! before the update), so that tests can compare them with a CPU reference. `kind` chooses the step's kernels.
//! \param x      rows x 784 inputs (any float values; pixels scaled to [0, 1] in training)
//! \param labels rows labels in [0, 10)
//! \throws std::invalid_argument when rows is 0, x has the wrong size or a label is out of range;
//!         conveyor::cuda_error / conveyor::libraries::library_error when a call fails.
[[nodiscard]] step_gradients compute_step_gradients(const host_parameters& p, std::span<const float> x,
                                                    std::span<const int> labels,
                                                    execution_mode mode = execution_mode::stream,
                                                    step_kind kind = step_kind::fused);

} // namespace conveyor::train
