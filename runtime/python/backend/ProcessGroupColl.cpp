//===- ProcessGroupColl.cpp - coll.torch's c10d::Backend: routing ---------===//
//
// The c10d::Backend behind `backend="coll"` and the module coll._c10d that
// makes it. coll/torch.py makes the communicator and the gloo backend
// underneath once per group, and hands both to create(); each call is then
// routed here:
//
// - Coll serves it when every tensor is dense, of one dtype and one device
//   (the CPU, or a CUDA device when libcoll's GPU backend loads), the dtype
//   and reduce op are Coll's (Conversion.cpp's check() and reduceOp()), the
//   shapes are ones Coll's collectives take (each call below checks its
//   own), and the communicator's choice for the size is an algorithm (or a
//   copy on one rank). Host calls run in the caller's thread and are done
//   when the Work is returned; CUDA calls are enqueued on the device's
//   current stream and the Work's wait() makes the then-current stream wait
//   for them (Work.cpp).
// - Otherwise the backend underneath runs it and its Work is returned. A
//   Coll call waits for the calls it handed down before, so that the group's
//   calls run in the order they were issued, whichever library serves them.
//
// Every decision depends only on what all ranks share (dtypes, shapes, the
// communicator's table), so all ranks take the same road, and each call
// gives what gloo's gives (docs/PYTORCH.md, "What Coll serves, what gloo
// runs"). At COLL_DEBUG=INFO each process says once per (collective,
// reason) where a call went. After a call of Coll's fails, the ranks agree
// through gloo on the first failed collective and the group runs every call
// on gloo from then on (failed()).
//
//===----------------------------------------------------------------------===//

#include "CollBackend.h"

#include <c10/core/DeviceGuard.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <torch/csrc/utils/pybind.h>

#include <pybind11/chrono.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <string_view>
#include <tuple>
#include <unistd.h>
#include <sys/syscall.h>

namespace coll::pytorch {

namespace {

int debugLevel() {
  const char *env = std::getenv("COLL_DEBUG");
  std::string v = env ? env : "WARN";
  while (!v.empty() && std::isspace(static_cast<unsigned char>(v.back())))
    v.pop_back();
  size_t b = 0;
  while (b < v.size() && std::isspace(static_cast<unsigned char>(v[b])))
    ++b;
  v = v.substr(b);
  for (char &c : v)
    c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (v == "NONE")
    return 0;
  if (v == "VERSION")
    return 1;
  if (v == "INFO")
    return 3;
  if (v == "TRACE")
    return 4;
  return 2;
}

class ProcessGroupColl : public c10d::Backend {
public:
  ProcessGroupColl(collComm_t comm, int rank, int size, BackendPtr fallback,
                   std::string fallbackName, std::chrono::milliseconds timeout)
      : Backend(rank, size), comm_(comm), fallback_(std::move(fallback)),
        fallbackName_(std::move(fallbackName)), info_(debugLevel() >= 3),
        options_(c10::make_intrusive<Options>("coll", timeout)) {}

  ~ProcessGroupColl() override { destroy(); }

  const std::string getBackendName() const override { return "coll"; }

  c10::intrusive_ptr<Options> getBackendOptions() override { return options_; }

  // -- split_group -----------------------------------------------------------

  bool supportsSplitting() const override { return true; }

  /// dist.split_group: the group of `ranks` (this group's ranks, in the
  /// child's order), as ProcessGroupGloo::split makes it: null where this
  /// rank is not one of them, and only the members take part (the
  /// rendezvous goes through `store`, which torch prefixes with the child's
  /// name). The child has its own gloo underneath, split from this one's,
  /// and its own communicator, made as coll/torch.py makes a group's.
  BackendPtr split(const c10::intrusive_ptr<c10d::Store> &store, const std::vector<int> &ranks,
                   const c10::intrusive_ptr<Options> &opts) override {
    auto me = std::find(ranks.begin(), ranks.end(), getRank());
    if (me == ranks.end())
      return {};
    int rank = static_cast<int>(me - ranks.begin()), size = static_cast<int>(ranks.size());
    BackendPtr parentFallback;
    {
      std::lock_guard<std::mutex> lock(fallbackMutex_);
      parentFallback = fallback_;
    }
    TORCH_CHECK(parentFallback, "coll: split_group after destroy_process_group");
    // gloo's own options (its devices and threads), with the child's name and timeout.
    auto fallbackOpts = parentFallback->getBackendOptions()->clone();
    fallbackOpts->group_name = opts->group_name;
    fallbackOpts->group_desc = opts->group_desc;
    fallbackOpts->timeout = opts->timeout;
    BackendPtr fallback = parentFallback->split(
        c10::make_intrusive<c10d::PrefixStore>("coll-fallback/", store), ranks, fallbackOpts);
    TORCH_CHECK(fallback, "coll: ", fallbackName_, " did not split for rank ", getRank());
    collUniqueId id;
    const std::string key = "coll/unique_id";
    if (rank == 0) {
      call(collGetUniqueId(&id), nullptr);
      store->set(key, std::vector<uint8_t>(id.internal, id.internal + sizeof id.internal));
    } else {
      std::vector<uint8_t> got = store->get(key);
      TORCH_CHECK(got.size() == sizeof id.internal, "coll: a unique id of ", got.size(),
                  " bytes in the store");
      std::copy(got.begin(), got.end(), id.internal);
    }
    collConfig_t config = COLL_CONFIG_INITIALIZER;
    config.libraries = "gloo,torch"; // as coll/torch.py's communicators
    collComm_t comm = nullptr;
    call(collCommInitRankConfig(&comm, size, id, rank, &config), nullptr);
    auto child = c10::make_intrusive<ProcessGroupColl>(comm, rank, size, std::move(fallback),
                                                       fallbackName_, opts->timeout);
    child->options_ = opts;
    return child;
  }

  // -- shrink_group ----------------------------------------------------------

  bool supportsShrinking() const override { return true; }

