"""Coll from Python: the C API of libcoll.so (coll.h) through ctypes.

    import coll
    uid = coll.get_unique_id()            # on rank 0; send uid (bytes) to the others
    comm = coll.Comm(nranks, uid, rank)
    comm.all_reduce(send_ptr, recv_ptr, count, coll.FLOAT32, coll.SUM)

Pointers are integers (``tensor.data_ptr()``, ``ndarray.ctypes.data``). Calls
release the GIL while they communicate (ctypes.CDLL does). Errors raise
``coll.CollError`` with the library's message. ``coll.torch`` is the
PyTorch backend built on this module (docs/PYTORCH.md).

The library is found, in order, at $COLL_LIBRARY, inside this package when
`pip install .` installed it (coll/lib/libcoll.so), beside this package in a
CMake install (PREFIX/lib/libcoll.so for PREFIX/lib/python/coll), in the
build tree this file belongs to (build/lib/libcoll.so), then by the loader's
search path.
"""

import ctypes
import os

__all__ = [
    "CollError", "Comm", "get_unique_id", "version", "library_path", "group_start", "group_end",
    "INT8", "UINT8", "INT32", "UINT32", "INT64", "UINT64", "FLOAT16", "FLOAT32", "FLOAT64",
    "BFLOAT16", "SUM", "PROD", "MAX", "MIN", "AVG",
]

# coll.h's enumerations (NCCL's numbering).
INT8, UINT8, INT32, UINT32, INT64, UINT64, FLOAT16, FLOAT32, FLOAT64, BFLOAT16 = range(10)
SUM, PROD, MAX, MIN, AVG = range(5)
RESULT_NAMES = ["success", "unhandled cuda error", "system error", "internal error",
                "invalid argument", "invalid usage", "remote error", "in progress", "timeout"]
UNIQUE_ID_BYTES = 128


class CollError(RuntimeError):
    """A Coll call failed; ``code`` is its collResult_t."""

    def __init__(self, code, message):
        super().__init__(message)
        self.code = code


class _UniqueId(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_char * UNIQUE_ID_BYTES)]


_UNDEF_INT = -2147483648


class _Config(ctypes.Structure):
    """collConfig_t (coll.h)."""
    _fields_ = [("size", ctypes.c_size_t), ("magic", ctypes.c_uint), ("version", ctypes.c_uint),
                ("watchdogMs", ctypes.c_int), ("algoDir", ctypes.c_char_p),
                ("algoFiles", ctypes.c_char_p), ("tuningFile", ctypes.c_char_p),
                ("debugLevel", ctypes.c_int), ("embeddedAlgorithms", ctypes.c_int),
                ("hostThreads", ctypes.c_int), ("libraries", ctypes.c_char_p),
                ("emulatedDevice", ctypes.c_int)]


def _candidates():
    env = os.environ.get("COLL_LIBRARY")
    if env:
        yield env
    here = os.path.dirname(os.path.abspath(__file__))
    # pip install: site-packages/coll/lib/libcoll.so (pyproject.toml)
    yield os.path.join(here, "lib", "libcoll.so")
    # PREFIX/lib/python/coll/__init__.py -> PREFIX/lib/libcoll.so
    yield os.path.join(here, "..", "..", "libcoll.so")
    # source tree: runtime/python/coll -> build/lib/libcoll.so
    yield os.path.join(here, "..", "..", "..", "build", "lib", "libcoll.so")
    yield "libcoll.so"


def _load():
    errors = []
    for path in _candidates():
        if os.path.sep in path and not os.path.exists(path):
            continue
        try:
            return ctypes.CDLL(path), path
        except OSError as e:  # pragma: no cover - reported below
            errors.append(f"{path}: {e}")
    raise ImportError("coll: cannot load libcoll.so; set COLL_LIBRARY to its path ("
                      + "; ".join(errors or ["not found"]) + ")")


