"""Coll as a torch.distributed backend: ``import coll.torch``, then
``dist.init_process_group(backend="coll")``.

The backend is a C++ ``c10d::Backend``, the module ``coll._c10d``
(runtime/python/backend), which `pip install .` builds against the torch it
finds: a call goes from torch to libcoll.so's C API with no Python in
between. This file loads that module, registers the backend, and makes each
group's communicator and fallback, which it hands to ``coll._c10d.create``.
Each process group owns:

- a Coll communicator, made from rank 0's unique id, which travels through
  the group's c10d store;
- a second torch backend underneath (``gloo``) for what Coll does not
  serve: an unsupported dtype, op or device, unequal all-to-all splits, a
  call no algorithm applies to, or a size range a tuning rule sends to
  ``gloo``/``torch``.

At ``COLL_DEBUG=INFO`` rank 0 prints the selection table when the group is
made (libcoll does), and every process says once per (collective, reason)
where a call went and why (docs/PYTORCH.md).

The module is tied to the torch it was built against (torch's C++ API has
no stable ABI). Where it cannot serve — this Python has no torch, coll was
built where torch was not installed, or against another torch — importing
this module raises ImportError naming the cause and the remedy, before
anything of the module is loaded.
"""

import glob
import importlib.util
import mmap
import os
import socket
import sys
import sysconfig
import threading

def _remedy():
    """How to build coll._c10d against this Python's torch."""
    return (f"reinstall coll from its source tree, so that its backend is built against this "
            f"environment's torch: '{sys.executable} -m pip install --no-deps --force-reinstall .' "
            f"(a CMake build: configure it with -DCOLL_TORCH_PYTHON={sys.executable} and build "
            f"the target coll_torch_backend; docs/PYTORCH.md, \"Install\")")


try:
    import torch
    import torch.distributed as dist
except ImportError as e:
    raise ImportError(f"coll.torch needs PyTorch, which {sys.executable} does not import ({e}): "
                      f"install torch first ('{sys.executable} -m pip install torch'), then "
                      f"{_remedy()}") from e

import coll

__all__ = ["create_backend"]

# What the module carries, NUL-terminated, ahead of the torch version it is
# built against (COLL_TORCH_VERSION, runtime/python/backend/ProcessGroupColl.cpp).
_BUILT_AGAINST = b"coll._c10d built against torch "


def _module_path():
    """The file of coll._c10d for this Python, or None."""
    spec = importlib.util.find_spec("coll._c10d")
    if spec is not None and spec.origin:
        return spec.origin  # pip install and CMake install: coll/_c10d*.so
    # The build tree: build/lib/_c10d*.so beside the libcoll.so coll loaded.
    here = os.path.dirname(os.path.realpath(coll.library_path))
    path = os.path.join(here, "_c10d" + sysconfig.get_config_var("EXT_SUFFIX"))
    if os.path.sep in coll.library_path and os.path.exists(path):
        return path
    return None


def _built_against(path):
    """The torch version the module at `path` is built against, or None
    where the file says none."""
    try:
        with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
            at = data.find(_BUILT_AGAINST)
            if at < 0:
                return None
            start = at + len(_BUILT_AGAINST)
            end = data.find(b"\0", start)
            return data[start:end if end >= 0 else start + 64].decode("ascii", "replace")
    except (OSError, ValueError):  # unreadable, or empty (mmap refuses it)
        return None


