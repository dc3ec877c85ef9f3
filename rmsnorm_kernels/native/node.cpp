// The native node: launch plans (rmsnorm_kernels/launch_plans.py) replayed from C++, inside a C++ autograd node.
//
// A Python `autograd.Function` costs a training loop more host time per backward than F.rms_norm's whole backward
// (bench/NOTES.md, "Eighth session"). This file removes the Python from the steady state: a plan recorded by the
// Python path is described once (rmsnorm_kernels/native/__init__.py) and registered here under the call's key;
// later calls with that key allocate the plan's outputs with ATen, launch each recorded cubin with
// cuLaunchKernelEx on the current stream, and (when a gradient is wanted) hand autograd a C++ node whose backward
// replays the backward plan the same way. Nothing is chosen here: every constant was recorded by the Python path.
//
// A launch is either a recorded cubin (only in the CUDA build: -DRMSNORM_NATIVE_CUDA) or, for the tests on a
// machine without a GPU, a Python stand-in called with the call's tensors.
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/utils.h>
#include <torch/csrc/autograd/grad_mode.h>
#include <torch/csrc/autograd/saved_variable.h>
#include <torch/csrc/utils/pybind.h>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#ifdef RMSNORM_NATIVE_CUDA
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda.h>
#include <dlfcn.h>
#endif

namespace py = pybind11;
using torch::autograd::variable_list;

