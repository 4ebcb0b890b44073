/*===- fake_nvml.c - A stand-in for libnvidia-ml.so.1 ----------------------===
 *
 * The part of NVML's C ABI that coll::hw::queryNvml binds, describing a
 * made-up machine: two GPUs (sm 90, PCIe 5 x16) joined by two NVLinks, each
 * with one more link to an NVSwitch. HardwareTest loads it through the same
 * dlopen path as the driver's library, so the query is tested on a machine
 * without a GPU.
 *
 * Built three times:
 *   FAKE_NVML_BROKEN      nvmlInit_v2 fails (a driver that cannot start);
 *   FAKE_NVML_NO_TYPE     no nvmlDeviceGetNvLinkRemoteDeviceType (an older
 *                         driver): the query must tell switches from GPUs by
 *                         bus id.
 *===----------------------------------------------------------------------===*/
#include <stdio.h>
#include <string.h>

typedef struct {
  char busIdLegacy[16];
  unsigned domain, bus, device, pciDeviceId, pciSubSystemId;
  char busId[32];
} PciInfo;

enum { Success = 0, ErrorInvalid = 2, ErrorUnknown = 999 };
static const unsigned Buses[2] = {0x18, 0x2a};
static int started;

int nvmlInit_v2(void) {
#ifdef FAKE_NVML_BROKEN
  return ErrorUnknown;
#else
  started = 1;
  return Success;
#endif
}
int nvmlShutdown(void) {
  started = 0;
  return Success;
}
const char *nvmlErrorString(int r) { return r == ErrorUnknown ? "Unknown Error" : "Invalid Argument"; }
int nvmlDeviceGetCount_v2(unsigned *n) {
  *n = 2;
  return started ? Success : ErrorInvalid;
}
int nvmlDeviceGetHandleByIndex_v2(unsigned i, void **dev) {
  if (i >= 2)
    return ErrorInvalid;
  *dev = (void *)(Buses + i);
  return Success;
}
static unsigned indexOf(void *dev) { return (unsigned)((const unsigned *)dev - Buses); }
int nvmlDeviceGetName(void *dev, char *name, unsigned length) {
  snprintf(name, length, "Fake H100 %u", indexOf(dev));
  return Success;
}
static void fill(PciInfo *p, unsigned bus) {
  memset(p, 0, sizeof *p);
  p->domain = 0;
  p->bus = bus;
  p->device = 0;
  snprintf(p->busId, sizeof p->busId, "00000000:%02X:00.0", bus);
}
int nvmlDeviceGetPciInfo_v3(void *dev, PciInfo *p) {
  fill(p, Buses[indexOf(dev)]);
  return Success;
}
int nvmlDeviceGetCudaComputeCapability(void *dev, int *major, int *minor) {
  *major = 9;
  *minor = 0;
  return Success;
}
int nvmlDeviceGetMaxPcieLinkGeneration(void *dev, unsigned *v) {
  *v = 5;
  return Success;
}
int nvmlDeviceGetMaxPcieLinkWidth(void *dev, unsigned *v) {
  *v = 16;
  return Success;
}
/* Links 0 and 1 go to the other GPU, link 2 to a switch, the rest are down. */
int nvmlDeviceGetNvLinkState(void *dev, unsigned link, int *active) {
  *active = link < 3;
  return Success;
}
int nvmlDeviceGetNvLinkRemotePciInfo_v2(void *dev, unsigned link, PciInfo *p) {
  if (link >= 3)
    return ErrorInvalid;
  fill(p, link == 2 ? 0xc0 : Buses[1 - indexOf(dev)]);
  return Success;
}
#ifndef FAKE_NVML_NO_TYPE
int nvmlDeviceGetNvLinkRemoteDeviceType(void *dev, unsigned link, int *type) {
  *type = link == 2 ? 2 /* switch */ : 0 /* GPU */;
  return Success;
}
#endif
