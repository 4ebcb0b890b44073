//===- Hardware.cpp - The GPUs of this machine, from NVML ------------------===//

#include "coll/support/Hardware.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"


#include <dlfcn.h>

using namespace coll::hw;

namespace {

llvm::Error fail(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

//===----------------------------------------------------------------------===//
// NVML's C ABI, the part used here (nvml.h is not needed to build)
//===----------------------------------------------------------------------===//

using nvmlReturn = int;
using nvmlDevice = struct NvmlDevice *;
struct NvmlPciInfo { // nvmlPciInfo_t
  char busIdLegacy[16];
  unsigned domain, bus, device, pciDeviceId, pciSubSystemId;
  char busId[32];
};
constexpr nvmlReturn NvmlSuccess = 0;
constexpr unsigned NvmlMaxLinks = 18; // NVML_NVLINK_MAX_LINKS
constexpr int NvmlLinkToSwitch = 2;   // NVML_NVLINK_DEVICE_TYPE_SWITCH

struct Nvml {
  void *lib = nullptr;
  nvmlReturn (*init)() = nullptr;
  nvmlReturn (*shutdown)() = nullptr;
  const char *(*errorString)(nvmlReturn) = nullptr;
  nvmlReturn (*count)(unsigned *) = nullptr;
  nvmlReturn (*handle)(unsigned, nvmlDevice *) = nullptr;
  nvmlReturn (*name)(nvmlDevice, char *, unsigned) = nullptr;
  nvmlReturn (*pci)(nvmlDevice, NvmlPciInfo *) = nullptr;
  nvmlReturn (*capability)(nvmlDevice, int *, int *) = nullptr;
  nvmlReturn (*pcieGen)(nvmlDevice, unsigned *) = nullptr;
  nvmlReturn (*pcieWidth)(nvmlDevice, unsigned *) = nullptr;
  nvmlReturn (*linkState)(nvmlDevice, unsigned, int *) = nullptr;
  nvmlReturn (*remotePci)(nvmlDevice, unsigned, NvmlPciInfo *) = nullptr;
  nvmlReturn (*remoteType)(nvmlDevice, unsigned,
                           int *) = nullptr; // may be missing

  std::string why(nvmlReturn r) const {
    return errorString
               ? llvm::formatv("{0} (NVML error {1})", errorString(r), r).str()
               : llvm::formatv("NVML error {0}", r).str();
  }
};

template <class F> bool bind(void *lib, F &f, const char *name) {
  f = reinterpret_cast<F>(dlsym(lib, name));
  return f != nullptr;
}

std::string busIdOf(const NvmlPciInfo &p) {
  return llvm::formatv("{0:x-4}:{1:x-2}:{2:x-2}.0", p.domain & 0xffff, p.bus,
                       p.device)
      .str();
}

const char *const InventoryMagic = "coll-gpu-inventory 1";

} // namespace

llvm::Expected<GpuInventory> coll::hw::queryNvml(const std::string &library) {
  Nvml n;
  n.lib = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!n.lib) {
    const char *why = dlerror();
    return fail("cannot load NVML (" + library + ", part of the NVIDIA driver): " +
                (why ? why : "not found"));
  }
  bool ok = bind(n.lib, n.init, "nvmlInit_v2") &&
            bind(n.lib, n.shutdown, "nvmlShutdown") &&
            bind(n.lib, n.errorString, "nvmlErrorString") &&
            bind(n.lib, n.count, "nvmlDeviceGetCount_v2") &&
            bind(n.lib, n.handle, "nvmlDeviceGetHandleByIndex_v2") &&
            bind(n.lib, n.name, "nvmlDeviceGetName") &&
            bind(n.lib, n.pci, "nvmlDeviceGetPciInfo_v3") &&
            bind(n.lib, n.capability, "nvmlDeviceGetCudaComputeCapability") &&
            bind(n.lib, n.linkState, "nvmlDeviceGetNvLinkState") &&
            bind(n.lib, n.remotePci, "nvmlDeviceGetNvLinkRemotePciInfo_v2");
  bind(n.lib, n.pcieGen, "nvmlDeviceGetMaxPcieLinkGeneration");
  bind(n.lib, n.pcieWidth, "nvmlDeviceGetMaxPcieLinkWidth");
  bind(n.lib, n.remoteType, "nvmlDeviceGetNvLinkRemoteDeviceType");
  if (!ok) {
    dlclose(n.lib);
    return fail("NVML (" + library + ") lacks functions Coll needs: a driver too old");
  }
  if (nvmlReturn r = n.init(); r != NvmlSuccess) {
    std::string why = n.why(r);
    dlclose(n.lib);
    return fail("NVML cannot start: " + why);
  }
  GpuInventory inventory;
  std::string error;
  unsigned count = 0;
  if (nvmlReturn r = n.count(&count); r != NvmlSuccess)
    error = "nvmlDeviceGetCount: " + n.why(r);
  for (unsigned i = 0; i < count && error.empty(); ++i) {
    nvmlDevice dev = nullptr;
    if (nvmlReturn r = n.handle(i, &dev); r != NvmlSuccess) {
      error = llvm::formatv("GPU {0}: {1}", i, n.why(r));
      break;
    }
    GpuInventory::Gpu gpu;
    char name[96] = {};
    if (n.name(dev, name, sizeof name) == NvmlSuccess)
      gpu.name = name;
    NvmlPciInfo pci{};
    if (nvmlReturn r = n.pci(dev, &pci); r != NvmlSuccess) {
      error = llvm::formatv("GPU {0}: its PCI bus id: {1}", i, n.why(r));
      break;
    }
    gpu.busId = busIdOf(pci);
    int major = 0, minor = 0;
    if (nvmlReturn r = n.capability(dev, &major, &minor); r != NvmlSuccess) {
      error =
          llvm::formatv("GPU {0}: its compute capability: {1}", i, n.why(r));
      break;
    }
    gpu.sm = major * 10 + minor;
    unsigned v = 0;
    if (n.pcieGen && n.pcieGen(dev, &v) == NvmlSuccess)
      gpu.pcieGen = static_cast<int32_t>(v);
    if (n.pcieWidth && n.pcieWidth(dev, &v) == NvmlSuccess)
      gpu.pcieWidth = static_cast<int32_t>(v);
    // Links that are not supported, not there or down are no links.
    for (unsigned link = 0; link < NvmlMaxLinks; ++link) {
      int active = 0;
      if (n.linkState(dev, link, &active) != NvmlSuccess || !active)
        continue;
      NvmlPciInfo remote{};
      if (n.remotePci(dev, link, &remote) != NvmlSuccess)
        continue;
      GpuInventory::NvLink l;
      l.remote = busIdOf(remote);
      int type = -1;
      if (n.remoteType && n.remoteType(dev, link, &type) == NvmlSuccess)
        l.toSwitch = type == NvmlLinkToSwitch;
      else
        l.toSwitch = true; // settled below against the GPUs' bus ids
      gpu.nvlinks.push_back(l);
    }
    inventory.gpus.push_back(std::move(gpu));
  }
  n.shutdown();
  dlclose(n.lib);
  if (!error.empty())
    return fail("NVML: " + error);
  if (inventory.gpus.empty())
    return fail("NVML reports no GPU on this machine");
  // Without the remote's type, a link to another GPU of this machine is one.
  if (!n.remoteType)
    for (GpuInventory::Gpu &g : inventory.gpus)
      for (GpuInventory::NvLink &l : g.nvlinks)
        for (const GpuInventory::Gpu &other : inventory.gpus)
          if (other.busId == l.remote)
            l.toSwitch = false;
  return inventory;
}

