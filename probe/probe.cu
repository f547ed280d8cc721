// Probe of CUDA behaviours Conveyor's design depends on (not part of the project).
#include <cooperative_groups.h>
#include <cuda.h>
#include <cuda_runtime.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace cg = cooperative_groups;

#define CK(x)                                                                                                      \
  do {                                                                                                             \
    cudaError_t e_ = (x);                                                                                          \
    if (e_ != cudaSuccess) printf("  %s -> %s (line %d)\n", #x, cudaGetErrorName(e_), __LINE__);                    \
  } while (0)
#define RC(x) ([&] { cudaError_t e_ = (x); (void)cudaGetLastError(); return cudaGetErrorName(e_); }())

__global__ void cluster_size(int* out) {
  if (blockIdx.x == 0 && threadIdx.x == 0) *out = (int)cg::this_cluster().num_blocks();
}
__global__ void write_value(int* out, int v) { *out = v; }
__global__ void spin_until(volatile int* flag) {
  long long start = clock64();
  while (*flag == 0 && clock64() - start < 20000000000LL) {
  }
}

std::atomic<int> destroyed{0};
void CUDART_CB on_destroy(void* p) { destroyed.fetch_add(1); (void)p; }

cudaGraph_t capture_cluster(cudaStream_t s, int* out, unsigned cluster, int priority = 0, int domain = -1,
                            int carveout = -1) {
  cudaGraph_t g = nullptr;
  CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(4);
  cfg.blockDim = dim3(32);
  cfg.stream = s;
  cudaLaunchAttribute attrs[4];
  int n = 0;
  attrs[n].id = cudaLaunchAttributeClusterDimension;
  attrs[n].val.clusterDim.x = cluster;
  attrs[n].val.clusterDim.y = 1;
  attrs[n].val.clusterDim.z = 1;
  ++n;
  if (priority != 0) {
    attrs[n].id = cudaLaunchAttributePriority;
    attrs[n].val.priority = priority;
    ++n;
  }
  if (domain >= 0) {
    attrs[n].id = cudaLaunchAttributeMemSyncDomain;
    attrs[n].val.memSyncDomain = (cudaLaunchMemSyncDomain)domain;
    ++n;
  }
  if (carveout >= 0) {
    attrs[n].id = cudaLaunchAttributePreferredSharedMemoryCarveout;
    attrs[n].val.sharedMemCarveout = carveout;
    ++n;
  }
  cfg.attrs = attrs;
  cfg.numAttrs = n;
  CK(cudaLaunchKernelEx(&cfg, cluster_size, out));
  CK(cudaStreamEndCapture(s, &g));
  return g;
}

cudaGraphNode_t first_node(cudaGraph_t g) {
  size_t n = 1;
  cudaGraphNode_t node = nullptr;
  CK(cudaGraphGetNodes(g, &node, &n));
  return node;
}

void dump_attributes(const char* what, cudaGraphNode_t n) {
  printf("  attributes of %s:", what);
  for (int id = 1; id <= 16; ++id) {
    cudaLaunchAttributeValue v;
    memset(&v, 0, sizeof v);
    cudaError_t rc = cudaGraphKernelNodeGetAttribute(n, (cudaLaunchAttributeID)id, &v);
    (void)cudaGetLastError();
    if (rc != cudaSuccess)
      printf(" [%d:%s]", id, cudaGetErrorName(rc));
    else
      printf(" [%d:%x,%x,%x]", id, ((unsigned*)&v)[0], ((unsigned*)&v)[1], ((unsigned*)&v)[2]);
  }
  printf("\n");
}

int cond_probe();
int main(int argc, char** argv) {
  if (argc > 1) return cond_probe();
  int driver = 0;
  cudaDriverGetVersion(&driver);
  printf("driver %d\n", driver);
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  int* d = nullptr;
  CK(cudaMalloc(&d, 64));
  int h = 0;

  printf("== 1. cluster dims and cudaGraphExecUpdate\n");
  for (auto pair : {std::pair{1u, 2u}, std::pair{2u, 1u}, std::pair{2u, 4u}}) {
    cudaGraph_t a = capture_cluster(s, d, pair.first);
    cudaGraph_t b = capture_cluster(s, d, pair.second);
    if (pair.first == 1) {
      dump_attributes("captured cluster 1", first_node(a));
      dump_attributes("captured cluster 2", first_node(b));
    }
    cudaGraphExec_t e;
    CK(cudaGraphInstantiate(&e, a, 0));
    cudaGraphExecUpdateResultInfo info{};
    const char* rc = RC(cudaGraphExecUpdate(e, b, &info));
    CK(cudaGraphLaunch(e, s));
    CK(cudaStreamSynchronize(s));
    CK(cudaMemcpy(&h, d, 4, cudaMemcpyDeviceToHost));
    printf("  cluster %u -> %u: update %s result %d; replay ran cluster size %d\n", pair.first, pair.second, rc,
           (int)info.result, h);
    // per-node setter keeps?
    cudaGraphExecDestroy(e);
    cudaGraphDestroy(a);
    cudaGraphDestroy(b);
  }
  {
    // builder node + attribute set
    cudaGraph_t a, b;
    CK(cudaGraphCreate(&a, 0));
    CK(cudaGraphCreate(&b, 0));
    cudaKernelNodeParams p{};
    void* args[] = {&d};
    p.func = (void*)cluster_size;
    p.gridDim = dim3(4);
    p.blockDim = dim3(32);
    p.kernelParams = args;
    cudaGraphNode_t na, nb;
    CK(cudaGraphAddKernelNode(&na, a, nullptr, 0, &p));
    CK(cudaGraphAddKernelNode(&nb, b, nullptr, 0, &p));
    cudaLaunchAttributeValue v{};
    v.clusterDim.x = 2;
    v.clusterDim.y = 1;
    v.clusterDim.z = 1;
    CK(cudaGraphKernelNodeSetAttribute(nb, cudaLaunchAttributeClusterDimension, &v));
    dump_attributes("built, default", na);
    cudaGraphExec_t e;
    CK(cudaGraphInstantiate(&e, a, 0));
    cudaGraphExecUpdateResultInfo info{};
    const char* rc = RC(cudaGraphExecUpdate(e, b, &info));
    CK(cudaGraphLaunch(e, s));
    CK(cudaStreamSynchronize(s));
    CK(cudaMemcpy(&h, d, 4, cudaMemcpyDeviceToHost));
    printf("  built cluster 1 -> 2: update %s result %d; replay ran cluster size %d\n", rc, (int)info.result, h);
    cudaGraphExecDestroy(e);
    CK(cudaGraphInstantiate(&e, b, 0));
    CK(cudaGraphLaunch(e, s));
    CK(cudaStreamSynchronize(s));
    CK(cudaMemcpy(&h, d, 4, cudaMemcpyDeviceToHost));
    printf("  instantiated cluster 2 ran %d\n", h);
    // per-node setter through runtime keeps cluster?
    CK(cudaGraphExecKernelNodeSetParams(e, nb, &p));
    CK(cudaGraphLaunch(e, s));
    CK(cudaStreamSynchronize(s));
    CK(cudaMemcpy(&h, d, 4, cudaMemcpyDeviceToHost));
    printf("  after exec kernel setter ran %d\n", h);
    // timing of attribute reads
    auto t0 = std::chrono::steady_clock::now();
    cudaLaunchAttributeValue tmp;
    for (int i = 0; i < 100000; ++i) (void)cudaGraphKernelNodeGetAttribute(nb, cudaLaunchAttributeClusterDimension, &tmp);
    auto t1 = std::chrono::steady_clock::now();
    printf("  cudaGraphKernelNodeGetAttribute: %.1f ns per call\n",
           std::chrono::duration<double, std::nano>(t1 - t0).count() / 100000);
    CUDA_KERNEL_NODE_PARAMS kp{};
    t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < 100000; ++i) (void)cuGraphKernelNodeGetParams((CUgraphNode)nb, &kp);
    t1 = std::chrono::steady_clock::now();
    printf("  cuGraphKernelNodeGetParams: %.1f ns per call\n",
           std::chrono::duration<double, std::nano>(t1 - t0).count() / 100000);
    cudaKernel_t k;
    t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < 100000; ++i) (void)cudaGetKernel(&k, (const void*)cluster_size);
    t1 = std::chrono::steady_clock::now();
    printf("  cudaGetKernel: %.1f ns per call\n", std::chrono::duration<double, std::nano>(t1 - t0).count() / 100000);
    printf("  node read by driver: func %p kern %p ctx %p\n", (void*)kp.func, (void*)kp.kern, (void*)kp.ctx);
    cudaGraphExecDestroy(e);
    cudaGraphDestroy(a);
    cudaGraphDestroy(b);
  }

  printf("== 2. other attribute changes through cudaGraphExecUpdate\n");
  {
    int lo = 0, hi = 0;
    cudaDeviceGetStreamPriorityRange(&lo, &hi);
    struct variant {
      const char* name;
      int priority, domain, carveout;
    } vs[] = {{"priority", hi, -1, -1}, {"mem sync domain", 0, 1, -1}, {"carveout", 0, -1, 50}};
    for (auto v : vs) {
      for (unsigned long long flags : {0ULL, (unsigned long long)cudaGraphInstantiateFlagUseNodePriority}) {
        cudaGraph_t a = capture_cluster(s, d, 1);
        cudaGraph_t b = capture_cluster(s, d, 1, v.priority, v.domain, v.carveout);
        if (flags == 0) dump_attributes(v.name, first_node(b));
        cudaGraphExec_t e;
        CK(cudaGraphInstantiateWithFlags(&e, a, flags));
        cudaGraphExecUpdateResultInfo info{};
        const char* rc = RC(cudaGraphExecUpdate(e, b, &info));
        printf("  %s change (flags %llu): update %s result %d\n", v.name, flags, rc, (int)info.result);
        cudaGraphExecDestroy(e);
        cudaGraphDestroy(a);
        cudaGraphDestroy(b);
      }
    }
  }

  printf("== 3. zero-size copies and memsets\n");
  {
    printf("  eager memcpyAsync 0: %s\n", RC(cudaMemcpyAsync(d, d + 4, 0, cudaMemcpyDeviceToDevice, s)));
    printf("  eager memsetAsync 0: %s\n", RC(cudaMemsetAsync(d, 0, 0, s)));
    cudaGraph_t g = nullptr;
    CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    write_value<<<1, 1, 0, s>>>(d, 5);
    printf("  capture memcpyAsync 0: %s\n", RC(cudaMemcpyAsync(d, d + 4, 0, cudaMemcpyDeviceToDevice, s)));
    printf("  capture memsetAsync 0: %s\n", RC(cudaMemsetAsync(d, 0, 0, s)));
    write_value<<<1, 1, 0, s>>>(d + 1, 6);
    printf("  end capture: %s\n", RC(cudaStreamEndCapture(s, &g)));
    if (g) {
      size_t n = 0;
      cudaGraphGetNodes(g, nullptr, &n);
      printf("  captured nodes: %zu\n", n);
      cudaGraphExec_t e = nullptr;
      printf("  instantiate: %s\n", RC(cudaGraphInstantiate(&e, g, 0)));
      if (e) {
        printf("  launch: %s; sync %s\n", RC(cudaGraphLaunch(e, s)), RC(cudaStreamSynchronize(s)));
        cudaGraphExecDestroy(e);
      }
      cudaGraphDestroy(g);
    }
    cudaStreamCaptureStatus st;
    cudaStreamIsCapturing(s, &st);
    printf("  stream capturing after: %d\n", (int)st);
    CK(cudaGraphCreate(&g, 0));
    cudaGraphNode_t n1 = nullptr;
    printf("  builder memcpy1D 0: %s\n", RC(cudaGraphAddMemcpyNode1D(&n1, g, nullptr, 0, d, d + 4, 0, cudaMemcpyDeviceToDevice)));
    cudaMemsetParams mp{};
    mp.dst = d;
    mp.elementSize = 4;
    mp.width = 0;
    mp.height = 1;
    printf("  builder memset width 0: %s\n", RC(cudaGraphAddMemsetNode(&n1, g, nullptr, 0, &mp)));
    cudaGraphNode_t c = nullptr, m = nullptr;
    CK(cudaGraphAddMemcpyNode1D(&c, g, nullptr, 0, d, d + 4, 4, cudaMemcpyDeviceToDevice));
    mp.width = 1;
    CK(cudaGraphAddMemsetNode(&m, g, nullptr, 0, &mp));
    cudaGraphExec_t e;
    CK(cudaGraphInstantiate(&e, g, 0));
    printf("  exec memcpy setter 0: %s\n", RC(cudaGraphExecMemcpyNodeSetParams1D(e, c, d, d + 4, 0, cudaMemcpyDeviceToDevice)));
    mp.width = 0;
    printf("  exec memset setter 0: %s\n", RC(cudaGraphExecMemsetNodeSetParams(e, m, &mp)));
    cudaGraphExecDestroy(e);
    cudaGraphDestroy(g);
  }

  printf("== 4. relaunch of an allocating graph without free\n");
  {
    cudaGraph_t g;
    CK(cudaGraphCreate(&g, 0));
    cudaMemAllocNodeParams ap{};
    ap.poolProps.allocType = cudaMemAllocationTypePinned;
    ap.poolProps.location.type = cudaMemLocationTypeDevice;
    ap.poolProps.location.id = 0;
    ap.bytesize = 1 << 20;
    cudaGraphNode_t an;
    CK(cudaGraphAddMemAllocNode(&an, g, nullptr, 0, &ap));
    cudaGraphExec_t e;
    CK(cudaGraphInstantiate(&e, g, 0));
    printf("  first launch: %s\n", RC(cudaGraphLaunch(e, s)));
    printf("  sync: %s\n", RC(cudaStreamSynchronize(s)));
    printf("  second launch: %s\n", RC(cudaGraphLaunch(e, s)));
    printf("  sync: %s; later call: %s\n", RC(cudaStreamSynchronize(s)), RC(cudaMemsetAsync(d, 0, 4, s)));
    CK(cudaFree(ap.dptr));
    printf("  after cudaFree, launch: %s sync %s\n", RC(cudaGraphLaunch(e, s)), RC(cudaStreamSynchronize(s)));
    CK(cudaFree(ap.dptr));
    cudaGraphExecDestroy(e);
    cudaGraphDestroy(g);
  }

  printf("== 5. user objects: exec destroy while queued, update, child graphs\n");
  {
    int* flag = nullptr;
    CK(cudaHostAlloc(&flag, 4, cudaHostAllocMapped));
    *flag = 0;
    int* dflag = nullptr;
    CK(cudaHostGetDevicePointer(&dflag, flag, 0));
    cudaStream_t blocker;
    CK(cudaStreamCreateWithFlags(&blocker, cudaStreamNonBlocking));
    cudaEvent_t gate;
    CK(cudaEventCreateWithFlags(&gate, cudaEventDisableTiming));
    spin_until<<<1, 1, 0, blocker>>>(dflag);
    CK(cudaEventRecord(gate, blocker));
    CK(cudaStreamWaitEvent(s, gate, 0));

    cudaGraph_t g;
    CK(cudaGraphCreate(&g, 0));
    cudaGraphNode_t en;
    CK(cudaGraphAddEmptyNode(&en, g, nullptr, 0));
    cudaUserObject_t obj;
    CK(cudaUserObjectCreate(&obj, nullptr, on_destroy, 1, cudaUserObjectNoDestructorSync));
    CK(cudaGraphRetainUserObject(g, obj, 1, cudaGraphUserObjectMove));
    cudaGraphExec_t e;
    CK(cudaGraphInstantiate(&e, g, 0));
    CK(cudaGraphDestroy(g));
    CK(cudaGraphLaunch(e, s));
    CK(cudaGraphExecDestroy(e));
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    printf("  destroyed while launch queued: destructor ran %d (want 0)\n", destroyed.load());
    *flag = 1;
    CK(cudaStreamSynchronize(s));
    for (int i = 0; i < 100 && destroyed.load() == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    printf("  after the launch finished: destructor ran %d (want 1)\n", destroyed.load());

    // update: old references released once launches finish, new taken
    destroyed = 0;
    *flag = 0;
    spin_until<<<1, 1, 0, blocker>>>(dflag);
    CK(cudaEventRecord(gate, blocker));
    CK(cudaStreamWaitEvent(s, gate, 0));
    cudaGraph_t g1, g2;
    CK(cudaGraphCreate(&g1, 0));
    CK(cudaGraphCreate(&g2, 0));
    CK(cudaGraphAddEmptyNode(&en, g1, nullptr, 0));
    CK(cudaGraphAddEmptyNode(&en, g2, nullptr, 0));
    cudaUserObject_t o1, o2;
    CK(cudaUserObjectCreate(&o1, (void*)1, on_destroy, 1, cudaUserObjectNoDestructorSync));
    CK(cudaUserObjectCreate(&o2, (void*)2, on_destroy, 1, cudaUserObjectNoDestructorSync));
    CK(cudaGraphRetainUserObject(g1, o1, 1, cudaGraphUserObjectMove));
    CK(cudaGraphRetainUserObject(g2, o2, 1, cudaGraphUserObjectMove));
    CK(cudaGraphInstantiate(&e, g1, 0));
    CK(cudaGraphLaunch(e, s));
    cudaGraphExecUpdateResultInfo info{};
    printf("  update: %s\n", RC(cudaGraphExecUpdate(e, g2, &info)));
    CK(cudaGraphDestroy(g1));
    CK(cudaGraphDestroy(g2));
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    printf("  after update + both graphs destroyed, launch queued: destructors %d (want 0)\n", destroyed.load());
    *flag = 1;
    CK(cudaStreamSynchronize(s));
    for (int i = 0; i < 100 && destroyed.load() == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    printf("  after launch finished: destructors %d (want 1: old released, new held)\n", destroyed.load());
    CK(cudaGraphExecDestroy(e));
    for (int i = 0; i < 100 && destroyed.load() < 2; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    printf("  after exec destroyed: destructors %d (want 2)\n", destroyed.load());

    // child graph: does the parent node's copy hold the body's references?
    destroyed = 0;
    cudaGraph_t body, parent;
    CK(cudaGraphCreate(&body, 0));
    CK(cudaGraphCreate(&parent, 0));
    CK(cudaGraphAddEmptyNode(&en, body, nullptr, 0));
    CK(cudaUserObjectCreate(&o1, (void*)3, on_destroy, 1, cudaUserObjectNoDestructorSync));
    CK(cudaGraphRetainUserObject(body, o1, 1, cudaGraphUserObjectMove));
    cudaGraphNode_t cn;
    CK(cudaGraphAddChildGraphNode(&cn, parent, nullptr, 0, body));
    CK(cudaGraphDestroy(body));
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    printf("  body destroyed after embedding: destructor ran %d (0 = child copy holds the reference)\n",
           destroyed.load());
    CK(cudaGraphDestroy(parent));
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    printf("  parent destroyed: destructor ran %d\n", destroyed.load());
    // cudaGraphClone
    destroyed = 0;
    CK(cudaGraphCreate(&g1, 0));
    CK(cudaUserObjectCreate(&o1, (void*)4, on_destroy, 1, cudaUserObjectNoDestructorSync));
    CK(cudaGraphRetainUserObject(g1, o1, 1, cudaGraphUserObjectMove));
    CK(cudaGraphClone(&g2, g1));
    CK(cudaGraphDestroy(g1));
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    printf("  original destroyed after clone: destructor ran %d (0 = clone holds it)\n", destroyed.load());
    CK(cudaGraphDestroy(g2));
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    printf("  clone destroyed: destructor ran %d\n", destroyed.load());
    // user object create + retain cost
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < 10000; ++i) {
      cudaGraph_t t;
      cudaGraphCreate(&t, 0);
      cudaUserObjectCreate(&o1, nullptr, on_destroy, 1, cudaUserObjectNoDestructorSync);
      cudaGraphRetainUserObject(t, o1, 1, cudaGraphUserObjectMove);
      cudaGraphDestroy(t);
    }
    auto t1 = std::chrono::steady_clock::now();
    printf("  graph create + user object + destroy: %.2f us\n",
           std::chrono::duration<double, std::micro>(t1 - t0).count() / 10000);
    t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < 10000; ++i) {
      cudaGraph_t t;
      cudaGraphCreate(&t, 0);
      cudaGraphDestroy(t);
    }
    t1 = std::chrono::steady_clock::now();
    printf("  graph create + destroy: %.2f us\n", std::chrono::duration<double, std::micro>(t1 - t0).count() / 10000);
    cudaEvent_t ev;
    cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
    t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < 10000; ++i) cudaEventRecord(ev, s);
    t1 = std::chrono::steady_clock::now();
    printf("  cudaEventRecord: %.2f us\n", std::chrono::duration<double, std::micro>(t1 - t0).count() / 10000);
    cudaStreamSynchronize(s);
  }

  return 0;
}