namespace {

// As rmsnorm_kernels/launch_plans.py: ZERO_SCRATCH is kept scratch that starts zero and that the plan's kernels
// leave zero (the atomic backward's accumulator, zeroed by its drain kernel).
enum OutputKind { EMPTY = 0, ZEROS = 1, SCRATCH = 2, ZERO_SCRATCH = 3 };

bool kept_kind(int kind) { return kind == SCRATCH || kind == ZERO_SCRATCH; }

struct Output {
  std::vector<int64_t> shape;
  at::ScalarType dtype;
  int kind;
};

struct Param {
  int slot;       // >= 0: the data pointer of the call's tensor `slot`; < 0: `bits`
  uint64_t bits;  // a constant, in the low bytes (the kernel reads its parameter's width from here)
};

struct Launch {
  uint64_t function = 0;
  unsigned grid[3] = {1, 1, 1};
  int num_warps = 4, num_ctas = 1, shared = 0;
  bool pdl = false, cooperative = false;
  std::vector<Param> params;
  PyObject* stand_in = nullptr;  // a Python callable (tests); owned, never released (plans live for the process)
};

struct Plan {
  int n_inputs = 0;
  std::vector<Output> outputs;
  std::vector<Launch> launches;
  std::vector<int> returned;
};

std::atomic<int> g_poison{0};  // poisoning depth (rmsnorm_kernels/poison.py): outputs start as NaN
std::atomic<int64_t> g_calls{0}, g_nodes{0}, g_backwards{0};

#ifdef RMSNORM_NATIVE_CUDA
using LaunchEx = CUresult (*)(const CUlaunchConfig*, CUfunction, void**, void**);
using CtxGetCurrent = CUresult (*)(CUcontext*);
using CtxSetCurrent = CUresult (*)(CUcontext);
using DeviceGet = CUresult (*)(CUdevice*, int);
using PrimaryRetain = CUresult (*)(CUcontext*, CUdevice);
using ErrorString = CUresult (*)(CUresult, const char**);
using StreamIsCapturing = CUresult (*)(CUstream, CUstreamCaptureStatus*);

struct Driver {
  LaunchEx launch = nullptr;
  CtxGetCurrent ctx_get = nullptr;
  CtxSetCurrent ctx_set = nullptr;
  DeviceGet device_get = nullptr;
  PrimaryRetain primary_retain = nullptr;
  ErrorString error_string = nullptr;
  StreamIsCapturing is_capturing = nullptr;
  std::string error;
};

const Driver& driver() {
  static Driver d = [] {
    Driver r;
    void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (!lib) lib = dlopen("libcuda.so.1", RTLD_NOW);
    if (!lib) {
      r.error = "libcuda.so.1 not found";
      return r;
    }
    r.launch = reinterpret_cast<LaunchEx>(dlsym(lib, "cuLaunchKernelEx"));
    r.ctx_get = reinterpret_cast<CtxGetCurrent>(dlsym(lib, "cuCtxGetCurrent"));
    r.ctx_set = reinterpret_cast<CtxSetCurrent>(dlsym(lib, "cuCtxSetCurrent"));
    r.device_get = reinterpret_cast<DeviceGet>(dlsym(lib, "cuDeviceGet"));
    r.primary_retain = reinterpret_cast<PrimaryRetain>(dlsym(lib, "cuDevicePrimaryCtxRetain"));
    r.error_string = reinterpret_cast<ErrorString>(dlsym(lib, "cuGetErrorString"));
    r.is_capturing = reinterpret_cast<StreamIsCapturing>(dlsym(lib, "cuStreamIsCapturing"));
    if (!r.launch || !r.ctx_get || !r.ctx_set || !r.device_get || !r.primary_retain || !r.is_capturing)
      r.error = "a driver entry point is missing";
    return r;
  }();
  return d;
}

void check(CUresult r, const char* what) {
  if (r == CUDA_SUCCESS) return;
  const char* text = nullptr;
  if (driver().error_string) driver().error_string(r, &text);
  TORCH_CHECK(false, "rmsnorm native node: ", what, " failed: ", text ? text : "unknown error", " (", int(r), ")");
}

// As Triton's launcher does before a launch: a thread that never touched this device has no current context.
void ensure_context(int index) {
  const Driver& d = driver();
  TORCH_CHECK(d.error.empty(), "rmsnorm native node: ", d.error);
  CUcontext ctx = nullptr;
  check(d.ctx_get(&ctx), "cuCtxGetCurrent");
  if (ctx) return;
  CUdevice dev;
  check(d.device_get(&dev, index), "cuDeviceGet");
  check(d.primary_retain(&ctx, dev), "cuDevicePrimaryCtxRetain");
  check(d.ctx_set(ctx), "cuCtxSetCurrent");
}

// Whether work on `stream` is being captured into a CUDA graph. An answer the driver refuses to give (the legacy
// stream while another stream captures in global mode) counts as capturing: the call then allocates afresh.
bool capturing(CUstream stream) {
  const Driver& d = driver();
  TORCH_CHECK(d.error.empty(), "rmsnorm native node: ", d.error);
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  return d.is_capturing(stream, &status) != CUDA_SUCCESS || status != CU_STREAM_CAPTURE_STATUS_NONE;
}

// What Triton's generated launcher does (triton/backends/nvidia/driver.py, `_launch`): the kernel's parameters in
// signature order without constexprs, then the global and profile scratch pointers (null: plans hold only
// kernels that need neither), the PDL / cooperative / cluster attributes from the compiled kernel's metadata.
void launch_cubin(const Launch& l, const std::vector<at::Tensor>& values, CUstream stream) {
  if (uint64_t(l.grid[0]) * l.grid[1] * l.grid[2] == 0) return;
  const size_t n = l.params.size();
  uint64_t storage[64];
  void* params[66];
  uint64_t scratch[2] = {0, 0};
  TORCH_CHECK(n <= 64, "rmsnorm native node: too many kernel parameters");
  for (size_t i = 0; i < n; ++i) {
    const Param& p = l.params[i];
    storage[i] = p.slot >= 0 ? reinterpret_cast<uint64_t>(values[p.slot].data_ptr()) : p.bits;
    params[i] = &storage[i];
  }
  params[n] = &scratch[0];
  params[n + 1] = &scratch[1];
  CUlaunchAttribute attrs[4];
  unsigned count = 0;
  if (l.pdl) {
    attrs[count].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    attrs[count].value.programmaticStreamSerializationAllowed = 1;
    ++count;
  }
  if (l.cooperative) {
    attrs[count].id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
    attrs[count].value.cooperative = 1;
    ++count;
  }
  if (l.num_ctas != 1) {
    attrs[count] = CUlaunchAttribute{};
    attrs[count].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    attrs[count].value.clusterDim.x = l.num_ctas;
    attrs[count].value.clusterDim.y = 1;
    attrs[count].value.clusterDim.z = 1;
    ++count;
    attrs[count] = CUlaunchAttribute{};
    attrs[count].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE;
    attrs[count].value.clusterSchedulingPolicyPreference = CU_CLUSTER_SCHEDULING_POLICY_SPREAD;
    ++count;
  }
  CUlaunchConfig config{};
  config.gridDimX = l.grid[0] * l.num_ctas;
  config.gridDimY = l.grid[1];
  config.gridDimZ = l.grid[2];
  config.blockDimX = 32 * l.num_warps;
  config.blockDimY = 1;
  config.blockDimZ = 1;
  config.sharedMemBytes = l.shared;
  config.hStream = stream;
  config.attrs = attrs;
  config.numAttrs = count;
  check(driver().launch(&config, reinterpret_cast<CUfunction>(l.function), params, nullptr), "cuLaunchKernelEx");
}
#endif

bool has_cubins(const Plan& plan) {
  for (const Launch& l : plan.launches)
    if (!l.stand_in) return true;
  return false;
}

bool has_scratch(const Plan& plan) {
  for (const Output& o : plan.outputs)
    if (kept_kind(o.kind)) return true;
  return false;
}

// Scratch buffers (outputs a call fills and reads itself and never returns: the persistent backward's dγ partials,
// the rstd of a no-grad forward) are kept for the next call of the same plan on the same stream, as the Python
// replay keeps them (rmsnorm_kernels/launch_plans.py, `_SCRATCH`): kernels on one stream run in order, so a buffer is
// never in use by two calls at once. A call under graph capture or while poisoning gets its own. The map is never
// destroyed (its CUDA tensors must not be freed after the driver has gone at exit); it is emptied when it is full.
struct ScratchKey {
  const Plan* plan;
  int output;
  uintptr_t stream;  // a plan belongs to one device, and a stream handle to one device's streams
  bool operator==(const ScratchKey& o) const { return plan == o.plan && output == o.output && stream == o.stream; }
};

struct ScratchHash {
  size_t operator()(const ScratchKey& k) const {
    return std::hash<const void*>()(k.plan) ^ (std::hash<uintptr_t>()(k.stream) << 1) ^ (size_t(k.output) << 7);
  }
};

constexpr size_t kScratchEntries = 16;
std::mutex g_scratch_mutex;  // the backward runs on autograd's device threads, without the GIL
auto* g_scratch = new std::unordered_map<ScratchKey, at::Tensor, ScratchHash>();

at::Tensor kept_scratch(const ScratchKey& key, at::IntArrayRef sizes, const at::TensorOptions& options, bool zero) {
  std::lock_guard<std::mutex> lock(g_scratch_mutex);
  auto it = g_scratch->find(key);
  if (it != g_scratch->end()) return it->second;
  if (g_scratch->size() >= kScratchEntries) g_scratch->clear();
  return g_scratch->emplace(key, zero ? at::zeros(sizes, options) : at::empty(sizes, options)).first->second;
}

// One call of a plan: the inputs, then every output the plan allocates (NaN-filled while poisoning, as
// rmsnorm_kernels.poison would; scratch kept per stream, fresh under capture or poisoning), then the launches.
// ``shape``: the shape to give the first returned tensor (the caller's x shape: its elements are the plan's rows,
// contiguous, so the kernels see the same memory; the caller gets no view to unwrap).
std::vector<at::Tensor> run_plan(const Plan& plan, std::vector<at::Tensor> values, const at::Device& device,
                                 at::IntArrayRef shape = {}) {
  values.reserve(values.size() + plan.outputs.size());
  const bool poisoned = g_poison.load(std::memory_order_relaxed) > 0;
  bool keep = !poisoned;  // whether this call's scratch outputs are the kept ones
  uintptr_t stream_id = 0;
#ifdef RMSNORM_NATIVE_CUDA
  CUstream stream = nullptr;
  if (device.is_cuda()) {
    stream = reinterpret_cast<CUstream>(c10::cuda::getCurrentCUDAStream(device.index()).stream());
    stream_id = reinterpret_cast<uintptr_t>(stream);
    if (has_cubins(plan)) ensure_context(device.index());
    if (keep && has_scratch(plan)) keep = !capturing(stream);
  }
#endif
  const int first = plan.returned.empty() ? -1 : plan.returned[0];
  for (const Output& o : plan.outputs) {
    auto options = at::TensorOptions().dtype(o.dtype).device(device);
    const int slot = int(values.size());
    at::IntArrayRef sizes = (slot == first && !shape.empty()) ? shape : at::IntArrayRef(o.shape);
    if (kept_kind(o.kind) && keep)
      values.push_back(kept_scratch(ScratchKey{&plan, slot, stream_id}, sizes, options, o.kind == ZERO_SCRATCH));
    else if (o.kind == ZEROS || o.kind == ZERO_SCRATCH)
      values.push_back(at::zeros(sizes, options));
    else if (poisoned)
      values.push_back(at::full(sizes, NAN, options));
    else
      values.push_back(at::empty(sizes, options));
  }
  for (const Launch& l : plan.launches) {
    if (l.stand_in) {
      py::gil_scoped_acquire gil;
      py::list tensors;
      for (const at::Tensor& t : values) tensors.append(py::cast(t));
      py::reinterpret_borrow<py::object>(l.stand_in)(tensors);
      continue;
    }
#ifdef RMSNORM_NATIVE_CUDA
    launch_cubin(l, values, stream);
#else
    TORCH_CHECK(false, "rmsnorm native node: built without CUDA, cannot launch a cubin");
#endif
  }
  std::vector<at::Tensor> out;
  out.reserve(plan.returned.size());
  for (int s : plan.returned) out.push_back(s >= 0 ? values[s] : at::Tensor());
  return out;
}

// ------------------------------------------------------------------------------------------- the registry
struct Key {
  int64_t m, n, strategy;
  int64_t eps_bits;
  int8_t x_dtype, w_dtype, device_type, device_index;
  bool operator==(const Key& o) const {
    return m == o.m && n == o.n && strategy == o.strategy && eps_bits == o.eps_bits && x_dtype == o.x_dtype &&
           w_dtype == o.w_dtype && device_type == o.device_type && device_index == o.device_index;
  }
};

struct KeyHash {
  size_t operator()(const Key& k) const {
    uint64_t h = 1469598103934665603ull;
    auto mix = [&h](uint64_t v) { h = (h ^ v) * 1099511628211ull; };
    mix(k.m); mix(k.n); mix(k.strategy); mix(k.eps_bits);
    mix((uint64_t(uint8_t(k.x_dtype)) << 24) | (uint64_t(uint8_t(k.w_dtype)) << 16) |
        (uint64_t(uint8_t(k.device_type)) << 8) | uint8_t(k.device_index));
    return h;
  }
};

struct Entry {
  const Plan* forward = nullptr;   // (x2d, γ) -> (y2d, rstd)
  const Plan* backward = nullptr;  // (dy2d, x2d, γ, rstd) -> (dx2d, dγ)
};

// Plans are never freed: a node made before a `clear()` may still replay its backward plan.
std::unordered_map<Key, Entry, KeyHash> g_entries;  // touched only with the GIL held

int64_t eps_bits(double eps) {
  int64_t b;
  std::memcpy(&b, &eps, sizeof b);
  return b;
}

Key make_key(int64_t m, int64_t n, at::ScalarType x_dtype, at::ScalarType w_dtype, const at::Device& device,
             double eps, int64_t strategy) {
  return Key{m, n, strategy, eps_bits(eps), int8_t(x_dtype), int8_t(w_dtype), int8_t(device.type()),
             int8_t(device.index())};
}

bool aligned(const at::Tensor& t) { return (reinterpret_cast<uintptr_t>(t.data_ptr()) & 15) == 0; }

// γ as the kernels read it: the weight itself, or weight + offset in fp32 (Gemma's (1 + weight)).
at::Tensor kernel_weight(const at::Tensor& weight, double offset) {
  return offset == 0 ? weight : weight.to(at::kFloat).add(offset);
}

// ------------------------------------------------------------------------------------------- the node
// A hand-made autograd node (as PyTorch's generated ones are) rather than torch::autograd::Function: no
// string-keyed saved_data, no views of the outputs to wrap. x and γ are SavedVariables (so an in-place change of
// either before the backward is an error, as for any node); rstd is this node's own buffer.
struct NativeBackward : public torch::autograd::Node {
  torch::autograd::SavedVariable x_, w_;
  at::Tensor rstd_;
  const Plan* plan_ = nullptr;
  at::ScalarType weight_dtype_ = at::kFloat;
  int64_t n_ = 0;