  /// dist.shrink_group: the group without `ranksToExclude`, called by the
  /// others only (docs/PYTORCH.md, "Lost ranks"). The communicator shrinks
  /// on Coll's side (collCommShrink: over the listeners its ranks opened,
  /// no store, whether or not a call failed on it); gloo underneath has no
  /// shrink, so the survivors split the parent's gloo through a store of
  /// their own, which the new rank 0 serves (the job's store may have died
  /// with the rank that served it) and whose address the new communicator
  /// carries. `shrinkFlags` 1 (SHRINK_ABORT): the calls in flight here end
  /// first.
  BackendPtr shrink(const std::vector<int64_t> &ranksToExclude, int shrinkFlags,
                    const c10::intrusive_ptr<Options> &optsOverride) override {
    std::vector<int> exclude(ranksToExclude.begin(), ranksToExclude.end());
    collComm_t parent;
    {
      std::lock_guard<std::mutex> lock(commMutex_);
      parent = comm_;
    }
    TORCH_CHECK(parent, "coll: shrink_group on a group that was aborted or destroyed");
    BackendPtr parentFallback = currentFallback();
    TORCH_CHECK(parentFallback, "coll: shrink_group after destroy_process_group");
    collComm_t comm = nullptr;
    call(collCommShrink(parent, exclude.data(), static_cast<int>(exclude.size()), &comm, nullptr,
                        (shrinkFlags & 1) ? COLL_SHRINK_ABORT : COLL_SHRINK_DEFAULT),
         parent);
    int rank = 0, size = 1;
    collCommUserRank(comm, &rank);
    collCommCount(comm, &size);
    const std::chrono::milliseconds timeout = optsOverride ? optsOverride->timeout
                                                           : options_->timeout;
    // The survivors' store: "host:port" of the new rank 0's, broadcast.
    char where[256] = {};
    c10::intrusive_ptr<c10d::Store> store;
    try {
      if (rank == 0) {
        char host[200] = "";
        if (gethostname(host, sizeof host - 1) != 0 || !*host)
          std::snprintf(host, sizeof host, "127.0.0.1");
        c10d::TCPStoreOptions o;
        o.port = 0;
        o.isServer = true;
        o.numWorkers = static_cast<size_t>(size);
        o.waitWorkers = false;
        o.timeout = timeout;
        auto server = c10::make_intrusive<c10d::TCPStore>(host, o);
        std::snprintf(where, sizeof where, "%s:%u", host, unsigned(server->getPort()));
        store = server;
      }
      call(collBroadcast(where, where, sizeof where, collInt8, 0, comm, nullptr), comm);
      if (rank != 0) {
        std::string text(where, strnlen(where, sizeof where));
        const size_t colon = text.rfind(':');
        TORCH_CHECK(colon != std::string::npos, "coll: shrink_group: no store address");
        c10d::TCPStoreOptions o;
        o.port = static_cast<std::uint16_t>(std::stoul(text.substr(colon + 1)));
        o.isServer = false;
        o.numWorkers = static_cast<size_t>(size);
        o.waitWorkers = false;
        o.timeout = timeout;
        store = c10::make_intrusive<c10d::TCPStore>(text.substr(0, colon), o);
      }
    } catch (...) {
      collCommDestroy(comm);
      throw;
    }
    std::vector<int> survivors;
    for (int r = 0; r < getSize(); ++r)
      if (std::find(exclude.begin(), exclude.end(), r) == exclude.end())
        survivors.push_back(r);
    auto fallbackOpts = parentFallback->getBackendOptions()->clone();
    if (optsOverride) {
      fallbackOpts->group_name = optsOverride->group_name;
      fallbackOpts->group_desc = optsOverride->group_desc;
    }
    fallbackOpts->timeout = timeout;
    BackendPtr fallback;
    try {
      fallback = parentFallback->split(
          c10::make_intrusive<c10d::PrefixStore>("coll-shrink/", store), survivors, fallbackOpts);
    } catch (...) {
      collCommDestroy(comm);
      throw;
    }
    if (!fallback) {
      collCommDestroy(comm);
      TORCH_CHECK(false, "coll: ", fallbackName_, " did not split for the survivors");
    }
    auto child = c10::make_intrusive<ProcessGroupColl>(comm, rank, size, std::move(fallback),
                                                       fallbackName_, timeout);
    if (optsOverride)
      child->options_ = optsOverride;
    // The server lives in rank 0's store object: kept while the group
    // lives, since the others may still read from it after rank 0 is done
    // (gloo keeps clones, which are clients).
    child->shrinkStore_ = std::move(store);
    return child;
  }

  // -- collectives ---------------------------------------------------------

  WorkPtr allreduce(std::vector<at::Tensor> &tensors,
                    const c10d::AllreduceOptions &opts) override {
    Decision d = check(tensors);
    auto op = reduceOp(opts.reduceOp, d);
    return route("allreduce", c10d::OpType::ALLREDUCE, bytes(tensors), 0, d, tensors, tensors,
                 [&] {
                   for (auto &t : tensors) {
                     at::Tensor c = t.contiguous();
                     call(collAllReduce(c.data_ptr(), c.data_ptr(), c.numel(), d.dtype, *op,
                                        comm_, streamHandle(c)));
                     copyBack(t, c);
                   }
                 },
                 [&](c10d::Backend &fb) { return fb.allreduce(tensors, opts); });
  }

  WorkPtr allreduce_coalesced(std::vector<at::Tensor> &tensors,
                              const c10d::AllreduceCoalescedOptions &opts) override {
    Decision d = check(tensors);
    auto op = reduceOp(opts.reduceOp, d);
    return route("allreduce", c10d::OpType::ALLREDUCE_COALESCED, bytes(tensors), 0, d, tensors,
                 tensors,
                 [&] {
                   for (auto &t : tensors)
                     call(collAllReduce(t.data_ptr(), t.data_ptr(), t.numel(), d.dtype, *op,
                                        comm_, streamHandle(t)));
                 },
                 [&](c10d::Backend &fb) { return fb.allreduce_coalesced(tensors, opts); });
  }

  WorkPtr broadcast(std::vector<at::Tensor> &tensors,
                    const c10d::BroadcastOptions &opts) override {
    Decision d = check(tensors);
    int root = static_cast<int>(opts.rootRank);
    return route("broadcast", c10d::OpType::BROADCAST, bytes(tensors), root, d, tensors, tensors,
                 [&] {
                   for (auto &t : tensors) {
                     at::Tensor c = t.contiguous();
                     call(collBroadcast(c.data_ptr(), c.data_ptr(), c.numel(), d.dtype, root,
                                        comm_, streamHandle(c)));
                     copyBack(t, c);
                   }
                 },
                 [&](c10d::Backend &fb) { return fb.broadcast(tensors, opts); });
  }