int cond_probe() {
  int* d = nullptr;
  CK(cudaMalloc(&d, 64));
  printf("== 6. fork into a stream capturing another graph, from a conditional body capture (raw API)\n");
  {
    cudaStream_t s1, s2;
    cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking);
    cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking);
    cudaGraph_t g, g2;
    cudaGraphCreate(&g, 0);
    cudaGraphConditionalHandle hnd;
    CK(cudaGraphConditionalHandleCreate(&hnd, g, 0, cudaGraphCondAssignDefault));
    cudaGraphNodeParams np{};
    np.type = cudaGraphNodeTypeConditional;
    np.conditional.handle = hnd;
    np.conditional.type = cudaGraphCondTypeIf;
    np.conditional.size = 1;
    cudaGraphNode_t cn;
    CK(cudaGraphAddNode(&cn, g, nullptr, nullptr, 0, &np));
    cudaGraph_t bodyg = np.conditional.phGraph_out[0];
    CK(cudaStreamBeginCapture(s2, cudaStreamCaptureModeThreadLocal));
    write_value<<<1, 1, 0, s2>>>(d, 1);
    CK(cudaStreamBeginCaptureToGraph(s1, bodyg, nullptr, nullptr, 0, cudaStreamCaptureModeThreadLocal));
    write_value<<<1, 1, 0, s1>>>(d, 2);
    cudaEvent_t ev;
    cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
    printf("  record on s1: %s\n", RC(cudaEventRecord(ev, s1)));
    fflush(stdout);
    printf("  wait on s2 (capturing another graph): %s\n", RC(cudaStreamWaitEvent(s2, ev, 0)));
    fflush(stdout);
    cudaStreamCaptureStatus st1, st2;
    cudaStreamIsCapturing(s1, &st1);
    cudaStreamIsCapturing(s2, &st2);
    printf("  status s1 %d s2 %d\n", (int)st1, (int)st2);
    fflush(stdout);
    printf("  end s1: %s\n", RC(cudaStreamEndCapture(s1, &g2)));
    fflush(stdout);
    printf("  end s2: %s\n", RC(cudaStreamEndCapture(s2, &g2)));
    fflush(stdout);
  }
  return 0;
}
