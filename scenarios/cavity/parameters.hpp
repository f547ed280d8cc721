#pragma once
//! \file parameters.hpp
//! The cavity run's parameters, their derived lattice constants, and their validation (host-only, no CUDA).
//!
//! Units: lattice units throughout (cell size 1, time step 1). The cavity is n x n cells, the lid moves at
//! `lid_speed` cells per step, so the kinematic viscosity is nu = lid_speed * n / Re and the relaxation time
//! tau = 3 nu + 1/2.

#include "cavity/lattice.hpp"

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace conveyor::cavity {

//! Fewest cells per side accepted: coarser lattices cannot resolve the primary vortex and its wall layers.
inline constexpr int min_cells = 16;
//! Most cells per side accepted: 8192^2 cells x 72 bytes (two float32 D2Q9 fields) = 4.8 GB of device memory.
inline constexpr int max_cells = 8192;
//! Highest lid speed accepted (lattice units): Mach number U * sqrt(3) <= 0.35; LBM's compressibility error grows
//! as Ma^2.
inline constexpr double max_lid_speed = 0.2;
//! Lowest lid speed accepted (lattice units): slower lids need n / U time steps per convective time (millions), and
//! 250 convective times must still fit a step count.
inline constexpr double min_lid_speed = 1e-4;
//! Most time steps accepted (--steps): 10^12, hundreds of days at the fastest MLUPS of any GPU.
inline constexpr std::int64_t max_run_steps = 1'000'000'000'000;
//! Highest cell Reynolds number Re / n = U / nu accepted: beyond it tau = 3 nu + 1/2 is so close to 1/2 that the
//! corner singularities of the lid make the run unstable (and the wall layers are under-resolved).
inline constexpr double max_cell_reynolds = 10.0;
//! Highest viscosity accepted, nu <= 0.5 (tau <= 2): larger relaxation times leave the hydrodynamic (low Knudsen
//! number) regime the method is accurate in.
inline constexpr double max_viscosity = 0.5;
//! Largest K (time steps per graph) accepted: a graph of K kernel nodes is instantiated once; 10000 nodes take
//! tens of milliseconds.
inline constexpr int max_steps_per_graph = 10000;
//! Default cap on the run length, in convective times n / lid_speed, when --steps is not given.
inline constexpr double default_convective_times = 250.0;
//! Most slabs accepted (entries of cavity_options::devices, --gpus): a block graph holds K step nodes and up to
//! 2 K halo copies per slab, so more slabs mean many more nodes; no machine offers more GPUs to one process.
inline constexpr int max_slabs = 16;

//! Everything that defines one cavity run.
struct cavity_options {
  double re = 100.0;         //!< Reynolds number Re = U n / nu (lid speed, cavity side, viscosity)
  int n = 257;               //!< lattice cells per side
  double lid_speed = 0.1;    //!< lid velocity U, lattice units (cells per time step)
  std::int64_t steps = 0;    //!< most time steps to run (a multiple of steps_per_graph); 0: auto_steps()
  double tol = 1e-7;         //!< stop when the velocity change per step, max over cells / U, falls below it;
                             //!< 0: run exactly `steps`
  int steps_per_graph = 100; //!< K: time steps per graph (per convergence check, in every mode); even
  //! `--pdl`: in stream and graph modes the kernels are launched with programmatic dependent launch
  //! (launch_ctx::programmatic; graph mode builds programmatic edges between the K steps and the check). The
  //! sync mode ignores it (it waits for every kernel). Does not change a single bit of the results.
  bool programmatic = false;
  //! `--pdl-trigger`: where the step kernel triggers its dependents' launch (lattice_params::pdl_trigger):
  //! "exit" (default), "after-wait" or "early". Meaningful with `programmatic` only.
  std::string pdl_trigger = "exit";
  //! `--step-layout`: "flat" (default) or "rows" (lattice_params::step_layout). Changes no result.
  std::string step_layout = "flat";
  //! `--gpus N` (devices 0..N-1) or `--devices LIST`: the CUDA device of each horizontal slab of rows, bottom slab
  //! first (make_slab: n rows split as evenly as possible). {0}: one slab, the whole lattice on device 0. Devices
  //! may repeat: {0, 0} runs two slabs on one GPU, with the same halo exchange as on two, so the multi-GPU code runs
  //! (and is tested) on a machine with one GPU. Changes no result: every decomposition gives bitwise the same states.
  std::vector<int> devices{0};
  //! `--halo-copy`: how a halo row moves between two slabs after every step: "2d" (default: one strided copy of the
  //! five population planes from the first to the last that cross the boundary, 2..6 upwards, 4..8 downwards) or
  //! "1d" (one contiguous copy per crossing population, three per halo row). Meaningful with several slabs only;
  //! changes no result.
  std::string halo_copy = "2d";
};

//! Lattice constants derived from the options (see the file comment).
struct lattice_constants {
  double nu = 0.0;              //!< kinematic viscosity U n / Re, lattice units (cells^2 per step)
  double tau = 0.0;             //!< relaxation time of the even (viscous) part, 3 nu + 1/2
  double tau_minus = 0.0;       //!< relaxation time of the odd part: 1/2 + Lambda / (tau - 1/2), Lambda = 1/4
  double mach = 0.0;            //!< lid Mach number U / c_s = U sqrt(3)
  double cell_reynolds = 0.0;   //!< Re / n = U / nu
  double convective_time = 0.0; //!< n / U, time steps for the lid to travel one cavity side
};

//! The TRT "magic" parameter Lambda = (tau - 1/2)(tau_minus - 1/2): 1/4 is the most stable choice.
inline constexpr double trt_magic = 0.25;

//! Derives the lattice constants of `o` without validating (tau is meaningless for invalid options).
[[nodiscard]] lattice_constants derive(const cavity_options& o) noexcept;

//! The range of Reynolds numbers valid for a lattice of `n` cells and lid speed `lid_speed`:
//! [U n / max_viscosity, max_cell_reynolds * n].
[[nodiscard]] std::pair<double, double> valid_reynolds_range(int n, double lid_speed) noexcept;

//! How validate() names the options in its messages: by default the fields of cavity_options; a command gives its
//! option names ("--re", ...).
struct option_names {
  std::string_view re = "re";                           //!< cavity_options::re
  std::string_view n = "n";                             //!< cavity_options::n
  std::string_view lid_speed = "lid_speed";             //!< cavity_options::lid_speed
  std::string_view steps = "steps";                     //!< cavity_options::steps
  std::string_view tol = "tol";                         //!< cavity_options::tol
  std::string_view steps_per_graph = "steps_per_graph"; //!< cavity_options::steps_per_graph
  std::string_view devices = "devices";                 //!< cavity_options::devices
  std::string_view halo_copy = "halo_copy";             //!< cavity_options::halo_copy
};

//! Options validate() refuses: what() names the option (as option_names says), its valid range and why. Thread
//! safety: an immutable value once thrown.
class invalid_options : public std::invalid_argument {
public:
  //! An error with the message `what`.
  explicit invalid_options(const std::string& what);
};

//! Checks every option and throws invalid_options with a message naming the option, its valid range and why (e.g.
//! "tau = 3 nu + 1/2 = 0.5012 is too close to 1/2 ..."). Checks: n in [min_cells, max_cells]; lid_speed in
//! [min_lid_speed, max_lid_speed]; Re finite and in valid_reynolds_range(); steps_per_graph even and in [2,
//! max_steps_per_graph]; steps in [0, max_run_steps] and a multiple of steps_per_graph; tol finite and >= 0; tol =
//! 0 needs steps > 0; devices: 1 to max_slabs entries, none negative (whether they exist is checked where the run
//! starts); halo_copy "2d" or "1d". Thread-safe.
void validate(const cavity_options& o, const option_names& names = {});

//! Options that passed validate(): what the run and make_lattice_params take, so that they check nothing again. A
//! cavity_options converts to it implicitly by being validated. A plain value; thread-safe to read.
class checked_options {
public:
  //! Validates `o` (validate(o, names)) and keeps a copy. Implicit: a cavity_options is checked where one is needed.
  //! \throws invalid_options as validate().
  checked_options(const cavity_options& o, const option_names& names = {}); // NOLINT(google-explicit-constructor)
  //! The options.
  [[nodiscard]] const cavity_options& operator*() const noexcept { return options_; }
  //! The options' members.
  [[nodiscard]] const cavity_options* operator->() const noexcept { return &options_; }

private:
  cavity_options options_;
};

//! Rows [first, second) of slab `index` of `count` of an n-row lattice: n rows split as evenly as possible (slab
//! sizes differ by at most one row), slab 0 at the bottom (y = 0). Needs 1 <= count <= n and 0 <= index < count.
[[nodiscard]] std::pair<int, int> slab_rows(int n, int count, int index) noexcept;

//! Slab `index` of `count` of the n x n lattice (lattice.hpp): the rows slab_rows() gives it, a halo row below
//! unless it is the bottom slab, one above unless it is the top slab. make_slab(n, 1, 0) == whole_lattice(n).
[[nodiscard]] slab make_slab(int n, int count, int index) noexcept;

//! The distinct devices of `devices` (cavity_options::devices), ascending.
[[nodiscard]] std::vector<int> distinct_devices(const std::vector<int>& devices);

//! The step kernel's parameters for `o` (float32 relaxation rates, lid speed). Never throws once `o` is checked
//! (a cavity_options given here is validated first: invalid_options as validate()).
[[nodiscard]] lattice_params make_lattice_params(const checked_options& o);

//! The run length used when `o.steps` is 0: default_convective_times * n / U, rounded up to a multiple of K.
[[nodiscard]] std::int64_t auto_steps(const cavity_options& o) noexcept;

//! `o.steps` when positive, else auto_steps(o).
[[nodiscard]] std::int64_t max_steps(const cavity_options& o) noexcept;

//! One line describing the run: "Re 100, 257x257 cells, U 0.1 (Ma 0.173), nu 0.257, tau 1.271 (TRT, tau- 0.824)".
[[nodiscard]] std::string describe(const cavity_options& o);

} // namespace conveyor::cavity
