// The dense f32 layer on CUDA through cuBLAS's SGEMM (exact f32 products, no TF32). cuBLAS is
// opened with dlopen at the first use: linking it would map ~570 MB of libraries and cost every
// process ~200 MB of RSS and 0.1 s at start, GPU or not. Row-major [rows, cols] arrays are
// cuBLAS's column-major [cols, rows], so x W^T is C^T = W^T-as-stored^T x^T-as-stored.
#include <cublas_api.h>
#include <dlfcn.h>

#include <climits>
#include <mutex>

#include "backends/cuda/kernels.h"
#include "backends/cuda/launch.h"

namespace nexus::cuda {
namespace {

struct Blas {
  cublasStatus_t (*create)(cublasHandle_t*) = nullptr;
  cublasStatus_t (*sgemm)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                          const float*, const float*, int, const float*, int, const float*, float*,
                          int) = nullptr;
  Status status = Status::ok();
};

const Blas& blas() {
  static Blas b;
  static std::once_flag once;
  std::call_once(once, [] {
    void* lib = nullptr;
    for (const char* name : {"libcublas.so.13", "libcublas.so.12", "libcublas.so"})
      if ((lib = dlopen(name, RTLD_NOW | RTLD_LOCAL)) != nullptr) break;
    if (lib == nullptr) {
      b.status = Status::error(std::string("cannot open cuBLAS (libcublas.so): ") + dlerror());
      return;
    }
    b.create = reinterpret_cast<decltype(b.create)>(dlsym(lib, "cublasCreate_v2"));
    b.sgemm = reinterpret_cast<decltype(b.sgemm)>(dlsym(lib, "cublasSgemm_v2"));
    if (b.create == nullptr || b.sgemm == nullptr)
      b.status = Status::error("cuBLAS lacks cublasCreate_v2 or cublasSgemm_v2");
  });
  return b;
}

// The handle of the current device (one device for now), made at first use.
cublasHandle_t handle() {
  static cublasHandle_t h = nullptr;
  static std::once_flag once;
  std::call_once(once, [] {
    if (blas().status && blas().create(&h) != CUBLAS_STATUS_SUCCESS) h = nullptr;
  });
  if (h == nullptr)
    throw Error("[dense] cannot create a cuBLAS handle: " + blas().status.message());
  return h;
}

int as_int(int64_t v, const char* op) {
  if (v > INT_MAX) throw Error(std::string("[") + op + "] a dimension exceeds cuBLAS's int");
  return static_cast<int>(v);
}

void gemm(const char* op, cublasOperation_t ta, cublasOperation_t tb, int64_t m, int64_t n,
          int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
          int64_t ldc) {
  const float one = 1.0f;
  if (blas().sgemm(handle(), ta, tb, as_int(m, op), as_int(n, op), as_int(k, op), &one, a,
                   as_int(lda, op), b, as_int(ldb, op), &beta, c,
                   as_int(ldc, op)) != CUBLAS_STATUS_SUCCESS)
    throw Error(std::string("[") + op + "] cublasSgemm failed");
}

// out[r, :] (+)= bias for every row.
__global__ void bias_rows(float* out, const float* bias, int64_t n, int64_t oc, bool add) {
  for (int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; t < n * oc;
       t += static_cast<int64_t>(gridDim.x) * blockDim.x)
    out[t] = (add ? out[t] : 0.0f) + bias[t % oc];
}

// dbias[j] += sum over rows of dout[r, j], the rows in order.
__global__ void column_sums(float* dbias, const float* dout, int64_t n, int64_t oc) {
  const int64_t j = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (j >= oc) return;
  float s = 0.0f;
  for (int64_t r = 0; r < n; ++r) s += dout[r * oc + j];
  dbias[j] += s;
}

bool usable() { return device_present() && static_cast<bool>(blas().status); }

void dense(const DenseArgs& a, ThreadPool*) {
  if (a.n == 0) return;
  float beta = 0.0f;
  if (a.add_rows != nullptr) {
    if (a.add_rows != a.out)
      cudaMemcpyAsync(a.out, a.add_rows, a.n * a.oc * sizeof(float), cudaMemcpyDeviceToDevice);
    beta = 1.0f;
  }
  if (a.bias != nullptr) {
    bias_rows<<<blocks_for(a.n * a.oc), kThreads>>>(a.out, a.bias, a.n, a.oc, beta != 0.0f);
    beta = 1.0f;
  }
  gemm("dense", CUBLAS_OP_T, CUBLAS_OP_N, a.oc, a.n, a.c, a.w, a.c, a.inp, a.c, beta, a.out, a.oc);
  finish("dense");
}

void dense_backward(const DenseBackwardArgs& a, ThreadPool*) {
  if (a.n == 0) return;
  if (a.dinp != nullptr)  // dinp [n, c] += dout [n, oc] w [oc, c]
    gemm("dense_backward", CUBLAS_OP_N, CUBLAS_OP_N, a.c, a.n, a.oc, a.w, a.c, a.dout, a.oc, 1.0f,
         a.dinp, a.c);
  if (a.dw != nullptr)  // dw [oc, c] += dout^T inp
    gemm("dense_backward", CUBLAS_OP_N, CUBLAS_OP_T, a.c, a.oc, a.n, a.inp, a.c, a.dout, a.oc, 1.0f,
         a.dw, a.c);
  if (a.dbias != nullptr)
    column_sums<<<static_cast<unsigned>((a.oc + kThreads - 1) / kThreads), kThreads>>>(
        a.dbias, a.dout, a.n, a.oc);
  finish("dense_backward");
}

const KernelVariant<DenseArgs> kDense[] = {{"cublas", usable, dense}};
const KernelVariant<DenseBackwardArgs> kDenseBackward[] = {{"cublas", usable, dense_backward}};

}  // namespace

Status blas_status() { return blas().status; }
KernelVariants<DenseArgs> dense_kernels() { return kDense; }
KernelVariants<DenseBackwardArgs> dense_backward_kernels() { return kDenseBackward; }

}  // namespace nexus::cuda