  /// gloo runs every reduce: gloo's leaves partial results of its ring in
  /// the other ranks' tensors (torch says only the root's is the result,
  /// and gloo's are what a drop-in must leave there), where Coll's leaves
  /// them as they were.
  WorkPtr reduce(std::vector<at::Tensor> &tensors, const c10d::ReduceOptions &opts) override {
    Decision d;
    d.unsupported = "reduce (gloo leaves its ring's partial results in the other ranks' "
                    "tensors; Coll leaves them as they were)";
    return route("reduce", c10d::OpType::REDUCE, bytes(tensors), 0, d, tensors, tensors, [] {},
                 [&](c10d::Backend &fb) { return fb.reduce(tensors, opts); });
  }

  WorkPtr _allgather_base(at::Tensor &output, at::Tensor &input,
                          const c10d::AllgatherOptions &opts) override {
    std::vector<at::Tensor> all{output, input};
    Decision d = check(all);
    if (d.unsupported.empty() && output.numel() != input.numel() * getSize())
      d.unsupported = "an output that is not size x the input";
    return route("allgather", c10d::OpType::_ALLGATHER_BASE, output.nbytes(), 0, d, {output},
                 all,
                 [&] {
                   at::Tensor i = input.contiguous(), o = output.contiguous();
                   call(collAllGather(i.data_ptr(), o.data_ptr(), i.numel(), d.dtype, comm_,
                                      streamHandle(i)));
                   copyBack(output, o);
                 },
                 [&](c10d::Backend &fb) { return fb._allgather_base(output, input, opts); });
  }

  WorkPtr allgather(std::vector<std::vector<at::Tensor>> &outputLists,
                    std::vector<at::Tensor> &inputs,
                    const c10d::AllgatherOptions &opts) override {
    Decision d;
    if (outputLists.size() != 1 || inputs.size() != 1) {
      d.unsupported = "more than one input tensor";
    } else {
      std::vector<at::Tensor> all = outputLists[0];
      all.push_back(inputs[0]);
      d = check(all);
      if (d.unsupported.empty()) {
        for (const auto &o : outputLists[0])
          if (o.numel() != inputs[0].numel())
            d.unsupported = "outputs of different sizes";
        if (outputLists[0].size() != static_cast<size_t>(getSize()))
          d.unsupported = "not one output per rank";
      }
    }
    std::vector<at::Tensor> outs = outputLists.empty() ? std::vector<at::Tensor>()
                                                       : outputLists[0];
    std::vector<at::Tensor> touched = outs;
    touched.insert(touched.end(), inputs.begin(), inputs.end());
    size_t nbytes = inputs.empty() ? 0 : inputs[0].nbytes() * getSize();
    return route("allgather", c10d::OpType::ALLGATHER, nbytes, 0, d, outs, touched,
                 [&] {
                   at::Tensor i = inputs[0].contiguous();
                   int64_t k = i.numel();
                   at::Tensor flat = at::empty({k * getSize()}, i.options());
                   call(collAllGather(i.data_ptr(), flat.data_ptr(), k, d.dtype, comm_,
                                      streamHandle(i)));
                   for (int r = 0; r < getSize(); ++r)
                     outs[r].copy_(flat.narrow(0, r * k, k).view_as(outs[r]));
                 },
                 [&](c10d::Backend &fb) { return fb.allgather(outputLists, inputs, opts); });
  }

  WorkPtr allgather_into_tensor_coalesced(std::vector<at::Tensor> &outputs,
                                          std::vector<at::Tensor> &inputs,
                                          const c10d::AllgatherOptions &opts) override {
    Decision d = coalesced("allgather", outputs, inputs, nullptr, [&](at::Tensor &o, at::Tensor &i) {
      return o.numel() == i.numel() * getSize();
    });
    if (!d.unsupported.empty())
      return route("allgather", c10d::OpType::COALESCED, 0, 0, d, outputs, outputs, [] {},
                   [&](c10d::Backend &fb) {
                     return fb.allgather_into_tensor_coalesced(outputs, inputs, opts);
                   });
    return eachPair(outputs, inputs, 1,
                    [&](at::Tensor &o, at::Tensor &i) { return _allgather_base(o, i, opts); });
  }

  WorkPtr _reduce_scatter_base(at::Tensor &output, at::Tensor &input,
                               const c10d::ReduceScatterOptions &opts) override {
    std::vector<at::Tensor> all{output, input};
    Decision d = check(all);
    auto op = reduceOp(opts.reduceOp, d);
    if (d.unsupported.empty() && input.numel() != output.numel() * getSize())
      d.unsupported = "an input that is not size x the output";
    return route("reducescatter", c10d::OpType::_REDUCE_SCATTER_BASE, input.nbytes(), 0, d,
                 {output}, all,
                 [&] {
                   at::Tensor i = input.contiguous(), o = output.contiguous();
                   call(collReduceScatter(i.data_ptr(), o.data_ptr(), o.numel(), d.dtype, *op,
                                          comm_, streamHandle(i)));
                   copyBack(output, o);
                 },
                 [&](c10d::Backend &fb) { return fb._reduce_scatter_base(output, input, opts); });
  }

  WorkPtr reduce_scatter(std::vector<at::Tensor> &outputs,
                         std::vector<std::vector<at::Tensor>> &inputLists,
                         const c10d::ReduceScatterOptions &opts) override {
    Decision d;
    std::optional<collRedOp_t> op;
    if (outputs.size() != 1 || inputLists.size() != 1) {
      d.unsupported = "more than one output tensor";
    } else {
      std::vector<at::Tensor> all = inputLists[0];
      all.push_back(outputs[0]);
      d = check(all);
      op = reduceOp(opts.reduceOp, d);
      if (d.unsupported.empty()) {
        for (const auto &i : inputLists[0])
          if (i.numel() != outputs[0].numel())
            d.unsupported = "inputs of different sizes";
        if (inputLists[0].size() != static_cast<size_t>(getSize()))
          d.unsupported = "not one input per rank";
      }
    }
    std::vector<at::Tensor> touched = outputs;
    if (!inputLists.empty())
      touched.insert(touched.end(), inputLists[0].begin(), inputLists[0].end());
    size_t nbytes = outputs.empty() ? 0 : outputs[0].nbytes() * getSize();
    const uint64_t served = served_;
    WorkPtr work = route("reducescatter", c10d::OpType::REDUCE_SCATTER, nbytes, 0, d, outputs, touched,
                 [&] {
                   at::Tensor &out = outputs[0];
                   at::Tensor flat = flatten(inputLists[0]);
                   at::Tensor o = out.contiguous();
                   call(collReduceScatter(flat.data_ptr(), o.data_ptr(), o.numel(), d.dtype, *op,
                                          comm_, streamHandle(o)));
                   copyBack(out, o);
                 },
                 [&](c10d::Backend &fb) { return fb.reduce_scatter(outputs, inputLists, opts); });
    if (served_ > served)
      served_ = served + getSize(); // gloo's list reduce_scatter counts one per rank
    return work;
  }

