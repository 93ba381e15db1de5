// SPDX-License-Identifier: Apache-2.0
// The stand-in's cuBLAS: GEMMs through OpenBLAS sgemm, column-major, with
// cuBLAS's argument checks, run as stream-ordered work on the handle's stream.
// Float16 operands are widened to float and the result rounded back (the
// real cuBLAS accumulates in float too with CUBLAS_COMPUTE_32F, but its
// blocking and tensor-core rounding differ: the tolerance covers that).
#include <cblas.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "cublas_v2.h"
#include "cuda_fp16.h"
#include "standin_internal.h"

struct cublasContext {
  cudaStream_t stream = nullptr;
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
};

namespace {

using namespace cuda_standin;

// The most GEMMs one strided-batched call runs here: the backend must split
// larger batches (the grid's y and z dimensions stop at 65535).
constexpr int kMaxBatch = 65535;

size_t elem_size(cudaDataType_t t) { return t == CUDA_R_16F ? 2 : 4; }

bool supported(cudaDataType_t a, cudaDataType_t b, cudaDataType_t c, cublasComputeType_t ct) {
  if (ct != CUBLAS_COMPUTE_32F) return false;  // the backend asks for float accumulation only
  return (a == CUDA_R_32F && b == CUDA_R_32F && c == CUDA_R_32F) ||
         (a == CUDA_R_16F && b == CUDA_R_16F && (c == CUDA_R_16F || c == CUDA_R_32F));
}

// Columns x rows of an operand as stored (column-major, leading dimension ld).
void widen(const void* p, cudaDataType_t t, int64_t rows, int64_t cols, int64_t ld, std::vector<float>* out) {
  out->assign(size_t(rows * cols), 0.0f);
  for (int64_t j = 0; j < cols; ++j) {
    for (int64_t i = 0; i < rows; ++i) {
      const int64_t at = j * ld + i;
      (*out)[size_t(j * rows + i)] = t == CUDA_R_16F ? __half2float(static_cast<const __half*>(p)[at])
                                                      : static_cast<const float*>(p)[at];
    }
  }
}

struct Gemm {
  cublasOperation_t ta, tb;
  int m, n, k;
  float alpha, beta;
  const void* a;
  const void* b;
  void* c;
  cudaDataType_t at, bt, ct;
  int lda, ldb, ldc;
  long long sa, sb, sc;
  int batch;
};

void run(const Gemm& g) {
  if (std::getenv("MEGA_STANDIN_TRACE_GEMM")) {
    std::fprintf(stderr, "gemm %c%c m=%d n=%d k=%d batch=%d types %d %d %d\n", g.ta ? 'T' : 'N', g.tb ? 'T' : 'N', g.m, g.n,
                 g.k, g.batch, g.at, g.bt, g.ct);
  }
  const CBLAS_TRANSPOSE ta = g.ta == CUBLAS_OP_N ? CblasNoTrans : CblasTrans;
  const CBLAS_TRANSPOSE tb = g.tb == CUBLAS_OP_N ? CblasNoTrans : CblasTrans;
  const int64_t a_rows = g.ta == CUBLAS_OP_N ? g.m : g.k, a_cols = g.ta == CUBLAS_OP_N ? g.k : g.m;
  const int64_t b_rows = g.tb == CUBLAS_OP_N ? g.k : g.n, b_cols = g.tb == CUBLAS_OP_N ? g.n : g.k;
  std::vector<float> wa, wb, wc;
  for (int i = 0; i < g.batch; ++i) {
    const uint8_t* pa = static_cast<const uint8_t*>(g.a) + size_t(i) * size_t(g.sa) * elem_size(g.at);
    const uint8_t* pb = static_cast<const uint8_t*>(g.b) + size_t(i) * size_t(g.sb) * elem_size(g.bt);
    uint8_t* pc = static_cast<uint8_t*>(g.c) + size_t(i) * size_t(g.sc) * elem_size(g.ct);
    if (g.m == 0 || g.n == 0) continue;
    if (g.at == CUDA_R_32F && g.ct == CUDA_R_32F) {
      cblas_sgemm(CblasColMajor, ta, tb, g.m, g.n, g.k, g.alpha, reinterpret_cast<const float*>(pa), g.lda,
                  reinterpret_cast<const float*>(pb), g.ldb, g.beta, reinterpret_cast<float*>(pc), g.ldc);
      continue;
    }
    widen(pa, g.at, a_rows, a_cols, g.lda, &wa);
    widen(pb, g.bt, b_rows, b_cols, g.ldb, &wb);
    widen(pc, g.ct, g.m, g.n, g.ldc, &wc);
    if (g.beta == 0.0f) std::fill(wc.begin(), wc.end(), 0.0f);  // beta = 0: C is not read (may be NaN)
    cblas_sgemm(CblasColMajor, ta, tb, g.m, g.n, g.k, g.alpha, wa.data(), int(a_rows), wb.data(), int(b_rows),
                g.beta, wc.data(), g.m);
    for (int64_t j = 0; j < g.n; ++j) {
      for (int64_t r = 0; r < g.m; ++r) {
        const float v = wc[size_t(j * g.m + r)];
        if (g.ct == CUDA_R_16F) {
          reinterpret_cast<__half*>(pc)[j * g.ldc + r] = __float2half_rn(v);
        } else {
          reinterpret_cast<float*>(pc)[j * g.ldc + r] = v;
        }
      }
    }
  }
}

cublasStatus_t submit(cublasHandle_t h, const Gemm& g) {
  if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
  if ((g.ta != CUBLAS_OP_N && g.ta != CUBLAS_OP_T) || (g.tb != CUBLAS_OP_N && g.tb != CUBLAS_OP_T)) {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  if (g.m < 0 || g.n < 0 || g.k < 0 || g.batch < 0) return CUBLAS_STATUS_INVALID_VALUE;
  const int a_rows = g.ta == CUBLAS_OP_N ? g.m : g.k;
  const int b_rows = g.tb == CUBLAS_OP_N ? g.k : g.n;
  if (g.lda < std::max(1, a_rows) || g.ldb < std::max(1, b_rows) || g.ldc < std::max(1, g.m)) {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  if (!supported(g.at, g.bt, g.ct, CUBLAS_COMPUTE_32F)) return CUBLAS_STATUS_NOT_SUPPORTED;
  if (g.batch > kMaxBatch) return CUBLAS_STATUS_INVALID_VALUE;
  if (g.m == 0 || g.n == 0 || g.batch == 0) return CUBLAS_STATUS_SUCCESS;
  // every operand must be device memory, whole (the last batch's last column)
  const int64_t a_cols = g.ta == CUBLAS_OP_N ? g.k : g.m, b_cols = g.tb == CUBLAS_OP_N ? g.n : g.k;
  auto span = [&](int64_t rows, int64_t cols, int64_t ld, long long stride, size_t es) {
    if (rows == 0 || cols == 0) return size_t(0);
    return size_t((int64_t(g.batch - 1) * stride + (cols - 1) * ld + rows) * int64_t(es));
  };
  if ((g.k > 0 && (!device_accessible(g.a, span(a_rows, a_cols, g.lda, g.sa, elem_size(g.at))) ||
                   !device_accessible(g.b, span(b_rows, b_cols, g.ldb, g.sb, elem_size(g.bt))))) ||
      !device_accessible(g.c, span(g.m, g.n, g.ldc, g.sc, elem_size(g.ct)))) {
    return CUBLAS_STATUS_EXECUTION_FAILED;  // an illegal address on a real GPU
  }
  const cudaError_t e = enqueue(h->stream, [g]() { run(g); return cudaSuccess; }, "cublas gemm");
  return e == cudaSuccess ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_EXECUTION_FAILED;
}

}  // namespace

cublasStatus_t cublasCreate(cublasHandle_t* handle) {
  if (!handle) return CUBLAS_STATUS_INVALID_VALUE;
  *handle = new cublasContext();
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy(cublasHandle_t handle) {
  if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
  delete handle;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t stream) {
  if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
  handle->stream = stream;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetWorkspace(cublasHandle_t handle, void* workspace, size_t bytes) {
  if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (bytes > 0 && (!workspace || reinterpret_cast<uintptr_t>(workspace) % 256 != 0)) {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  handle->workspace = workspace;
  handle->workspace_bytes = bytes;
  return CUBLAS_STATUS_SUCCESS;
}

const char* cublasGetStatusString(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
  }
  return "CUBLAS_STATUS_UNKNOWN";
}

cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
                            int k, const void* alpha, const void* A, cudaDataType_t Atype, int lda, const void* B,
                            cudaDataType_t Btype, int ldb, const void* beta, void* C, cudaDataType_t Ctype, int ldc,
                            cublasComputeType_t computeType, cublasGemmAlgo_t algo) {
  if (!alpha || !beta) return CUBLAS_STATUS_INVALID_VALUE;
  if (!supported(Atype, Btype, Ctype, computeType)) return CUBLAS_STATUS_NOT_SUPPORTED;
  const Gemm g{transa, transb, m, n, k, *static_cast<const float*>(alpha), *static_cast<const float*>(beta),
               A, B, C, Atype, Btype, Ctype, lda, ldb, ldc, 0, 0, 0, 1};
  (void)algo;
  return submit(handle, g);
}

cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,
                                          int m, int n, int k, const void* alpha, const void* A,
                                          cudaDataType_t Atype, int lda, long long strideA, const void* B,
                                          cudaDataType_t Btype, int ldb, long long strideB, const void* beta,
                                          void* C, cudaDataType_t Ctype, int ldc, long long strideC,
                                          int batchCount, cublasComputeType_t computeType, cublasGemmAlgo_t algo) {
  if (!alpha || !beta) return CUBLAS_STATUS_INVALID_VALUE;
  if (!supported(Atype, Btype, Ctype, computeType)) return CUBLAS_STATUS_NOT_SUPPORTED;
  const Gemm g{transa, transb, m, n, k, *static_cast<const float*>(alpha), *static_cast<const float*>(beta),
               A, B, C, Atype, Btype, Ctype, lda, ldb, ldc, strideA, strideB, strideC, batchCount};
  (void)algo;
  return submit(handle, g);
}