void coll::hw::printInventory(const GpuInventory &inventory,
                                 llvm::raw_ostream &os) {
  os << InventoryMagic << "\n";
  for (const GpuInventory::Gpu &g : inventory.gpus) {
    os << "gpu " << g.busId << " sm=" << g.sm;
    if (g.pcieGen > 0 && g.pcieWidth > 0)
      os << " pcie=" << g.pcieGen << "x" << g.pcieWidth;
    if (!g.name.empty())
      os << " name=" << g.name;
    os << "\n";
    for (const GpuInventory::NvLink &l : g.nvlinks)
      os << "nvlink " << l.remote << (l.toSwitch ? " switch" : "") << "\n";
  }
}

bool coll::hw::isInventory(llvm::StringRef text) {
  return text.ltrim().startswith(InventoryMagic);
}

llvm::Expected<GpuInventory>
coll::hw::parseInventory(llvm::StringRef text, llvm::StringRef fileName) {
  GpuInventory inventory;
  llvm::SmallVector<llvm::StringRef, 0> lines;
  text.split(lines, '\n');
  bool sawMagic = false;
  auto error = [&](size_t line, const llvm::Twine &what) {
    return fail(fileName + ":" + llvm::Twine(line + 1) + ": error: " + what);
  };
  auto isBusId = [](llvm::StringRef s) {
    // dddd:bb:dd.f, hexadecimal
    if (s.size() != 12 || s[4] != ':' || s[7] != ':' || s[10] != '.')
      return false;
    for (size_t i : {0, 1, 2, 3, 5, 6, 8, 9, 11})
      if (!llvm::isHexDigit(s[i]))
        return false;
    return true;
  };
  for (size_t i = 0; i < lines.size(); ++i) {
    llvm::StringRef line = lines[i].trim();
    if (line.empty() || line.startswith("#"))
      continue;
    if (!sawMagic) {
      if (line != InventoryMagic)
        return error(i, llvm::Twine("the first line must be '") +
                            InventoryMagic + "'");
      sawMagic = true;
      continue;
    }
    auto [word, rest] = line.split(' ');
    rest = rest.trim();
    if (word == "gpu") {
      GpuInventory::Gpu g;
      auto [bus, attrs] = rest.split(' ');
      if (!isBusId(bus))
        return error(i, "'" + bus + "' is not a PCI bus id (dddd:bb:dd.f)");
      g.busId = bus.lower();
      attrs = attrs.trim();
      while (!attrs.empty()) {
        auto [key, after] = attrs.split('=');
        if (key == "name") { // the rest of the line
          g.name = after.str();
          break;
        }
        auto [value, next] = after.split(' ');
        if (key == "sm") {
          if (value.getAsInteger(10, g.sm) || g.sm < 30 || g.sm > 200)
            return error(i, "sm=" + value +
                                " is not a compute capability such as 90");
        } else if (key == "pcie") {
          auto [gen, width] = value.split('x');
          if (gen.getAsInteger(10, g.pcieGen) ||
              width.getAsInteger(10, g.pcieWidth) || g.pcieGen < 1 ||
              g.pcieGen > 6 || g.pcieWidth < 1 || g.pcieWidth > 32)
            return error(i, "pcie=" + value + " is not GENxWIDTH such as 5x16");
        } else {
          return error(i, "unknown attribute '" + key + "' (sm, pcie, name)");
        }
        attrs = next.trim();
      }
      if (g.sm == 0)
        return error(i, "the GPU has no sm=");
      for (const GpuInventory::Gpu &other : inventory.gpus)
        if (other.busId == g.busId)
          return error(i, "GPU " + g.busId + " is listed twice");
      inventory.gpus.push_back(std::move(g));
    } else if (word == "nvlink") {
      if (inventory.gpus.empty())
        return error(i, "an nvlink before any gpu line");
      auto [bus, kind] = rest.split(' ');
      if (!isBusId(bus))
        return error(i, "'" + bus + "' is not a PCI bus id (dddd:bb:dd.f)");
      kind = kind.trim();
      if (!kind.empty() && kind != "switch")
        return error(
            i,
            "'" + kind +
                "': an nvlink line ends with its remote bus id, or 'switch'");
      inventory.gpus.back().nvlinks.push_back({bus.lower(), kind == "switch"});
    } else {
      return error(i, "'" + word + "': lines are 'gpu ...' or 'nvlink ...'");
    }
  }
  if (!sawMagic)
    return fail(fileName + ": error: empty inventory");
  if (inventory.gpus.empty())
    return fail(fileName + ": error: the inventory lists no GPU");
  for (const GpuInventory::Gpu &g : inventory.gpus)
    for (const GpuInventory::NvLink &l : g.nvlinks) {
      if (l.toSwitch)
        continue;
      bool known = false;
      for (const GpuInventory::Gpu &other : inventory.gpus)
        known = known || (other.busId == l.remote && other.busId != g.busId);
      if (!known)
        return fail(fileName + ": error: GPU " + g.busId +
                    " has an NVLink to " + l.remote +
                    ", which is no other GPU of the inventory (add 'switch' "
                    "for an NVSwitch)");
    }
  return inventory;
}