  WorkPtr reduce_scatter_tensor_coalesced(std::vector<at::Tensor> &outputs,
                                          std::vector<at::Tensor> &inputs,
                                          const c10d::ReduceScatterOptions &opts) override {
    Decision d = coalesced("reducescatter", outputs, inputs, &opts.reduceOp,
                           [&](at::Tensor &o, at::Tensor &i) {
                             return i.numel() == o.numel() * getSize();
                           });
    if (!d.unsupported.empty())
      return route("reducescatter", c10d::OpType::COALESCED, 0, 0, d, outputs, outputs, [] {},
                   [&](c10d::Backend &fb) {
                     return fb.reduce_scatter_tensor_coalesced(outputs, inputs, opts);
                   });
    // gloo's counts two (getSequenceNumberForGroup()).
    return eachPair(outputs, inputs, 2, [&](at::Tensor &o, at::Tensor &i) {
      return _reduce_scatter_base(o, i, opts);
    });
  }

  WorkPtr alltoall_base(at::Tensor &output, at::Tensor &input,
                        std::vector<int64_t> &outputSplits, std::vector<int64_t> &inputSplits,
                        const c10d::AllToAllOptions &opts) override {
    std::vector<at::Tensor> all{output, input};
    Decision d = check(all);
    int64_t n = getSize();
    // Split sizes are each rank's own row and column of the matrix of
    // sizes: equal here may be unequal on another rank, which would then
    // go to gloo while this one called Coll. Only calls without them (equal
    // by definition) are Coll's.
    if (d.unsupported.empty() && (!inputSplits.empty() || !outputSplits.empty()))
      d.unsupported = "split sizes given (each rank sees only its own)";
    if (d.unsupported.empty() && (input.numel() % n || output.numel() != input.numel()))
      d.unsupported = "sizes that do not split evenly";
    return route("alltoall", c10d::OpType::ALLTOALL_BASE, input.nbytes(), 0, d, {output}, all,
                 [&] {
                   at::Tensor i = input.contiguous(), o = output.contiguous();
                   call(collAlltoAll(i.data_ptr(), o.data_ptr(), i.numel() / n, d.dtype, comm_,
                                     streamHandle(i)));
                   copyBack(output, o);
                 },
                 [&](c10d::Backend &fb) {
                   return fb.alltoall_base(output, input, outputSplits, inputSplits, opts);
                 });
  }

  /// gloo runs every list all_to_all: its sizes are each rank's own row
  /// and column of the matrix of sizes (as alltoall_base's splits), so
  /// sizes equal here may be unequal on another rank, which would then go
  /// to gloo while this one called Coll.
  WorkPtr alltoall(std::vector<at::Tensor> &outputs, std::vector<at::Tensor> &inputs,
                   const c10d::AllToAllOptions &opts) override {
    Decision d;
    d.unsupported = "a list all_to_all (each rank sees only its own sizes)";
    return route("alltoall", c10d::OpType::ALLTOALL, 0, 0, d, outputs, outputs, [] {},
                 [&](c10d::Backend &fb) { return fb.alltoall(outputs, inputs, opts); });
  }

  WorkPtr gather(std::vector<std::vector<at::Tensor>> &outputLists,
                 std::vector<at::Tensor> &inputs, const c10d::GatherOptions &opts) override {
    int root = static_cast<int>(opts.rootRank);
    Decision d;
    if (inputs.size() != 1)
      d.unsupported = "more than one input tensor";
    else
      d = check(inputs);
    std::vector<at::Tensor> outs = outputLists.empty() ? std::vector<at::Tensor>()
                                                       : outputLists[0];
    size_t nbytes = inputs.empty() ? 0 : inputs[0].nbytes() * getSize();
    return route("gather", c10d::OpType::GATHER, nbytes, root, d, outs, inputs,
                 [&] {
                   at::Tensor i = inputs[0].contiguous();
                   int64_t k = i.numel();
                   bool atRoot = getRank() == root;
                   at::Tensor flat = at::empty({atRoot ? k * getSize() : 0}, i.options());
                   call(collGather(i.data_ptr(), atRoot ? flat.data_ptr() : nullptr, k, d.dtype,
                                   root, comm_, streamHandle(i)));
                   if (atRoot) {
                     TORCH_CHECK(outs.size() == static_cast<size_t>(getSize()),
                                 "coll: gather's root needs one output per rank");
                     for (int r = 0; r < getSize(); ++r)
                       outs[r].copy_(flat.narrow(0, r * k, k).view_as(outs[r]));
                   }
                 },
                 [&](c10d::Backend &fb) { return fb.gather(outputLists, inputs, opts); });
  }

  WorkPtr scatter(std::vector<at::Tensor> &outputs,
                  std::vector<std::vector<at::Tensor>> &inputLists,
                  const c10d::ScatterOptions &opts) override {
    int root = static_cast<int>(opts.rootRank);
    Decision d;
    if (outputs.size() != 1)
      d.unsupported = "more than one output tensor";
    else
      d = check(outputs);
    size_t nbytes = outputs.empty() ? 0 : outputs[0].nbytes() * getSize();
    return route("scatter", c10d::OpType::SCATTER, nbytes, root, d, outputs, outputs,
                 [&] {
                   at::Tensor &out = outputs[0];
                   bool atRoot = getRank() == root;
                   at::Tensor flat;
                   if (atRoot) {
                     TORCH_CHECK(!inputLists.empty() &&
                                     inputLists[0].size() == static_cast<size_t>(getSize()),
                                 "coll: scatter's root needs one input per rank");
                     flat = flatten(inputLists[0]).to(out.scalar_type());
                   }
                   at::Tensor o = out.contiguous();
                   call(collScatter(atRoot ? flat.data_ptr() : nullptr, o.data_ptr(), o.numel(),
                                    d.dtype, root, comm_, streamHandle(o)));
                   copyBack(out, o);
                 },
                 [&](c10d::Backend &fb) { return fb.scatter(outputs, inputLists, opts); });
  }

