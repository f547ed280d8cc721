#!/usr/bin/env python3
"""The main job's peer: the same perceptron step in PyTorch, in the configurations a PyTorch user would pick.

`conveyor train` trains a 784-256-128-10 perceptron (ReLU, softmax cross-entropy, Adam lr 1e-3, batch 128,
float32) on Fashion-MNIST with the training set on the device and the batch gathered inside the step from a device
batch counter (docs/train.md). This script runs the same model, optimizer and batch in PyTorch, the same way
(training set on the device, the gather and the counter inside the step), in these configurations:

  eager           Adam (foreach), no graph
  graph           torch.cuda.graph over forward, backward and Adam(capturable=True)  (PyTorch's CUDA-graph recipe)
  graph-fused     the same with Adam(fused=True, capturable=True)
  compile         torch.compile(mode="reduce-overhead") of the whole step, fused Adam (CUDA graphs by Inductor),
                  gradients set to None before backward and torch.compiler.cudagraph_mark_step_begin() a step
  compile-parts   the tutorials' recipe: the model and loss compiled (mode="reduce-overhead"), backward through
                  AOTAutograd, the fused Adam step compiled apart

and prints, per configuration, the median milliseconds per step over chunks of --chunk steps (CUDA events, after
--warmup steps), and the test accuracy after --epochs epochs of full batches (the last partial batch of an epoch
is dropped: 468 steps an epoch). A configuration that does not run here prints why and the others go on.

Usage: pytorch_train.py DATA_DIR [--epochs 10] [--steps 2000] [--chunk 50] [--configs eager,graph,...] [--json F]
DATA_DIR holds the four Fashion-MNIST IDX files (gzip), as `conveyor train --data` reads them.
"""
import argparse
import gzip
import json
import os
import struct
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

BATCH = 128


def read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    zero, dtype, dims = struct.unpack(">HBB", data[:4])
    if zero != 0 or dtype != 0x08:
        raise ValueError(f"{path}: not an IDX file of unsigned bytes")
    shape = struct.unpack(">" + "I" * dims, data[4 : 4 + 4 * dims])
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape)


def load(data_dir, device):
    def tensor(name):
        return torch.from_numpy(read_idx(os.path.join(data_dir, name)).copy()).to(device)

    x_train = tensor("train-images-idx3-ubyte.gz").reshape(-1, 784).float() / 255.0
    y_train = tensor("train-labels-idx1-ubyte.gz").long()
    x_test = tensor("t10k-images-idx3-ubyte.gz").reshape(-1, 784).float() / 255.0
    y_test = tensor("t10k-labels-idx1-ubyte.gz").long()
    return x_train, y_train, x_test, y_test


def make_model(device, seed):
    torch.manual_seed(seed)
    model = torch.nn.Sequential(
        torch.nn.Linear(784, 256), torch.nn.ReLU(), torch.nn.Linear(256, 128), torch.nn.ReLU(),
        torch.nn.Linear(128, 10)).to(device)
    for layer in model:
        if isinstance(layer, torch.nn.Linear):  # He initialisation, as conveyor train's he_init
            torch.nn.init.kaiming_normal_(layer.weight, nonlinearity="relu")
            torch.nn.init.zeros_(layer.bias)
    return model


class Job:
    """One configuration's model, optimizer, device-side batch selection and step function."""

    def __init__(self, config, data, device, seed):
        self.x_train, self.y_train, self.x_test, self.y_test = data
        self.steps_per_epoch = self.x_train.shape[0] // BATCH
        self.model = make_model(device, seed)
        fused = config in ("graph-fused", "compile", "compile-parts")
        capturable = config.startswith("graph") or config.startswith("compile")
        # Compiled configurations: gradients are outputs of Inductor's CUDA graphs, which the next replay overwrites;
        # reading them to zero them in place raises, so they are set to None and made again by backward.
        self.set_to_none = config.startswith("compile")
        if fused:
            self.opt = torch.optim.Adam(self.model.parameters(), lr=1e-3, fused=True, capturable=capturable)
        else:
            self.opt = torch.optim.Adam(self.model.parameters(), lr=1e-3, foreach=True, capturable=capturable)
        self.perm = torch.empty(self.steps_per_epoch, BATCH, dtype=torch.long, device=device)
        self.counter = torch.zeros(1, dtype=torch.long, device=device)
        self.generator = torch.Generator(device="cpu").manual_seed(seed)

    def update(self):
        """Forward, backward and Adam on the batch the counter selects (the counter is read, not changed)."""
        rows = self.perm.index_select(0, self.counter).squeeze(0)
        x = self.x_train.index_select(0, rows)
        y = self.y_train.index_select(0, rows)
        loss = F.cross_entropy(self.model(x), y)
        self.opt.zero_grad(set_to_none=self.set_to_none)
        loss.backward()
        self.opt.step()

    def step(self):
        self.update()
        self.counter.add_(1)

    def new_epoch(self):
        n = self.steps_per_epoch * BATCH
        order = torch.randperm(self.x_train.shape[0], generator=self.generator)[:n]
        self.perm.copy_(order.view(self.steps_per_epoch, BATCH))
        self.counter.zero_()

    @torch.no_grad()
    def accuracy(self):
        return (self.model(self.x_test).argmax(1) == self.y_test).float().mean().item() * 100.0


