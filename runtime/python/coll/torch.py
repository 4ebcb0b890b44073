"""Coll as a torch.distributed backend: ``import coll.torch``, then
``dist.init_process_group(backend="coll")``.

The backend is a C++ ``c10d::Backend``, the module ``coll._c10d``
(runtime/python/backend/ProcessGroupColl.cpp), which `pip install .` builds
against the torch it finds: a call goes from torch to libcoll.so's C API
with no Python in between. This file makes its communicator and its
fallback once per group. Where that module is missing or does not load (a
build without torch, a torch of another version), or with
``COLL_TORCH_BACKEND=python``, the group is the Python ``ProcessGroup``
below, which routes the same way through ctypes at a higher cost per call
(docs/PYTORCH.md). Each process group owns:

- a Coll communicator, made from rank 0's unique id, which travels through
  the group's c10d store;
- a second torch backend underneath (``gloo`` unless ``COLL_TORCH_FALLBACK``
  names another) for what Coll does not serve: an unsupported dtype, op or
  device, unequal all-to-all splits, a call no algorithm applies to, or a
  size range a tuning rule sends to ``gloo``/``torch``;
- one worker thread that runs the group's calls in the order they were
  issued, whichever library serves each, so the two never deadlock each
  other. ctypes releases the GIL for the duration of every Coll call.

``async_op=True`` returns a Work whose ``wait()`` blocks until the call has
completed (and raises its error); with ``async_op=False`` torch waits
before returning. CUDA tensors go to Coll's GPU backend when libcoll has
one (``coll.device_buffers_supported()``): a call is enqueued after the
work of the stream that was current when it was issued, and that stream
waits for it, as with NCCL; ``wait()`` then returns once it is enqueued and
makes the current stream wait for it. At ``COLL_DEBUG=INFO`` rank 0 prints the selection table
when the group is made (libcoll does), and every process says once per
(collective, reason) where a call went and why.
"""

import glob
import importlib.util
import os
import queue
import socket
import sys
import sysconfig
import threading

import torch
import torch.distributed as dist

import coll

__all__ = ["CollProcessGroup", "create_backend"]

_DTYPES = {
    torch.float32: coll.FLOAT32, torch.float64: coll.FLOAT64, torch.float16: coll.FLOAT16,
    torch.bfloat16: coll.BFLOAT16, torch.int32: coll.INT32, torch.int64: coll.INT64,
    torch.int8: coll.INT8, torch.uint8: coll.UINT8,
}
_OPS = [(dist.ReduceOp.SUM, coll.SUM, "SUM"), (dist.ReduceOp.PRODUCT, coll.PROD, "PRODUCT"),
        (dist.ReduceOp.MIN, coll.MIN, "MIN"), (dist.ReduceOp.MAX, coll.MAX, "MAX"),
        (dist.ReduceOp.AVG, coll.AVG, "AVG")]


def _debug_level():
    return {"NONE": 0, "VERSION": 1, "WARN": 2, "INFO": 3, "TRACE": 4}.get(
        os.environ.get("COLL_DEBUG", "WARN").strip().upper(), 2)


def _say(level, rank, message):
    """One line in libcoll's format, at COLL_DEBUG=`level` or above."""
    if _debug_level() >= {"WARN": 2, "INFO": 3}[level]:
        print(f"{socket.gethostname()}:{os.getpid()}:{threading.get_native_id()} "
              f"[{rank}] COLL {level} torch {message}", file=sys.stderr, flush=True)


def _load_cpp_backend():
    """(module, "") for coll._c10d, or (None, why not)."""
    choice = os.environ.get("COLL_TORCH_BACKEND", "").strip().lower()
    if choice == "python":
        return None, "COLL_TORCH_BACKEND=python"
    if choice not in ("", "cpp"):
        raise ValueError(f"coll.torch: COLL_TORCH_BACKEND must be cpp or python, not '{choice}'")
    if importlib.util.find_spec("coll._c10d") is not None:
        # pip install and CMake install: coll/_c10d*.so
        try:
            from coll import _c10d
            return _c10d, ""
        except ImportError as e:
            return None, f"coll._c10d does not load: {e}"
    # The build tree: build/lib/_c10d*.so beside the libcoll.so coll loaded.
    here = os.path.dirname(os.path.realpath(coll.library_path))
    path = os.path.join(here, "_c10d" + sysconfig.get_config_var("EXT_SUFFIX"))
    if os.path.sep in coll.library_path and os.path.exists(path):
        try:
            spec = importlib.util.spec_from_file_location("coll._c10d", path)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            return module, ""
        except ImportError as e:
            return None, f"{path} does not load: {e}"
    others = glob.glob(os.path.join(here, "_c10d.*.so"))
    return None, ("coll._c10d is built for another Python: " + ", ".join(others) if others
                  else "coll._c10d is not built (coll was built where torch was not installed; "
                "docs/PYTORCH.md, \"Install\")")


