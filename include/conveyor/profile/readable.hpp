#pragma once
//! \file readable.hpp
//! Text a person reads to the end: kernel names without template arguments, namespaces or parameter
//! lists, and runs of similar node names folded ("step 1 … step 100: 100 nodes"), for the doctor's
//! and the profiler's text reports and error messages. Plain C++ (no CUDA call), host-tested. The
//! full names stay in the JSON exports and in the reports' verbose views.

#include "conveyor/cxx20.hpp"

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace conveyor::profile {

//! The short form of a node or kernel name: without `(anonymous namespace)::`, namespace and class
//! qualifiers, template argument lists, a leading `void` and a trailing parameter list of types —
//! "void cublasLt::splitKreduce_kernel<32, 16, int, float>(float*, int)" → "splitKreduce_kernel",
//! "conveyor::train::kernels::(anonymous namespace)::relu_forward(float*, int)" → "relu_forward". A
//! label that is not a kernel name ("step 1 (f0 -> f1)") is left as it is. A CUTLASS wrapper
//! (`Kernel`, `Kernel2`, `device_kernel`) keeps its first template argument, which names the work:
//! "Kernel2<cutlass_80_tensorop_…>". Pure; never throws but for std::bad_alloc.
[[nodiscard]] std::string short_name(std::string_view name);

//! `text` with every kernel name in it shortened (for evidence sentences that quote names):
//! namespace and class qualifiers, `(anonymous namespace)::` and template argument lists dropped
//! anywhere, and a demangled kernel signature "void name(params)" reduced to its name. Pure; never
//! throws but for std::bad_alloc.
[[nodiscard]] std::string shorten_names(std::string_view text);

//! The short form of a node path inside conditional bodies, "LABEL/body N/…/NAME" as the profiler
//! and doctor name nodes: each conditional's label longer than 12 characters cut to its first word
//! and "…", the node's own name shortened as short_name — "while rel_res > tol && it < max/body
//! 0/void axpy(double*)" → "while…/body 0/axpy". A name outside any body is short_name's. Pure;
//! never throws but for std::bad_alloc.
[[nodiscard]] std::string short_path(std::string_view name);

//! The path part of a node path ("LABEL/body N/", nested ones included) with each label shortened
//! as short_path does. Pure; never throws but for std::bad_alloc.
[[nodiscard]] std::string short_path_prefix(std::string_view prefix);

//! `text` with each of `names` that is a node path (as short_path takes them) replaced by its
//! short_path, and its path part by the short form, wherever they occur: evidence and fix sentences
//! that quote those nodes. Pure; never throws but for std::bad_alloc.
[[nodiscard]] std::string shorten_paths(std::string text, const std::vector<std::string>& names);

//! `names` folded for reading: each name shortened (short_path); a run of two or more consecutive
//! equal names becomes "stencil × 40", a run of three or more that differ only in their numbers
//! "step 1 (f0 -> f1) … step 100 (f1 -> f0): 100 nodes"; at most `most` entries are kept, then "and
//! N more". Pure; never throws but for std::bad_alloc.
[[nodiscard]] std::vector<std::string> fold_names(const std::vector<std::string>& names,
                                                  std::size_t most = 4);

} // namespace conveyor::profile