  /// all_gather_coalesced: gloo's concatenates the inputs, gathers that
  /// once and cuts each rank's part back into the lists; so does Coll, in
  /// one collAllGather (one call of the group's, as gloo's).
  WorkPtr allgather_coalesced(std::vector<std::vector<at::Tensor>> &outputLists,
                              std::vector<at::Tensor> &inputs,
                              const c10d::AllgatherOptions &opts) override {
    std::vector<at::Tensor> all = inputs, outs;
    for (const auto &list : outputLists)
      for (const auto &o : list) {
        all.push_back(o);
        outs.push_back(o);
      }
    // outputLists[r][i]: rank r's input i, as gloo's lists are.
    Decision d = check(all);
    if (d.unsupported.empty() &&
        (inputs.empty() || outputLists.size() != static_cast<size_t>(getSize())))
      d.unsupported = "not one output list per rank";
    for (size_t r = 0; r < outputLists.size() && d.unsupported.empty(); ++r) {
      if (outputLists[r].size() != inputs.size()) {
        d.unsupported = "not one output per input";
        break;
      }
      for (size_t i = 0; i < inputs.size(); ++i)
        if (outputLists[r][i].numel() != inputs[i].numel())
          d.unsupported = "outputs of another size than their input";
    }
    const size_t nbytes = bytes(inputs) * getSize();
    return route("allgather", c10d::OpType::ALLGATHER_COALESCED, nbytes, 0, d, outs, all,
                 [&] {
                   at::Tensor flat = flatten(inputs);
                   const int64_t k = flat.numel();
                   at::Tensor gathered = at::empty({k * getSize()}, flat.options());
                   call(collAllGather(flat.data_ptr(), gathered.data_ptr(), k, d.dtype, comm_,
                                      streamHandle(flat)));
                   for (int r = 0; r < getSize(); ++r) {
                     int64_t offset = r * k;
                     for (size_t i = 0; i < inputs.size(); ++i) {
                       const int64_t n = inputs[i].numel();
                       outputLists[r][i].copy_(
                           gathered.narrow(0, offset, n).view_as(outputLists[r][i]));
                       offset += n;
                     }
                   }
                 },
                 [&](c10d::Backend &fb) {
                   return fb.allgather_coalesced(outputLists, inputs, opts);
                 });
  }

  // -- what gloo alone runs --------------------------------------------------

  WorkPtr allreduce_sparse(std::vector<at::Tensor> &tensors,
                           const c10d::AllreduceOptions &opts) override {
    return handedDown("allreduce of sparse tensors", c10d::OpType::ALLREDUCE,
                      [&](c10d::Backend &fb) { return fb.allreduce_sparse(tensors, opts); });
  }

  WorkPtr gather_single(at::Tensor &output, at::Tensor &input,
                        const c10d::GatherOptions &opts) override {
    return handedDown("gather_single", c10d::OpType::GATHER,
                      [&](c10d::Backend &fb) { return fb.gather_single(output, input, opts); });
  }

  /// gloo's, which blocks, in the group's order (route()'s, as any call
  /// gloo runs).
  void monitoredBarrier(const c10d::BarrierOptions &opts, bool waitAllRanks) override {
    handedDown("monitored_barrier", c10d::OpType::BARRIER, [&](c10d::Backend &fb) -> WorkPtr {
      fb.monitoredBarrier(opts, waitAllRanks);
      return c10::make_intrusive<CollWork>(getRank(), c10d::OpType::BARRIER,
                                           std::vector<at::Tensor>(), nullptr, std::nullopt);
    })->wait();
  }

  void setTimeout(std::chrono::milliseconds timeout) override {
    options_->timeout = timeout;
    if (BackendPtr fallback = currentFallback())
      fallback->setTimeout(timeout);
  }

  WorkPtr barrier(const c10d::BarrierOptions &opts) override {
    return route("barrier", c10d::OpType::BARRIER, 0, 0, Decision{}, {}, {},
                 [&] { call(collBarrier()); },
                 [&](c10d::Backend &fb) { return fb.barrier(opts); });
  }

  /// As gloo counts: its own count for the calls it runs (it counts some
  /// twice, and a call it refuses not at all); for the calls Coll runs, one
  /// per call, one per rank for a list reduce_scatter and two for a
  /// coalesced one, as gloo's; not the agreement after a failure (failed()).
  uint64_t getSequenceNumberForGroup() override {
    BackendPtr fallback = currentFallback();
    return served_ + (fallback ? fallback->getSequenceNumberForGroup() : 0) - agreements_;
  }

  // -- point to point --------------------------------------------------------

  // Coll runs sends and receives with MPI's matching rules, as gloo does
  // (collIsend, collIrecv: by peer and tag, in posting order, from any
  // source), on CPU tensors and, through a host copy, CUDA ones. gloo runs
  // those it refuses (onGloo), and all of them once Coll has retired from
  // the group (a failed call, agreed by every rank).
  WorkPtr send(std::vector<at::Tensor> &tensors, int dst, int tag) override {
    if (onGloo(tensors))
      return route("send", c10d::OpType::SEND, 0, 0, pointToPoint(), tensors, tensors, [] {},
                   [&](c10d::Backend &fb) { return fb.send(tensors, dst, tag); });
    return tagged(c10d::OpType::SEND, tensors[0], dst, tag);
  }

  WorkPtr recv(std::vector<at::Tensor> &tensors, int src, int tag) override {
    if (onGloo(tensors))
      return route("recv", c10d::OpType::RECV, 0, 0, pointToPoint(), tensors, tensors, [] {},
                   [&](c10d::Backend &fb) { return fb.recv(tensors, src, tag); });
    return tagged(c10d::OpType::RECV, tensors[0], src, tag);
  }

  WorkPtr recvAnysource(std::vector<at::Tensor> &tensors, int tag) override {
    if (onGloo(tensors))
      return route("recv from any source", c10d::OpType::RECVANYSOURCE, 0, 0, pointToPoint(),
                   tensors, tensors, [] {},
                   [&](c10d::Backend &fb) { return fb.recvAnysource(tensors, tag); });
    return tagged(c10d::OpType::RECVANYSOURCE, tensors[0], COLL_ANY_SOURCE, tag);
  }

  // -- lifetime ------------------------------------------------------------

  /// destroy_process_group: the communicator goes, and so does the backend
  /// underneath, once its calls are done, so that no thread of it is left at
  /// work when the interpreter ends (a gloo worker that drops a tensor then
  /// may need the GIL, and a thread that asks for it while Python finalizes
  /// is ended in the middle of C++ code: std::terminate). Calls after it fail.
  void shutdown() override {
    // Its threads may need the GIL to finish; the caller may hold it.
    std::optional<pybind11::gil_scoped_release> nogil;
    if (Py_IsInitialized() && PyGILState_Check())
      nogil.emplace();
    {
      std::lock_guard<std::mutex> lock(fallbackMutex_);
      shutDown_ = true;
    }
    drainFallback();
    destroy();
    BackendPtr fallback;
    {
      std::lock_guard<std::mutex> lock(fallbackMutex_);
      fallback = std::move(fallback_);
    }
    if (fallback)
      fallback->shutdown();
    // Where this was the last reference, its threads are joined here.
  }

