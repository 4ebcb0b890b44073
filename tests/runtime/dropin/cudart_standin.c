/*===- cudart_standin.c - A stand-in CUDA runtime for libcoll_nccl.so's tests =*
 *
 * Built as libcudart.so.13 and linked into the test program, as a real NCCL
 * program links the CUDA runtime: the shim finds it loaded and asks it about
 * devices and pointers. "Device memory" is host memory that cudaMalloc
 * handed out and cudaPointerGetAttributes calls cudaMemoryTypeDevice; the
 * current device is per thread, device d has the PCI bus id 0000:(d+1):00.0,
 * and there are COLL_EMULATED_GPUS devices (as the emulation of libcoll's GPU
 * backend has; default 1), each allocation belonging to the device current
 * when it was made. Streams are tokens and copies are memcpy: with
 * COLL_CUDA_PLUGIN=emulated, libcoll serves this "device memory" on the CPU
 * emulation of its GPU backend, so programs written for a GPU (the rank
 * checks of tests/runtime/process, nccl_gpu_check.c) run their device paths
 * here.
 *
 *===----------------------------------------------------------------------===*/

#include <cuda_runtime_api.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_ALLOCS 256

static pthread_mutex_t mutex = PTHREAD_MUTEX_INITIALIZER;
static struct {
  char *base;
  size_t size;
  int device;
  int adopted; /* collStandinAdoptDeviceMemory's: not ours to free */
} allocs[MAX_ALLOCS];
static __thread int current = -1; /* -1: COLL_EMULATED_GPU, else 0 */

/* As the emulation counts them: COLL_EMULATED_GPUS, and at least up to
 * COLL_EMULATED_GPU. */
static int deviceCount(void) {
  const char *v = getenv("COLL_EMULATED_GPUS"), *first = getenv("COLL_EMULATED_GPU");
  int n = v && *v ? atoi(v) : 1;
  if (first && *first && atoi(first) + 1 > n)
    n = atoi(first) + 1;
  return n >= 1 && n <= 8 ? n : 1;
}

/* The calling thread's device: at first the emulation's first one. */
static int currentDevice(void) {
  if (current < 0) {
    const char *v = getenv("COLL_EMULATED_GPU");
    current = v && *v ? atoi(v) : 0;
    if (current < 0 || current >= deviceCount())
      current = 0;
  }
  return current;
}

cudaError_t cudaGetDevice(int *device) {
  *device = currentDevice();
  return cudaSuccess;
}

/* Any of 8 devices, whatever cudaGetDeviceCount says: programs that give
 * their ranks distinct devices (nccl_dropin_check.c) run with the default
 * of one. */
cudaError_t cudaSetDevice(int device) {
  if (device < 0 || device > 7)
    return cudaErrorInvalidDevice;
  current = device;
  return cudaSuccess;
}

cudaError_t cudaDeviceGetPCIBusId(char *pciBusId, int len, int device) {
  if (device < 0 || device > 7)
    return cudaErrorInvalidDevice;
  snprintf(pciBusId, (size_t)len, "0000:%02x:00.0", device + 1);
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  (void)stream;
  return cudaSuccess;
}

cudaError_t cudaGetDeviceCount(int *count) {
  *count = deviceCount();
  return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void) { return cudaSuccess; }

static char streamTokens[64];
static int nextToken;

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *stream, unsigned int flags) {
  (void)flags;
  pthread_mutex_lock(&mutex);
  *stream = (cudaStream_t)&streamTokens[nextToken++ % 64];
  pthread_mutex_unlock(&mutex);
  return cudaSuccess;
}

cudaError_t cudaStreamCreate(cudaStream_t *stream) { return cudaStreamCreateWithFlags(stream, 0); }

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  (void)stream;
  return cudaSuccess;
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind) {
  (void)kind;
  memmove(dst, src, count);
  return cudaSuccess;
}

const char *cudaGetErrorName(cudaError_t error) {
  return error == cudaSuccess ? "cudaSuccess" : "cudaErrorStandIn";
}

const char *cudaGetErrorString(cudaError_t error) {
  return error == cudaSuccess ? "no error" : "an error of the stand-in CUDA runtime";
}

cudaError_t cudaMalloc(void **ptr, size_t size) {
  pthread_mutex_lock(&mutex);
  for (int i = 0; i < MAX_ALLOCS; ++i)
    if (!allocs[i].base) {
      allocs[i].base = malloc(size ? size : 1);
      allocs[i].size = size ? size : 1;
      allocs[i].device = currentDevice();
      *ptr = allocs[i].base;
      pthread_mutex_unlock(&mutex);
      return *ptr ? cudaSuccess : cudaErrorMemoryAllocation;
    }
  pthread_mutex_unlock(&mutex);
  return cudaErrorMemoryAllocation;
}

/* Test-only: memory that libcoll's emulated GPU backend allocated
 * (collMemAllocDevice under COLL_CUDA_PLUGIN=emulated) becomes device
 * memory of the calling thread's device here, as a real driver sees what
 * libcoll_cuda.so allocates; the stand-in never frees it (collMemFree
 * does, after collStandinForgetDeviceMemory). */
int collStandinAdoptDeviceMemory(void *ptr, size_t size) {
  pthread_mutex_lock(&mutex);
  for (int i = 0; i < MAX_ALLOCS; ++i)
    if (!allocs[i].base) {
      allocs[i].base = ptr;
      allocs[i].size = size;
      allocs[i].device = currentDevice();
      allocs[i].adopted = 1;
      pthread_mutex_unlock(&mutex);
      return 0;
    }
  pthread_mutex_unlock(&mutex);
  return 1;
}

void collStandinForgetDeviceMemory(void *ptr) {
  pthread_mutex_lock(&mutex);
  for (int i = 0; i < MAX_ALLOCS; ++i)
    if (allocs[i].base == ptr && allocs[i].adopted) {
      allocs[i].base = NULL;
      allocs[i].adopted = 0;
    }
  pthread_mutex_unlock(&mutex);
}

cudaError_t cudaFree(void *ptr) {
  pthread_mutex_lock(&mutex);
  for (int i = 0; i < MAX_ALLOCS; ++i)
    if (allocs[i].base == ptr) {
      if (allocs[i].adopted) {
        pthread_mutex_unlock(&mutex);
        return cudaErrorInvalidValue;
      }
      free(ptr);
      allocs[i].base = NULL;
      pthread_mutex_unlock(&mutex);
      return cudaSuccess;
    }
  pthread_mutex_unlock(&mutex);
  return ptr ? cudaErrorInvalidValue : cudaSuccess;
}

cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes *attributes, const void *ptr) {
  const char *p = ptr;
  attributes->type = cudaMemoryTypeUnregistered;
  attributes->device = -2;
  attributes->devicePointer = NULL;
  attributes->hostPointer = (void *)ptr;
  pthread_mutex_lock(&mutex);
  for (int i = 0; i < MAX_ALLOCS; ++i)
    if (allocs[i].base && p >= allocs[i].base && p < allocs[i].base + allocs[i].size) {
      attributes->type = cudaMemoryTypeDevice;
      attributes->device = allocs[i].device;
      attributes->devicePointer = (void *)ptr;
      attributes->hostPointer = NULL;
    }
  pthread_mutex_unlock(&mutex);
  return cudaSuccess;
}