_lib, library_path = _load()
_comm_t = ctypes.c_void_p
_lib.collGetErrorString.restype = ctypes.c_char_p
_lib.collGetErrorString.argtypes = [ctypes.c_int]
_lib.collGetLastError.restype = ctypes.c_char_p
_lib.collGetLastError.argtypes = [_comm_t]
_lib.collGetUniqueId.argtypes = [ctypes.POINTER(_UniqueId)]
_lib.collGetVersion.argtypes = [ctypes.POINTER(ctypes.c_int)]
_lib.collCommInitRank.argtypes = [ctypes.POINTER(_comm_t), ctypes.c_int, _UniqueId, ctypes.c_int]
_lib.collCommInitRankConfig.argtypes = [ctypes.POINTER(_comm_t), ctypes.c_int, _UniqueId,
                                        ctypes.c_int, ctypes.POINTER(_Config)]
_lib.collCommQueryChoice.argtypes = [_comm_t, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_int,
                                     ctypes.c_char_p, ctypes.c_size_t]
_lib.collGroupStart.argtypes = []
_lib.collGroupEnd.argtypes = []
for _name in ("collCommFinalize", "collCommDestroy", "collCommAbort"):
    getattr(_lib, _name).argtypes = [_comm_t]
_lib.collCommGetAsyncError.argtypes = [_comm_t, ctypes.POINTER(ctypes.c_int)]
_lib.collCommCount.argtypes = [_comm_t, ctypes.POINTER(ctypes.c_int)]
_lib.collCommUserRank.argtypes = [_comm_t, ctypes.POINTER(ctypes.c_int)]
_P, _S, _I = ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int
_lib.collAllReduce.argtypes = [_P, _P, _S, _I, _I, _comm_t, _P]
_lib.collAllGather.argtypes = [_P, _P, _S, _I, _comm_t, _P]
_lib.collReduceScatter.argtypes = [_P, _P, _S, _I, _I, _comm_t, _P]
_lib.collAlltoAll.argtypes = [_P, _P, _S, _I, _comm_t, _P]
_lib.collBroadcast.argtypes = [_P, _P, _S, _I, _I, _comm_t, _P]
_lib.collReduce.argtypes = [_P, _P, _S, _I, _I, _I, _comm_t, _P]
_lib.collGather.argtypes = [_P, _P, _S, _I, _I, _comm_t, _P]
_lib.collScatter.argtypes = [_P, _P, _S, _I, _I, _comm_t, _P]
_lib.collSend.argtypes = [_P, _S, _I, _I, _comm_t, _P]
_lib.collRecv.argtypes = [_P, _S, _I, _I, _comm_t, _P]
_lib.collDeviceBuffersSupported.argtypes = [ctypes.POINTER(ctypes.c_int), ctypes.c_char_p,
                                            ctypes.c_size_t]


def _check(code, comm=None):
    if code != 0:
        message = _lib.collGetLastError(comm).decode(errors="replace")
        name = RESULT_NAMES[code] if 0 <= code < len(RESULT_NAMES) else f"result {code}"
        raise CollError(code, f"Coll {name}: {message}")


def group_start():
    _check(_lib.collGroupStart())


def group_end():
    _check(_lib.collGroupEnd())


def version():
    v = ctypes.c_int()
    _check(_lib.collGetVersion(ctypes.byref(v)))
    return v.value


_device_support = None


def device_buffers_supported():
    """(True, "") when calls on CUDA device memory can run here (Coll's GPU
    backend, libcoll_cuda.so, loads), else (False, why). Asked once."""
    global _device_support
    if _device_support is None:
        ok, why = ctypes.c_int(), ctypes.create_string_buffer(1024)
        _check(_lib.collDeviceBuffersSupported(ctypes.byref(ok), why, 1024))
        _device_support = (bool(ok.value), why.value.decode(errors="replace"))
    return _device_support


def get_unique_id():
    """Starts rank 0's listener in this process; returns the 128-byte id."""
    uid = _UniqueId()
    _check(_lib.collGetUniqueId(ctypes.byref(uid)))
    return ctypes.string_at(ctypes.addressof(uid), UNIQUE_ID_BYTES)