_cpp, _cpp_why = _load_cpp_backend()


class _Unsupported(Exception):
    """Coll does not serve this call; the message says why."""


class _Work(dist.Work):
    """Completes when the group's worker has run the call."""

    def __init__(self, result):
        super().__init__()
        self._result = result
        self._event = threading.Event()
        self._error = None
        self._future = torch.futures.Future()
        self._cuda_event = None  # CUDA calls: recorded after the call on its stream

    def _finish(self, error=None):
        self._error = error
        if error is None:
            self._future.set_result(self._result)
        else:
            self._future.set_exception(error)
        self._event.set()

    def wait(self, timeout=None):
        self._event.wait()
        if self._error is not None:
            raise self._error
        if self._cuda_event is not None:
            torch.cuda.current_stream().wait_event(self._cuda_event)
        return True

    def is_completed(self):
        return self._event.is_set() and (self._cuda_event is None or self._cuda_event.query())

    def is_success(self):
        return self._event.is_set() and self._error is None

    def exception(self):
        return self._error

    def get_future(self):
        return self._future

    def result(self):
        self.wait()
        return self._result


def _flat(tensors):
    return torch.cat([t.reshape(-1) for t in tensors]) if tensors else torch.empty(0)


def _stream(t):
    """The cudaStream_t a call on `t` runs after: the current stream of its
    device (the worker makes the issuing stream current); 0 on the CPU."""
    return torch.cuda.current_stream(t.device).cuda_stream if t.is_cuda else 0