  std::string name() const override { return "RMSNormNativeBackward"; }

  void release_variables() override {
    x_.reset_data();
    w_.reset_data();
    rstd_.reset();
  }

  variable_list apply(variable_list&& grads) override {
    TORCH_CHECK(rstd_.defined(), "rmsnorm native node: the backward ran twice without retain_graph=True");
    at::Tensor x = x_.unpack(getptr());
    at::Tensor w = w_.unpack(getptr());
    at::Tensor dy = grads[0];
    if (!dy.defined()) return {at::Tensor(), at::Tensor()};
    at::Tensor x2d = x.dim() == 2 ? x : x.view({-1, n_});
    if (dy.scalar_type() != x.scalar_type()) dy = dy.to(x.scalar_type());
    if (!dy.is_contiguous()) dy = dy.contiguous();
    if (dy.dim() != 2) dy = dy.view({-1, n_});
    if (!aligned(dy)) dy = dy.clone();  // Triton specialized the kernels on 16-byte aligned pointers
    auto out = run_plan(*plan_, {dy, x2d, w, rstd_}, x.device(), x.sizes());
    at::Tensor dw = out[1].scalar_type() == weight_dtype_ ? out[1] : out[1].to(weight_dtype_);
    g_backwards.fetch_add(1, std::memory_order_relaxed);
    return {out[0], dw};
  }
};

// The entry point: y, or None where no plan is registered for the call (the caller takes the Python path, which
// records and registers one) or the call is one the plans were not recorded for.
py::object rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps, double offset, int64_t strategy) {
  if (x.dim() < 1 || weight.dim() != 1 || !x.is_contiguous() || !weight.is_contiguous()) return py::none();
  const int64_t n = x.size(-1);
  if (n == 0 || weight.size(0) != n || x.device() != weight.device()) return py::none();
  const at::ScalarType w_dtype = offset == 0 ? weight.scalar_type() : at::kFloat;
  const bool grad = at::GradMode::is_enabled() && (x.requires_grad() || weight.requires_grad());
  auto it = g_entries.find(make_key(x.numel() / n, n, x.scalar_type(), w_dtype, x.device(), eps, grad ? strategy : -1));
  if (it == g_entries.end() || !aligned(x) || (offset == 0 && !aligned(weight))) return py::none();
#ifdef RMSNORM_NATIVE_CUDA
  if (x.is_cuda() && x.device().index() != c10::cuda::current_device()) return py::none();
#endif
  g_calls.fetch_add(1, std::memory_order_relaxed);
  const Entry& e = it->second;
  at::Tensor y, w, rstd;
  {
    at::NoGradGuard no_grad;  // the kernels' tensors carry no history; the node below is the output's
    at::Tensor x2d = x.dim() == 2 ? x : x.view({-1, n});
    w = kernel_weight(weight, offset);
    auto out = run_plan(*e.forward, {x2d, w}, x.device(), x.sizes());
    y = std::move(out[0]);
    rstd = std::move(out[1]);
  }
  if (grad) {
#ifdef RMSNORM_INTRUSIVE_NODE  // torch >= 2.12: nodes are intrusive_ptr targets
    auto node = c10::make_intrusive<NativeBackward>();
#else
    auto node = std::shared_ptr<NativeBackward>(new NativeBackward(), torch::autograd::deleteNode);
#endif
    node->set_next_edges(torch::autograd::collect_next_edges(x, weight));
    node->x_ = torch::autograd::SavedVariable(x, false);
    node->w_ = torch::autograd::SavedVariable(w, false);
    node->rstd_ = std::move(rstd);
    node->plan_ = e.backward;
    node->weight_dtype_ = weight.scalar_type();
    node->n_ = n;
    torch::autograd::set_history(y, node);
    g_nodes.fetch_add(1, std::memory_order_relaxed);
  }
  return py::cast(std::move(y));
}