  void abort() override {
    std::lock_guard<std::mutex> lock(commMutex_);
    if (comm_)
      collCommAbort(comm_);
    comm_ = nullptr;
  }

private:
  BackendPtr currentFallback() {
    std::lock_guard<std::mutex> lock(fallbackMutex_);
    return fallback_;
  }

  /// A call gloo alone runs, in the group's order.
  template <typename ViaFallback>
  WorkPtr handedDown(const char *what, c10d::OpType type, ViaFallback &&viaFallback) {
    Decision d;
    d.unsupported = std::string(what) + " (gloo alone runs it)";
    return route(what, type, 0, 0, d, {}, {}, [] {}, std::forward<ViaFallback>(viaFallback));
  }

  /// The sends and receives gloo runs: all of them once Coll has retired
  /// from the group; those gloo refuses (several tensors, a non-contiguous
  /// or sparse one), so that the error is gloo's own.
  bool onGloo(const std::vector<at::Tensor> &tensors) const {
    return retired_ || tensors.size() != 1 || !tensors[0].is_contiguous() ||
           tensors[0].is_sparse();
  }

  /// A send or receive of `t`'s bytes on Coll (TaggedWork).
  WorkPtr tagged(c10d::OpType type, at::Tensor &t, int peer, int tag) {
    if (auto closed = shutDownWork(type))
      return closed;
    const bool send = type == c10d::OpType::SEND;
    const bool direct = t.device().is_cpu();
    at::Tensor host = direct ? t
                             : (send ? t.to(at::kCPU).contiguous()
                                     : at::empty(t.sizes(), t.options().device(at::kCPU)));
    collRequest_t request = nullptr;
    collResult_t r;
    {
      std::lock_guard<std::mutex> lock(commMutex_);
      r = !comm_ ? collInvalidUsage
          : send ? collIsend(host.data_ptr(), host.nbytes(), collUint8, peer, tag, comm_, &request)
                 : collIrecv(host.data_ptr(), host.nbytes(), collUint8, peer, tag, comm_, &request);
    }
    if (r != collSuccess)
      return c10::make_intrusive<CollWork>(getRank(), type, std::vector<at::Tensor>{t},
                                           backendError(failureMessage(r, comm_)), std::nullopt);
    ++served_; // a call of the group's, as gloo counts its sends and receives
    if (info_)
      logOnce(std::string(send ? "send" : "recv") + ": Coll runs it (collIsend/collIrecv: by "
              "peer and tag, any source)" + (direct ? "" : ", through a host copy"));
    return c10::make_intrusive<TaggedWork>(getRank(), type, request, host, send ? at::Tensor() : t,
                                           options_->timeout);
  }

  static Decision pointToPoint() {
    Decision d;
    d.unsupported = "a send or receive of several tensors (Coll's take one)";
    return d;
  }

  /// Whether Coll takes every (output, input) of a coalesced call (each one
  /// as its single call would be, `sizes` saying that their sizes fit), so
  /// that the call runs on Coll whole or on gloo whole, as gloo's own.
  template <typename Sizes>
  Decision coalesced(const char *collective, std::vector<at::Tensor> &outputs,
                     std::vector<at::Tensor> &inputs, const c10d::ReduceOp *op, Sizes &&sizes) {
    Decision all;
    if (retired_) // every call is gloo's: this one whole, as gloo's own
      all.unsupported = "a call of Coll's failed before";
    else if (outputs.size() != inputs.size() || outputs.empty())
      all.unsupported = "not one output per input";
    for (size_t i = 0; i < outputs.size() && all.unsupported.empty(); ++i) {
      Decision d = check({outputs[i], inputs[i]});
      if (op)
        reduceOp(*op, d);
      if (d.unsupported.empty() && !sizes(outputs[i], inputs[i]))
        d.unsupported = "sizes that do not fit";
      size_t nbytes = std::max(outputs[i].nbytes(), inputs[i].nbytes());
      if (d.unsupported.empty() && nbytes > 0) {
        const Choice &choice = choose(collective, nbytes, 0);
        if (!choice.error.empty() || choice.library)
          d.unsupported = "a size Coll does not serve";
      }
      if (!d.unsupported.empty())
        all.unsupported = "coalesced, " + d.unsupported;
    }
    return all;
  }

  /// The coalesced forms: one call per (output, input), in order, as one
  /// Work; `weight` is what gloo's counts in its sequence number.
  template <typename Call>
  WorkPtr eachPair(std::vector<at::Tensor> &outputs, std::vector<at::Tensor> &inputs,
                   uint64_t weight, Call &&call) {
    TORCH_CHECK(outputs.size() == inputs.size(), "coll: ", outputs.size(), " outputs for ",
                inputs.size(), " inputs");
    std::vector<WorkPtr> works;
    const uint64_t served = served_;
    for (size_t i = 0; i < outputs.size(); ++i)
      works.push_back(call(outputs[i], inputs[i]));
    if (served_ > served)
      served_ = served + weight;
    return c10::make_intrusive<JoinedWork>(getRank(), c10d::OpType::COALESCED,
                                           std::move(works), outputs);
  }

  /// A barrier of Coll's: every rank sends rank 0 a message, and rank 0
  /// answers each once it has them all. Point to point, which no tuning
  /// rule sends to a library underneath (a small all-reduce may go there).
  collResult_t collBarrier() {
    int token = 0;
    const int size = getSize();
    if (size == 1)
      return collSuccess;
    if (getRank() != 0) {
      if (collResult_t r = collSend(&token, 1, collInt32, 0, comm_, nullptr); r != collSuccess)
        return r;
      return collRecv(&token, 1, collInt32, 0, comm_, nullptr);
    }
    std::vector<int> tokens(size);
    for (bool answer : {false, true}) {
      collGroupStart();
      collResult_t first = collSuccess;
      for (int r = 1; r < size; ++r) {
        collResult_t res = answer ? collSend(&token, 1, collInt32, r, comm_, nullptr)
                                  : collRecv(&tokens[r], 1, collInt32, r, comm_, nullptr);
        if (first == collSuccess)
          first = res;
      }
      collResult_t end = collGroupEnd();
      if (first != collSuccess)
        return first;
      if (end != collSuccess)
        return end;
    }
    return collSuccess;
  }