class CollProcessGroup(dist.ProcessGroup):
    """One torch process group served by Coll, with `fallback` underneath."""

    def __init__(self, store, rank, size, timeout, fallback=None):
        super().__init__(rank, size)
        self._rank, self._size = rank, size
        self._fallback_name, self._fallback = _make_fallback(store, rank, size, timeout, fallback)
        self._comm = _make_comm(store, rank, size)
        self._said = set()
        self._said_lock = threading.Lock()
        self._queue = queue.Queue()
        self._broken = None
        self._shut_down = False
        self._worker = threading.Thread(target=self._run, name=f"coll-pg-{rank}", daemon=True)
        self._worker.start()

    # -- bookkeeping ------------------------------------------------------

    def getBackendName(self):
        return "coll"

    def name(self):
        return "coll"

    def _log_once(self, message):
        if _debug_level() < 3:
            return
        with self._said_lock:
            if message in self._said:
                return
            self._said.add(message)
        print(f"{socket.gethostname()}:{os.getpid()}:{threading.get_native_id()} "
              f"[{self._rank}] COLL INFO torch {message} (said once)", file=sys.stderr,
              flush=True)

    def _run(self):
        while True:
            item = self._queue.get()
            if item is None:
                return
            fn, work, stream = item
            if self._broken is not None:
                work._finish(RuntimeError(f"coll: the process group is broken by an earlier "
                                          f"error: {self._broken}"))
                continue
            try:
                if stream is None:
                    fn()
                else:
                    # The issuing stream, current here too: the call runs after
                    # its work, and its temporaries are ordered with it.
                    with torch.cuda.device(stream.device), torch.cuda.stream(stream):
                        fn()
                        work._cuda_event = torch.cuda.Event()
                        work._cuda_event.record(stream)
                work._finish()
            except Exception as e:  # the call's error goes to its Work
                if isinstance(e, coll.CollError):
                    self._broken = str(e)
                work._finish(e)

    def _submit(self, fn, result, tensors=()):
        """Queues `fn`; a call on CUDA `tensors` runs with the stream that is
        current now."""
        cuda = next((t for t in tensors if t.is_cuda), None)
        stream = torch.cuda.current_stream(cuda.device) if cuda is not None else None
        work = _Work(result)
        if self._shut_down:
            work._finish(RuntimeError("coll: the process group was shut down "
                                      "(destroy_process_group)"))
            return work
        self._queue.put((fn, work, stream))
        return work

    # -- deciding ---------------------------------------------------------

    @staticmethod
    def _dtype(tensors, what):
        t0 = tensors[0]
        for t in tensors:
            if t.device.type == "cuda":
                ok, why = coll.device_buffers_supported()
                if not ok:
                    raise _Unsupported(f"cuda tensors: {why}")
            elif t.device.type != "cpu":
                raise _Unsupported(f"{t.device.type} tensors")
            if t.device != t0.device:
                raise _Unsupported("tensors on different devices")
            if t.dtype != t0.dtype:
                raise _Unsupported("tensors of different dtypes")
        if t0.dtype not in _DTYPES:
            raise _Unsupported(f"dtype {t0.dtype}")
        return _DTYPES[t0.dtype]

    @staticmethod
    def _op(opts):
        op = opts.reduceOp
        for torch_op, coll_op, _ in _OPS:
            if op == torch_op:
                return coll_op
        raise _Unsupported(f"reduce op {op}")

    def _route(self, collective, nbytes, root, prepare, via_coll, via_fallback, result,
               tensors=()):
        """Runs `via_coll` when Coll serves the call, else `via_fallback`;
        `prepare` raises _Unsupported with the reason. `tensors`: those of
        the call, which say whether it runs on a CUDA stream."""
        try:
            prepare()
            if nbytes > 0:
                algo, why = self._comm.query_choice(collective, nbytes, root)
                if algo.startswith("library:"):
                    self._log_once(f"{collective}: {self._fallback_name} runs it by {why}")
                    return self._submit(via_fallback, result)
                where = " on the GPU" if any(t.is_cuda for t in tensors) else ""
                if algo == "local":
                    self._log_once(f"{collective}: Coll runs it as a copy ({why})")
                else:
                    self._log_once(f"{collective}: Coll runs it{where} with {algo} by {why}")
        except _Unsupported as e:
            self._log_once(f"{collective}: falls back to {self._fallback_name}: {e}")
            return self._submit(via_fallback, result)
        except coll.CollError as e:
            self._log_once(f"{collective}: falls back to {self._fallback_name}: "
                           f"{str(e).splitlines()[0]}")
            return self._submit(via_fallback, result)
        return self._submit(via_coll, result, tensors)

    def _gloo(self, call):
        """A function that runs `call` on the fallback and waits for it."""
        return lambda: call().wait()

    # -- collectives ------------------------------------------------------

    def allreduce(self, tensors, opts=None):
        opts = opts or dist.AllreduceOptions()
        nbytes = sum(t.numel() * t.element_size() for t in tensors)

        def prepare():
            self._dtype(tensors, "allreduce")
            self._op(opts)

        def run():
            dt, op = self._dtype(tensors, ""), self._op(opts)
            for t in tensors:
                c = t.contiguous()
                self._comm.all_reduce(c.data_ptr(), c.data_ptr(), c.numel(), dt, op, _stream(c))
                if c.data_ptr() != t.data_ptr():
                    t.copy_(c)

        return self._route("allreduce", nbytes, 0, prepare, run,
                           self._gloo(lambda: self._fallback.allreduce(tensors, opts)), tensors,
                           tensors)

    def allreduce_coalesced(self, tensors, opts=None):
        opts = opts or dist.AllreduceCoalescedOptions()
        o = dist.AllreduceOptions()
        o.reduceOp = opts.reduceOp
        return self.allreduce(list(tensors), o)

    def broadcast(self, tensors, opts=None):
        opts = opts or dist.BroadcastOptions()
        root = opts.rootRank
        nbytes = sum(t.numel() * t.element_size() for t in tensors)

        def run():
            dt = self._dtype(tensors, "")
            for t in tensors:
                c = t.contiguous()
                self._comm.broadcast(c.data_ptr(), c.data_ptr(), c.numel(), dt, root, _stream(c))
                if c.data_ptr() != t.data_ptr():
                    t.copy_(c)

        return self._route("broadcast", nbytes, root, lambda: self._dtype(tensors, ""), run,
                           self._gloo(lambda: self._fallback.broadcast(tensors, opts)), tensors,
                           tensors)

    def reduce(self, tensors, opts=None):
        opts = opts or dist.ReduceOptions()
        root = opts.rootRank
        nbytes = sum(t.numel() * t.element_size() for t in tensors)

        def prepare():
            self._dtype(tensors, "")
            self._op(opts)

        def run():
            dt, op = self._dtype(tensors, ""), self._op(opts)
            for t in tensors:
                c = t.contiguous()
                self._comm.reduce(c.data_ptr(), c.data_ptr(), c.numel(), dt, op, root, _stream(c))
                if c.data_ptr() != t.data_ptr():
                    t.copy_(c)

        return self._route("reduce", nbytes, root, prepare, run,
                           self._gloo(lambda: self._fallback.reduce(tensors, opts)), tensors,
                           tensors)

    def all_gather_single(self, output, input, opts=None):
        opts = opts or dist.AllgatherOptions()

        def prepare():
            self._dtype([output, input], "")
            if output.numel() != input.numel() * self._size:
                raise _Unsupported("an output that is not size x the input")

        def run():
            dt = self._dtype([output, input], "")
            i, o = input.contiguous(), output.contiguous()
            self._comm.all_gather(i.data_ptr(), o.data_ptr(), i.numel(), dt, _stream(i))
            if o.data_ptr() != output.data_ptr():
                output.copy_(o)

        return self._route("allgather", output.numel() * output.element_size(), 0, prepare, run,
                           self._gloo(lambda: self._fallback._allgather_base(output, input,
                                                                             opts)),
                           [output], [output, input])

    _allgather_base = all_gather_single

    def allgather(self, output_lists, inputs, opts=None):
        opts = opts or dist.AllgatherOptions()
        outs = output_lists[0]
        inp = inputs[0]

        def prepare():
            self._dtype(outs + [inp], "")
            if len(inputs) != 1 or any(o.numel() != inp.numel() for o in outs):
                raise _Unsupported("outputs of different sizes")

        def run():
            dt = self._dtype(outs + [inp], "")
            i = inp.contiguous()
            flat = torch.empty(i.numel() * self._size, dtype=i.dtype, device=i.device)
            self._comm.all_gather(i.data_ptr(), flat.data_ptr(), i.numel(), dt, _stream(i))
            for r, o in enumerate(outs):
                o.copy_(flat[r * i.numel():(r + 1) * i.numel()].view_as(o))

        return self._route("allgather", inp.numel() * inp.element_size() * self._size, 0,
                           prepare, run,
                           self._gloo(lambda: self._fallback.allgather(output_lists, inputs,
                                                                       opts)),
                           output_lists, outs + [inp])

    def all_gather_single_coalesced(self, outputs, inputs, opts=None):
        works = [self.all_gather_single(o, i, opts) for o, i in zip(outputs, inputs)]
        return self._join(works, outputs)

    allgather_into_tensor_coalesced = all_gather_single_coalesced

    def reduce_scatter_single(self, output, input, opts=None):
        opts = opts or dist.ReduceScatterOptions()

        def prepare():
            self._dtype([output, input], "")
            self._op(opts)
            if input.numel() != output.numel() * self._size:
                raise _Unsupported("an input that is not size x the output")

        def run():
            dt, op = self._dtype([output, input], ""), self._op(opts)
            i, o = input.contiguous(), output.contiguous()
            self._comm.reduce_scatter(i.data_ptr(), o.data_ptr(), o.numel(), dt, op, _stream(i))
            if o.data_ptr() != output.data_ptr():
                output.copy_(o)

        return self._route("reducescatter", input.numel() * input.element_size(), 0, prepare,
                           run,
                           self._gloo(lambda: self._fallback._reduce_scatter_base(
                               output, input, opts)),
                           [output], [output, input])

    _reduce_scatter_base = reduce_scatter_single

    def reduce_scatter(self, outputs, input_lists, opts=None):
        opts = opts or dist.ReduceScatterOptions()
        out, ins = outputs[0], input_lists[0]

        def prepare():
            self._dtype(ins + [out], "")
            self._op(opts)
            if any(i.numel() != out.numel() for i in ins):
                raise _Unsupported("inputs of different sizes")

        def run():
            dt, op = self._dtype(ins + [out], ""), self._op(opts)
            flat = _flat(ins).to(out.dtype)
            o = out.contiguous()
            self._comm.reduce_scatter(flat.data_ptr(), o.data_ptr(), o.numel(), dt, op, _stream(o))
            if o.data_ptr() != out.data_ptr():
                out.copy_(o)

        return self._route("reducescatter", out.numel() * out.element_size() * self._size, 0,
                           prepare, run,
                           self._gloo(lambda: self._fallback.reduce_scatter(outputs, input_lists,
                                                                            opts)),
                           outputs, ins + [out])

    def reduce_scatter_single_coalesced(self, outputs, inputs, opts=None):
        works = [self.reduce_scatter_single(o, i, opts) for o, i in zip(outputs, inputs)]
        return self._join(works, outputs)

    reduce_scatter_tensor_coalesced = reduce_scatter_single_coalesced

    def all_to_all_single(self, output, input, output_splits, input_splits, opts=None):
        opts = opts or dist.AllToAllOptions()
        n = self._size

        def prepare():
            self._dtype([output, input], "")
            equal = input.numel() // n if n else 0
            first = input.shape[0] if input.dim() else 1
            per_row = input.numel() // first if first else 0
            for splits in (input_splits, output_splits):
                if splits and any(s * per_row != equal for s in splits):
                    raise _Unsupported("unequal splits")
            if input.numel() % n or output.numel() != input.numel():
                raise _Unsupported("unequal splits")

        def run():
            dt = self._dtype([output, input], "")
            i, o = input.contiguous(), output.contiguous()
            self._comm.all_to_all(i.data_ptr(), o.data_ptr(), i.numel() // n, dt, _stream(i))
            if o.data_ptr() != output.data_ptr():
                output.copy_(o)

        return self._route("alltoall", input.numel() * input.element_size(), 0, prepare, run,
                           self._gloo(lambda: self._fallback.alltoall_base(
                               output, input, output_splits, input_splits, opts)),
                           [output], [output, input])

    alltoall_base = all_to_all_single

    def alltoall(self, outputs, inputs, opts=None):
        opts = opts or dist.AllToAllOptions()

        def prepare():
            self._dtype(outputs + inputs, "")
            if len({t.numel() for t in outputs + inputs}) > 1:
                raise _Unsupported("tensors of different sizes")

        def run():
            dt = self._dtype(outputs + inputs, "")
            flat_in = _flat(inputs)
            flat_out = torch.empty_like(flat_in)
            self._comm.all_to_all(flat_in.data_ptr(), flat_out.data_ptr(), inputs[0].numel(), dt,
                                  _stream(flat_in))
            k = inputs[0].numel()
            for r, o in enumerate(outputs):
                o.copy_(flat_out[r * k:(r + 1) * k].view_as(o))

        nbytes = sum(t.numel() * t.element_size() for t in inputs)
        return self._route("alltoall", nbytes, 0, prepare, run,
                           self._gloo(lambda: self._fallback.alltoall(outputs, inputs, opts)),
                           outputs, outputs + inputs)

    def gather(self, output_lists, inputs, opts=None):
        opts = opts or dist.GatherOptions()
        root, inp = opts.rootRank, inputs[0]

        def prepare():
            self._dtype([inp], "")

        def run():
            dt = self._dtype([inp], "")
            i = inp.contiguous()
            flat = torch.empty(i.numel() * self._size if self._rank == root else 0,
                               dtype=i.dtype, device=i.device)
            self._comm.gather(i.data_ptr(), flat.data_ptr() if self._rank == root else 0,
                              i.numel(), dt, root, _stream(i))
            if self._rank == root:
                for r, o in enumerate(output_lists[0]):
                    o.copy_(flat[r * i.numel():(r + 1) * i.numel()].view_as(o))

        return self._route("gather", inp.numel() * inp.element_size() * self._size, root,
                           prepare, run,
                           self._gloo(lambda: self._fallback.gather(output_lists, inputs, opts)),
                           output_lists, [inp])

    def scatter(self, outputs, input_lists, opts=None):
        opts = opts or dist.ScatterOptions()
        root, out = opts.rootRank, outputs[0]

        def prepare():
            self._dtype([out], "")

        def run():
            dt = self._dtype([out], "")
            flat = _flat(input_lists[0]).to(out.dtype) if self._rank == root else None
            o = out.contiguous()
            self._comm.scatter(flat.data_ptr() if flat is not None else 0, o.data_ptr(),
                               o.numel(), dt, root, _stream(o))
            if o.data_ptr() != out.data_ptr():
                out.copy_(o)

        return self._route("scatter", out.numel() * out.element_size() * self._size, root,
                           prepare, run,
                           self._gloo(lambda: self._fallback.scatter(outputs, input_lists, opts)),
                           outputs, [out])

    def barrier(self, opts=None):
        token = torch.zeros(1, dtype=torch.int32)

        def run():
            self._comm.all_reduce(token.data_ptr(), token.data_ptr(), 1, coll.INT32, coll.SUM)

        return self._submit(run, [])

    # -- point to point -----------------------------------------------------

    def send(self, tensors, dst, tag=0):
        t = tensors[0]
        try:
            dt = self._dtype([t], "")
            if t.is_cuda:
                raise _Unsupported("cuda tensors (Coll's point-to-point calls take host memory)")
        except _Unsupported as e:
            self._log_once(f"send: falls back to {self._fallback_name}: {e}")
            return self._submit(self._gloo(lambda: self._fallback.send(tensors, dst, tag)),
                                tensors)
        c = t.contiguous()
        return self._submit(lambda: self._comm.send(c.data_ptr(), c.numel(), dt, dst), tensors)

    def recv(self, tensors, src, tag=0):
        t = tensors[0]
        try:
            dt = self._dtype([t], "")
            if t.is_cuda:
                raise _Unsupported("cuda tensors (Coll's point-to-point calls take host memory)")
        except _Unsupported as e:
            self._log_once(f"recv: falls back to {self._fallback_name}: {e}")
            return self._submit(self._gloo(lambda: self._fallback.recv(tensors, src, tag)),
                                tensors)

        def run():
            c = t.contiguous()
            self._comm.recv(c.data_ptr(), c.numel(), dt, src)
            if c.data_ptr() != t.data_ptr():
                t.copy_(c)

        return self._submit(run, tensors)

    def recv_anysource(self, tensors, tag=0):
        self._log_once(f"recv from any source: falls back to {self._fallback_name}: Coll "
                       "matches by peer")
        return self._submit(self._gloo(lambda: self._fallback.recv_anysource(tensors, tag)),
                            tensors)

    def _join(self, works, result):
        joined = _Work(result)

        def wait_all():
            error = None
            for w in works:
                w._event.wait()
                error = error or w._error
            joined._finish(error)

        threading.Thread(target=wait_all, daemon=True).start()
        return joined

    def shutdown(self):
        # The backend underneath goes too, once the worker has run its calls:
        # no thread of it is then at work when the interpreter ends.
        self._shut_down = True
        self._queue.put(None)
        self._worker.join()
        self._comm.destroy()
        self._fallback = None

    def abort(self):
        self._comm.abort()

    def __del__(self):
        try:
            self._queue.put(None)
        except Exception:
            pass


def _make_comm(store, rank, size):
    """The group's Coll communicator, from rank 0's unique id in `store`."""
    key = "coll/unique_id"
    if rank == 0:
        store.set(key, coll.get_unique_id())
    uid = bytes(store.get(key))
    watchdog = os.environ.get("COLL_WATCHDOG_MS")
    return coll.Comm(size, uid, rank, libraries="gloo,torch",
                     watchdog_ms=int(watchdog) if watchdog else None)


def _make_fallback(store, rank, size, timeout, fallback=None):
    """(name, backend): what runs the calls Coll does not serve."""
    name = (fallback or os.environ.get("COLL_TORCH_FALLBACK") or "gloo").lower()
    if name != "gloo":
        raise ValueError(f"coll.torch: fallback backend '{name}' is not supported here "
                         "(gloo is the CPU backend torch ships)")
    return name, dist.ProcessGroupGloo(dist.PrefixStore("coll-fallback/", store), rank, size,
                                       timeout)


def create_backend(store, rank, size, timeout):
    """The creator torch calls for backend "coll": the C++ backend where
    coll._c10d loads, else the Python one."""
    if _cpp is None:
        # Asked for, it is news only at INFO; else every call costs more
        # than it should, which a user must hear of (docs/PYTORCH.md).
        forced = os.environ.get("COLL_TORCH_BACKEND", "").strip().lower() == "python"
        _say("INFO" if forced else "WARN", rank,
             f"backend: Python (coll.torch.CollProcessGroup): {_cpp_why}")
        return CollProcessGroup(store, rank, size, timeout)
    name, fallback = _make_fallback(store, rank, size, timeout)
    comm = _make_comm(store, rank, size)
    _say("INFO", rank, f"backend: C++ ({_cpp.__file__})")
    return _cpp.create(comm.detach(), rank, size, fallback, name)


# CUDA tensors too: Coll's GPU backend where libcoll has one, else gloo
# (each call says which, at COLL_DEBUG=INFO).
dist.Backend.register_backend("coll", create_backend, devices=["cpu", "cuda"])