// A plan from its description (rmsnorm_kernels/native/__init__.py, `describe`): outputs [(shape, dtype, kind)],
// launches [(function, (g0, g1, g2), num_warps, num_ctas, shared, pdl, cooperative, [(slot, bits)]) or a callable],
// returned [slot or -1].
int64_t make_plan(int n_inputs, py::list outputs, py::list launches, std::vector<int> returned) {
  auto* plan = new Plan();
  plan->n_inputs = n_inputs;
  for (py::handle o : outputs) {
    auto t = o.cast<py::tuple>();
    const int kind = t[2].cast<int>();
    TORCH_CHECK(kind >= EMPTY && kind <= ZERO_SCRATCH, "an output kind is 0 to 3, not ", kind);
    plan->outputs.push_back(Output{t[0].cast<std::vector<int64_t>>(), t[1].cast<at::ScalarType>(), kind});
  }
  const int n_values = n_inputs + int(plan->outputs.size());
  for (py::handle item : launches) {
    Launch l;
    if (PyCallable_Check(item.ptr())) {
      l.stand_in = item.ptr();
      Py_INCREF(l.stand_in);
    } else {
      auto t = item.cast<py::tuple>();
      TORCH_CHECK(t.size() == 8, "a launch description has 8 fields");
      l.function = t[0].cast<uint64_t>();
      auto grid = t[1].cast<std::vector<unsigned>>();
      TORCH_CHECK(grid.size() == 3, "a grid has 3 dimensions");
      std::copy(grid.begin(), grid.end(), l.grid);
      l.num_warps = t[2].cast<int>();
      l.num_ctas = t[3].cast<int>();
      l.shared = t[4].cast<int>();
      l.pdl = t[5].cast<bool>();
      l.cooperative = t[6].cast<bool>();
      for (py::handle p : t[7].cast<py::list>()) {
        auto pt = p.cast<py::tuple>();
        Param param{pt[0].cast<int>(), pt[1].cast<uint64_t>()};
        TORCH_CHECK(param.slot < n_values, "a parameter names tensor ", param.slot, " of ", n_values);
        l.params.push_back(param);
      }
      TORCH_CHECK(l.params.size() <= 64, "too many kernel parameters");
    }
    plan->launches.push_back(std::move(l));
  }
  for (int s : returned) {
    TORCH_CHECK(s < n_values, "a returned slot names tensor ", s, " of ", n_values);
    TORCH_CHECK(s < n_inputs || !kept_kind(plan->outputs[s - n_inputs].kind),
                "a returned slot (", s, ") is scratch: a kept buffer would be shared by the callers of two calls");
  }
  plan->returned = std::move(returned);
  return reinterpret_cast<int64_t>(plan);
}