def build_runner(config, job):
    """Returns a function that runs one step in the configuration, after its warm-up and capture."""
    job.new_epoch()
    if config == "eager":
        return job.step
    if config == "compile":
        # Inductor skips CUDA graphs for a function that changes its inputs in place (the batch counter): the
        # counter is advanced outside the compiled update, one more small kernel a step.
        compiled = torch.compile(job.update, mode="reduce-overhead", fullgraph=False)

        def run():
            torch.compiler.cudagraph_mark_step_begin()
            compiled()
            job.counter.add_(1)

        for _ in range(5):  # Inductor records its CUDA graph after warm-up calls
            run()
        return run
    if config == "compile-parts":
        forward = torch.compile(lambda x, y: F.cross_entropy(job.model(x), y), mode="reduce-overhead")
        opt_step = torch.compile(job.opt.step, mode="reduce-overhead")

        def run():
            torch.compiler.cudagraph_mark_step_begin()
            rows = job.perm.index_select(0, job.counter).squeeze(0)
            loss = forward(job.x_train.index_select(0, rows), job.y_train.index_select(0, rows))
            job.opt.zero_grad(set_to_none=True)
            loss.backward()
            opt_step()
            job.counter.add_(1)

        for _ in range(5):
            run()
        return run
    # PyTorch's recipe (docs: CUDA Graphs, whole-network capture): warm up on a side stream, then capture.
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            job.step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    job.opt.zero_grad(set_to_none=False)
    with torch.cuda.graph(graph):
        job.step()
    return graph.replay


def time_steps(run, job, steps, chunk):
    """Median ms per step over chunks of `chunk` steps (CUDA events around each chunk)."""
    times = []
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    done = 0
    while done < steps:
        if int(job.counter.item()) + chunk > job.steps_per_epoch:
            job.new_epoch()
        start.record()
        for _ in range(chunk):
            run()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop) / chunk)
        done += chunk
    return float(np.median(times))


def train_epochs(run, job, epochs):
    for _ in range(epochs):
        job.new_epoch()
        for _ in range(job.steps_per_epoch):
            run()
    torch.cuda.synchronize()
    return job.accuracy()


def run_config(config, data, args):
    device = torch.device("cuda")
    job = Job(config, data, device, args.seed)
    began = time.perf_counter()
    run = build_runner(config, job)
    torch.cuda.synchronize()
    set_up_ms = (time.perf_counter() - began) * 1e3
    ms = time_steps(run, job, args.steps, args.chunk)
    # Accuracy from the initial weights again: a fresh job, the same configuration.
    job = Job(config, data, device, args.seed)
    run = build_runner(config, job)
    accuracy = train_epochs(run, job, args.epochs) if args.epochs > 0 else float("nan")
    return {"config": config, "ms_per_step": ms, "set_up_ms": set_up_ms, "test_accuracy": accuracy}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("data_dir")
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--chunk", type=int, default=50)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--configs", default="eager,graph,graph-fused,compile,compile-parts")
    parser.add_argument("--json")
    args = parser.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False  # float32 products, as conveyor train's cuBLAS default math
    data = load(args.data_dir, torch.device("cuda"))
    print(f"torch {torch.__version__}, CUDA {torch.version.cuda}, {torch.cuda.get_device_name()}")
    results = []
    for config in args.configs.split(","):
        try:
            result = run_config(config, data, args)
        except Exception as error:  # a configuration that cannot run here is reported, the others go on
            result = {"config": config, "error": f"{type(error).__name__}: {str(error).splitlines()[0][:300]}"}
        results.append(result)
        if "error" in result:
            print(f"{config:12s} did not run: {result['error']}")
        else:
            print(f"{config:12s} {result['ms_per_step']:.4f} ms/step  set-up {result['set_up_ms']:.0f} ms  "
                  f"test accuracy {result['test_accuracy']:.2f}% after {args.epochs} epochs")
        sys.stdout.flush()
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"torch": torch.__version__, "cuda": torch.version.cuda,
                       "device": torch.cuda.get_device_name(), "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