  /// Throws Coll's error for a failed call.
  void call(collResult_t result) {
    if (result != collSuccess)
      throw CollFailure{failureMessage(result, comm_)};
  }
  /// Throws Coll's error for a failed call outside a collective (as torch's
  /// DistBackendError: split_group raises it).
  static void call(collResult_t result, collComm_t comm) {
    if (result != collSuccess)
      std::rethrow_exception(backendError(failureMessage(result, comm)));
  }

  struct CollFailure {
    std::string message;
  };

  void logOnce(const std::string &message) {
    {
      std::lock_guard<std::mutex> lock(saidMutex_);
      if (!said_.insert(message).second)
        return;
    }
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    std::fprintf(stderr, "%s:%d:%ld [%d] COLL INFO torch %s (said once)\n", host,
                 static_cast<int>(getpid()), static_cast<long>(syscall(SYS_gettid)), getRank(),
                 message.c_str());
    std::fflush(stderr);
  }

  /// The Work of a call after shutdown(): it fails with that reason.
  WorkPtr shutDownWork(c10d::OpType type) {
    {
      std::lock_guard<std::mutex> lock(fallbackMutex_);
      if (!shutDown_)
        return {};
    }
    return c10::make_intrusive<CollWork>(
        getRank(), type, std::vector<at::Tensor>(),
        backendError("coll: the process group was shut down (destroy_process_group)"),
        std::nullopt);
  }

  /// Waits for the calls handed to the backend underneath, so that a Coll
  /// call starts after them as the group's calls were issued.
  void drainFallback() {
    std::vector<WorkPtr> pending;
    {
      std::lock_guard<std::mutex> lock(pendingMutex_);
      pending.swap(pending_);
    }
    for (auto &w : pending) {
      try {
        w->wait();
      } catch (...) {
        // its error is its caller's, through that Work
      }
    }
  }

  /// Coll serves the call (`viaColl`) when `d` allows it and the
  /// communicator's choice for the size is an algorithm; else `viaFallback`.
  template <typename ViaColl, typename ViaFallback>
  WorkPtr route(const char *collective, c10d::OpType type, size_t nbytes, int root,
                const Decision &d, std::vector<at::Tensor> outputs,
                const std::vector<at::Tensor> &tensors, ViaColl &&viaColl,
                ViaFallback &&viaFallback) {
    if (auto closed = shutDownWork(type))
      return closed;
    const bool pointToPoint = type == c10d::OpType::SEND || type == c10d::OpType::RECV ||
                              type == c10d::OpType::RECVANYSOURCE;
    // The group's collectives, numbered alike on every rank (a send or a
    // receive is one rank's call, and gloo's alone).
    const uint64_t number = pointToPoint ? 0 : ++collectives_;
    auto handDown = [&] {
      BackendPtr fallback;
      {
        std::lock_guard<std::mutex> lock(fallbackMutex_);
        fallback = fallback_;
      }
      if (!fallback)
        return shutDownWork(type);
      WorkPtr work = viaFallback(*fallback);
      // gloo's Works of sends and receives wait for their message on every
      // wait() (a second wait blocks until the timeout): they are their
      // caller's to wait for, once, as with gloo alone.
      if (pointToPoint)
        return work;
      std::lock_guard<std::mutex> lock(pendingMutex_);
      std::erase_if(pending_, [](const WorkPtr &w) { return w->isCompleted(); });
      pending_.push_back(work);
      return work;
    };
    if (retired_)
      return handDown();
    // A collective gloo runs while Coll serves the group is preceded by a
    // call of Coll's, so that a rank learns of a peer's failure before it
    // calls gloo (failed(), below).
    auto heartbeatThenHandDown = [&] {
      if (pointToPoint)
        return handDown();
      collResult_t result = collBarrier();
      if (result != collSuccess)
        return failed(number, failureMessage(result, comm_), false, handDown, type, outputs);
      return handDown();
    };
    if (!d.unsupported.empty()) {
      if (info_)
        logOnce(std::string(collective) + ": falls back to " + fallbackName_ + ": " +
                d.unsupported);
      return heartbeatThenHandDown();
    }
    if (nbytes > 0) {
      const Choice &choice = choose(collective, nbytes, root);
      if (!choice.error.empty()) {
        if (info_)
          logOnce(std::string(collective) + ": falls back to " + fallbackName_ + ": " +
                  choice.error);
        return heartbeatThenHandDown();
      }
      if (choice.library) {
        if (info_)
          logOnce(std::string(collective) + ": " + fallbackName_ + " runs it by " + choice.why);
        return heartbeatThenHandDown();
      }
      if (info_) {
        bool gpu = false;
        for (const auto &t : tensors)
          gpu = gpu || t.is_cuda();
        if (choice.algo == "local")
          logOnce(std::string(collective) + ": Coll runs it as a copy (" + choice.why + ")");
        else
          logOnce(std::string(collective) + ": Coll runs it" + (gpu ? " on the GPU" : "") +
                  " with " + choice.algo + " by " + choice.why);
      }
    }
    drainFallback();
    std::optional<c10::Stream> stream;
    for (const auto &t : tensors)
      if (!stream)
        stream = streamOf(t);
    std::optional<c10::DeviceGuard> guard;
    if (stream)
      guard.emplace(stream->device());
    ++served_;
    std::exception_ptr error;
    try {
      viaColl();
    } catch (const CollFailure &f) {
      guard.reset();
      return failed(number, f.message, true, handDown, type, outputs);
    } catch (...) {
      error = std::current_exception();
    }
    return c10::make_intrusive<CollWork>(getRank(), type, std::move(outputs), error,
                                         error ? std::nullopt : stream);
  }