// Register plans for a key. A key's plans are set once: a later registration only fills what is missing, so a
// node made earlier never sees its plan change.
void register_plans(int64_t m, int64_t n, at::ScalarType x_dtype, at::ScalarType w_dtype, const std::string& device,
                    double eps, int64_t strategy, int64_t forward, int64_t backward) {
  TORCH_CHECK(forward != 0, "a forward plan is needed");
  const at::Device dev(device);
  const Plan* fwd = reinterpret_cast<const Plan*>(forward);
  TORCH_CHECK(!(dev.is_cpu() && has_cubins(*fwd)), "a plan of cubins needs a CUDA device");
  Entry& plain = g_entries[make_key(m, n, x_dtype, w_dtype, dev, eps, -1)];
  if (!plain.forward) plain.forward = fwd;
  if (backward != 0) {
    Entry& e = g_entries[make_key(m, n, x_dtype, w_dtype, dev, eps, strategy)];
    if (!e.forward) e.forward = fwd;
    if (!e.backward) e.backward = reinterpret_cast<const Plan*>(backward);
  }
}

py::tuple replay(int64_t plan, std::vector<at::Tensor> inputs, const std::string& device) {
  auto out = run_plan(*reinterpret_cast<const Plan*>(plan), std::move(inputs), at::Device(device));
  py::tuple t(out.size());
  for (size_t i = 0; i < out.size(); ++i) t[i] = out[i].defined() ? py::cast(out[i]) : py::none();
  return t;
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "rmsnorm-dashboard's native node: launch plans replayed from C++ inside a C++ autograd node";
  m.def("rms_norm", &rms_norm, "y, or None where no plan is registered for the call");
  m.def("make_plan", &make_plan);
  m.def("register_plans", &register_plans);
  m.def("replay", &replay, "one call of a plan, without autograd");
  m.def("clear", [] {
    g_entries.clear();
    std::lock_guard<std::mutex> lock(g_scratch_mutex);
    g_scratch->clear();
  });
  m.def("keys", [] { return g_entries.size(); });
  m.def("set_poison", [](int depth) { g_poison.store(depth); });
  m.def("stats", [] {
    return py::dict(py::arg("calls") = g_calls.load(), py::arg("nodes") = g_nodes.load(),
                    py::arg("backwards") = g_backwards.load(), py::arg("scratch") = [] {
                      std::lock_guard<std::mutex> lock(g_scratch_mutex);
                      return g_scratch->size();
                    }());
  });
#ifdef RMSNORM_NATIVE_CUDA
  m.attr("cuda") = true;
#else
  m.attr("cuda") = false;
#endif
}