class Comm:
    """One rank of a communicator (collCommInitRank). Every method is the
    coll.h call of the same name; pointers are integers. `stream` is a
    cudaStream_t as an integer, for device buffers (0: the legacy default
    stream); host buffers take 0."""

    def __init__(self, nranks, unique_id, rank, libraries=None, watchdog_ms=None):
        """`libraries`: names underneath Coll that tuning rules may send
        calls to ("gloo,torch"); the caller runs those (query_choice)."""
        if len(unique_id) != UNIQUE_ID_BYTES:
            raise ValueError(f"a unique id has {UNIQUE_ID_BYTES} bytes, not {len(unique_id)}")
        uid = _UniqueId()
        ctypes.memmove(ctypes.addressof(uid), unique_id, UNIQUE_ID_BYTES)
        config = _Config(ctypes.sizeof(_Config), 0xc011c0f1, version(), _UNDEF_INT, None, None,
                         None, _UNDEF_INT, _UNDEF_INT, _UNDEF_INT,
                         libraries.encode() if libraries else None, _UNDEF_INT)
        if watchdog_ms is not None:
            config.watchdogMs = int(watchdog_ms)
        handle = _comm_t()
        _check(_lib.collCommInitRankConfig(ctypes.byref(handle), nranks, uid, rank,
                                           ctypes.byref(config)))
        self._h = handle
        self.rank, self.size = rank, nranks

    def _c(self, code):
        _check(code, self._h)

    def all_reduce(self, send, recv, count, dtype, op, stream=0):
        self._c(_lib.collAllReduce(send, recv, count, dtype, op, self._h, stream or None))

    def all_gather(self, send, recv, count, dtype, stream=0):
        self._c(_lib.collAllGather(send, recv, count, dtype, self._h, stream or None))

    def reduce_scatter(self, send, recv, count, dtype, op, stream=0):
        self._c(_lib.collReduceScatter(send, recv, count, dtype, op, self._h, stream or None))

    def all_to_all(self, send, recv, count, dtype, stream=0):
        self._c(_lib.collAlltoAll(send, recv, count, dtype, self._h, stream or None))

    def broadcast(self, send, recv, count, dtype, root, stream=0):
        self._c(_lib.collBroadcast(send, recv, count, dtype, root, self._h, stream or None))

    def reduce(self, send, recv, count, dtype, op, root, stream=0):
        self._c(_lib.collReduce(send, recv, count, dtype, op, root, self._h, stream or None))

    def gather(self, send, recv, count, dtype, root, stream=0):
        self._c(_lib.collGather(send, recv, count, dtype, root, self._h, stream or None))

    def scatter(self, send, recv, count, dtype, root, stream=0):
        self._c(_lib.collScatter(send, recv, count, dtype, root, self._h, stream or None))

    def send(self, buf, count, dtype, peer, stream=0):
        self._c(_lib.collSend(buf, count, dtype, peer, self._h, stream or None))

    def recv(self, buf, count, dtype, peer, stream=0):
        self._c(_lib.collRecv(buf, count, dtype, peer, self._h, stream or None))

    def query_choice(self, collective, nbytes, root=0):
        """(name, reason): the algorithm, or "library:NAME", that would serve
        the call; raises CollError when nothing applies."""
        buf = ctypes.create_string_buffer(1024)
        self._c(_lib.collCommQueryChoice(self._h, collective.encode(), nbytes, root, buf, 1024))
        name, _, why = buf.value.decode(errors="replace").partition(" -- ")
        return name, why

    def async_error(self):
        err = ctypes.c_int()
        self._c(_lib.collCommGetAsyncError(self._h, ctypes.byref(err)))
        return err.value

    def detach(self):
        """Hands the communicator over (coll.torch's C++ backend takes it):
        returns its collComm_t as an integer; this object no longer has one."""
        h, self._h = self._h.value or 0, _comm_t()
        return h

    def abort(self):
        if self._h:
            _lib.collCommAbort(self._h)
            self._h = _comm_t()

    def destroy(self):
        if self._h:
            _lib.collCommDestroy(self._h)
            self._h = _comm_t()

    def finalize(self):
        if self._h:
            self._c(_lib.collCommFinalize(self._h))