  /// A call of Coll's failed on this rank (`ranColl`: the call itself; else
  /// the call of Coll's before a collective gloo runs). The communicator is
  /// aborted, which makes the other ranks' calls on it fail at once, so
  /// every rank that is alive gets here: at this collective, or, where its
  /// own call succeeded before this rank's failed, at its next one. The
  /// ranks then agree, through gloo, on the first collective that failed
  /// (the least number any rank brings): from it on the group runs every
  /// call on gloo. A rank whose failure comes later than that collective
  /// runs its failed call on gloo, as the others do (its call of Coll's
  /// found the communicator aborted before it started); the others raise
  /// the call's error. One WARN line names the first failure this rank saw.
  template <typename HandDown>
  WorkPtr failed(uint64_t number, const std::string &message, bool ranColl, HandDown &handDown,
                 c10d::OpType type, std::vector<at::Tensor> &outputs) {
    // Revoked, not freed: the other ranks' calls on it end at once, and
    // shrink_group can still make the survivors' communicator from it.
    bool lost = false;
    {
      std::lock_guard<std::mutex> lock(commMutex_);
      if (comm_) {
        collCommRevoke(comm_, COLL_REVOKE_DEFAULT);
        // A rank that died (the liveness watch's report): gloo would wait
        // for it, so there is no agreement and no call on gloo; the error
        // is the caller's, who may shrink the group.
        lost = message.find(" exited") != std::string::npos ||
               std::string_view(collGetLastError(comm_)).find(" exited") !=
                   std::string_view::npos;
      }
    }
    uint64_t first = number;
    std::string agreement;
    if (BackendPtr fallback = lost ? nullptr : currentFallback()) {
      try {
        std::vector<at::Tensor> t{at::full({1}, static_cast<int64_t>(number), at::kLong)};
        c10d::AllreduceOptions o;
        o.reduceOp = c10d::ReduceOp::MIN;
        ++agreements_; // gloo counts it
        fallback->allreduce(t, o)->wait();
        first = static_cast<uint64_t>(t[0].item<int64_t>());
      } catch (const std::exception &e) {
        agreement = std::string(" (the ranks could not agree through ") + fallbackName_ + ": " +
                    std::string(e.what()).substr(0, std::string(e.what()).find('\n')) + ")";
      }
    }
    retired_ = true;
    if (debugLevel() >= 2) {
      char host[256] = "";
      gethostname(host, sizeof host - 1);
      std::fprintf(stderr,
                   "%s:%d:%ld [%d] COLL WARN torch: the group runs every call on %s from its "
                   "collective %llu on: a call of Coll's failed: %s%s\n",
                   host, static_cast<int>(getpid()), static_cast<long>(syscall(SYS_gettid)),
                   getRank(), fallbackName_.c_str(), static_cast<unsigned long long>(first),
                   message.c_str(), agreement.c_str());
      std::fflush(stderr);
    }
    if (!lost && (!ranColl || first < number))
      return handDown();
    return c10::make_intrusive<CollWork>(getRank(), type, std::move(outputs),
                                         backendError(message), std::nullopt);
  }

  /// What the communicator chooses for a call: an algorithm (or a copy),
  /// a library underneath, or nothing (`error`).
  struct Choice {
    bool library = false;
    std::string algo, why, error;
  };

  /// The communicator's choice, asked once per (collective, size, root):
  /// its table does not change while the group lives (a device that
  /// refuses an algorithm makes Coll choose another, still Coll's).
  const Choice &choose(const char *collective, size_t nbytes, int root) {
    std::lock_guard<std::mutex> lock(choicesMutex_);
    auto key = std::make_tuple(std::string_view(collective), nbytes, root);
    if (auto it = choices_.find(key); it != choices_.end())
      return it->second;
    if (choices_.size() >= 4096)
      choices_.clear(); // sizes without end: keep the memory bounded
    Choice c;
    char text[1024] = "";
    if (collCommQueryChoice(comm_, collective, nbytes, root, text, sizeof text) != collSuccess) {
      c.error = collGetLastError(comm_);
      c.error = c.error.substr(0, c.error.find('\n'));
    } else {
      std::string_view all(text);
      size_t sep = all.find(" -- ");
      c.algo = std::string(all.substr(0, sep));
      c.why = sep == std::string_view::npos ? "" : std::string(all.substr(sep + 4));
      c.library = c.algo.rfind("library:", 0) == 0;
    }
    return choices_.emplace(key, std::move(c)).first->second;
  }

  void destroy() {
    std::lock_guard<std::mutex> lock(commMutex_);
    if (comm_)
      collCommDestroy(comm_);
    comm_ = nullptr;
  }

  collComm_t comm_;
  /// shrink(): the survivors' store (on the new rank 0, its server).
  c10::intrusive_ptr<c10d::Store> shrinkStore_;
  std::mutex commMutex_;
  std::mutex fallbackMutex_;
  bool shutDown_ = false;
  BackendPtr fallback_; ///< null after shutdown()
  std::string fallbackName_;
  bool info_;
  c10::intrusive_ptr<Options> options_; ///< getBackendOptions(): "coll", the timeout
  std::mutex saidMutex_;
  std::set<std::string> said_;
  /// The group's collectives (a number each, alike on every rank), the
  /// calls Coll ran, and the agreements after a failure, for
  /// getSequenceNumberForGroup(); all in the caller's thread.
  uint64_t collectives_ = 0, served_ = 0, agreements_ = 0;
  /// A call of Coll's failed: every call goes to gloo (failed()).
  bool retired_ = false;
  std::mutex pendingMutex_;
  std::vector<WorkPtr> pending_;
  std::mutex choicesMutex_;
  std::map<std::tuple<std::string_view, size_t, int>, Choice> choices_;
};

} // namespace
} // namespace coll::pytorch

#ifndef COLL_TORCH_VERSION // runtime/python/CMakeLists.txt defines it
#error "COLL_TORCH_VERSION: the torch.__version__ this module is built against"
#endif

/// What coll/torch.py reads from this module's file before it loads it:
/// where this Python's torch is another, the module is not loaded (torch's
/// C++ API has no stable ABI) and the import says so.
extern "C" __attribute__((used)) const char collC10dBuiltAgainst[] =
    "coll._c10d built against torch " COLL_TORCH_VERSION;

PYBIND11_MODULE(_c10d, m) {
  using namespace coll::pytorch;
  m.doc() = "coll.torch's c10d backend (runtime/python/backend)";
  // Takes over the communicator `comm` (a collComm_t as an integer, which the
  // caller must not use again); `fallback` runs what Coll does not.
  m.def(
      "create",
      [](uintptr_t comm, int rank, int size, BackendPtr fallback, const std::string &fallbackName,
         std::chrono::milliseconds timeout) -> BackendPtr {
        TORCH_CHECK(comm != 0, "coll: create() needs a communicator");
        TORCH_CHECK(fallback, "coll: create() needs the backend underneath");
        return c10::make_intrusive<ProcessGroupColl>(reinterpret_cast<collComm_t>(comm), rank,
                                                     size, std::move(fallback), fallbackName,
                                                     timeout);
      },
      pybind11::arg("comm"), pybind11::arg("rank"), pybind11::arg("size"),
      pybind11::arg("fallback"), pybind11::arg("fallback_name"), pybind11::arg("timeout"),
      pybind11::call_guard<pybind11::gil_scoped_release>());
}