def _load():
    """coll._c10d, loaded; ImportError with the cause and the remedy where it
    cannot be."""
    path = _module_path()
    if path is None:
        folders = {os.path.dirname(os.path.abspath(coll.__file__)),
                   os.path.dirname(os.path.realpath(coll.library_path))}
        others = sorted(p for d in folders for p in glob.glob(os.path.join(d, "_c10d.*.so")))
        cause = (f"it is built for another Python ({', '.join(others)})" if others else
                 "coll was built without it (where torch was not installed, or with "
                 "-DCOLL_TORCH_BACKEND=OFF)")
        raise ImportError(f"coll.torch: its backend, the module coll._c10d, is not built for "
                          f"{sys.executable}: {cause}; {_remedy()}")
    built = _built_against(path)
    if built != str(torch.__version__):
        raise ImportError(f"coll.torch: its backend {path} is built against torch "
                          f"{built or '(not said)'}, and {sys.executable} has torch "
                          f"{torch.__version__}: torch's C++ API has no stable ABI, so it is "
                          f"not loaded; {_remedy()}")
    try:
        spec = importlib.util.spec_from_file_location("coll._c10d", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    except ImportError as e:
        raise ImportError(f"coll.torch: its backend {path} does not load ({e}); "
                          f"{_remedy()}") from e
    return module


_c10d = _load()


def _info(rank, message):
    """One line in libcoll's format, at COLL_DEBUG=INFO or above."""
    level = os.environ.get("COLL_DEBUG", "WARN").strip().upper()
    if level in ("INFO", "TRACE"):
        print(f"{socket.gethostname()}:{os.getpid()}:{threading.get_native_id()} "
              f"[{rank}] COLL INFO torch {message}", file=sys.stderr, flush=True)


def _make_comm(store, rank, size):
    """The group's Coll communicator, from rank 0's unique id in `store`."""
    key = "coll/unique_id"
    if rank == 0:
        store.set(key, coll.get_unique_id())
    uid = bytes(store.get(key))
    watchdog = os.environ.get("COLL_WATCHDOG_MS")
    return coll.Comm(size, uid, rank, libraries="gloo,torch",
                     watchdog_ms=int(watchdog) if watchdog else None)


def _make_fallback(store, rank, size, timeout):
    """(name, backend): what runs the calls Coll does not serve."""
    name = (os.environ.get("COLL_TORCH_FALLBACK") or "gloo").lower()
    if name != "gloo":
        raise ValueError(f"coll.torch: fallback backend '{name}' is not supported here "
                         "(gloo is the CPU backend torch ships)")
    return name, dist.ProcessGroupGloo(dist.PrefixStore("coll-fallback/", store), rank, size,
                                       timeout)


def create_backend(store, rank, size, timeout):
    """The creator torch calls for backend "coll"."""
    name, fallback = _make_fallback(store, rank, size, timeout)
    comm = _make_comm(store, rank, size)
    _info(rank, f"backend: coll._c10d from {_c10d.__file__}")
    return _c10d.create(comm.detach(), rank, size, fallback, name, timeout)


# CUDA tensors too: Coll's GPU backend where libcoll has one, else gloo
# (each call says which, at COLL_DEBUG=INFO).
dist.Backend.register_backend("coll", create_backend, devices=["cpu", "cuda"])


def _patch_shrunk_group():
    """dist.shrink_group registers the shrunk backend as torch's own (GLOO on
    the CPU, NCCL on CUDA: PyTorch 2.15's _create_shrunk_process_group), which
    DDP's logger then casts to ProcessGroupGloo, a crash for any other
    backend. A "coll" group is registered as every "coll" group is: a CUSTOM
    backend on the CPU and CUDA, as new_group registers it (docs/PYTORCH.md,
    "Lost ranks"). Other backends' shrinks go to torch's function."""
    import torch.distributed.distributed_c10d as c10d

    original = getattr(c10d, "_create_shrunk_process_group", None)
    if original is None or getattr(original, "_coll", False):
        return

    def create(new_backend, remaining_ranks, metadata, is_default_group):
        if new_backend.name() != "coll":
            return original(new_backend, remaining_ranks, metadata, is_default_group)
        group_name = metadata["new_group_name"]
        group_desc = ("default:shrunken" if is_default_group
                      else f"{metadata['original_group_name']}:shrunk")
        try:
            store = metadata["store"].clone()
        except Exception:  # the store died with the rank that served it
            store = dist.HashStore()
        pg = dist.ProcessGroup(dist.PrefixStore(f"{group_name}/", store), new_backend.rank(),
                               new_backend.size())
        custom = dist.ProcessGroup.BackendType.CUSTOM
        for device in ("cpu", "cuda"):
            pg._register_backend(torch.device(device), custom, new_backend)
        pg._set_default_backend(custom)
        if metadata.get("bound_device_id") is not None:
            pg.bound_device_id = metadata["bound_device_id"]
        pg._set_group_name(group_name)
        pg._set_group_desc(group_desc)
        if metadata.get("backend_config") is not None:
            c10d._world.pg_backend_config[pg] = metadata["backend_config"]
        return pg

    create._coll = True
    c10d._create_shrunk_process_group = create


_patch_shrunk_group()
