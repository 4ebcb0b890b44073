"""What `import coll.torch` says where its backend cannot serve: each case
raises ImportError naming the cause and the remedy, and none crashes.

    python torch_install_check.py SOURCE LIBCOLL BUILT

SOURCE is runtime/python (the package coll), LIBCOLL the build's
libcoll.so, beside which the build put coll._c10d when BUILT is 1. Each
case imports coll.torch in a Python of its own, from SOURCE, with
COLL_LIBRARY at a copy of LIBCOLL in a folder the case fills:

- no torch (None in sys.modules): coll.torch needs PyTorch;
- nothing beside the library: coll was built without its backend (torch
  installed after coll);
- only a module of another Python's name: built for another Python;

and with the build's module (BUILT 1):

- the module beside the library: it loads (the layout the next cases
  change is one that works);
- the module with another torch version in its mark (torch upgraded after
  coll was built): not loaded, both versions named;
- a file with the right mark that is not a module: it does not load.

Prints "ok N checks"; exits 1 on the first failure.
"""

import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile

import torch

source, libcoll, built = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
ext = sysconfig.get_config_var("EXT_SUFFIX")
mark = b"coll._c10d built against torch "
remedy = f"'{sys.executable} -m pip install --no-deps --force-reinstall .'"
checks = 0


def run(folder, prelude=""):
    """`import coll.torch` on the library of `folder`: (exit status, stderr)."""
    env = dict(os.environ, PYTHONPATH=source, COLL_LIBRARY=os.path.join(folder, "libcoll.so"))
    env.pop("COLL_TORCH_INSTALLED", None)
    p = subprocess.run([sys.executable, "-c", prelude + "import coll.torch"], env=env,
                       capture_output=True, text=True, timeout=300)
    return p.returncode, p.stderr


def fail(what, rc, err):
    print(f"FAIL {what}: exit {rc}\n{err}", flush=True)
    sys.exit(1)


def expect_error(what, folder, wants, prelude=""):
    """The import fails with an ImportError whose message has each of `wants`."""
    global checks
    checks += 1
    rc, err = run(folder, prelude)
    last = err.strip().splitlines()[-1] if err.strip() else ""
    if rc != 1 or not last.startswith("ImportError: coll.torch"):
        fail(f"{what}: not an ImportError of coll.torch's", rc, err)
    for want in wants + [remedy, "docs/PYTORCH.md"]:
        if want not in last:
            fail(f"{what}: the message lacks '{want}'", rc, err)
    print(f"{what}: {last}", flush=True)


def case(name):
    """A fresh folder holding a copy of the library."""
    folder = os.path.join(tmp, name)
    os.mkdir(folder)
    shutil.copy(os.path.realpath(libcoll), os.path.join(folder, "libcoll.so"))
    return folder


with tempfile.TemporaryDirectory() as tmp:
    empty = case("empty")
    expect_error("no torch", empty, ["coll.torch needs PyTorch", "-m pip install torch"],
                 prelude="import sys; sys.modules['torch'] = None; ")
    expect_error("no module", empty, ["is not built for", "coll was built without it"])
    other = case("other-python")
    other_name = "_c10d.cpython-00-other.so"
    open(os.path.join(other, other_name), "wb").close()
    expect_error("another Python's module", other, ["built for another Python", other_name])

    if built:
        module = os.path.join(os.path.dirname(os.path.realpath(libcoll)), "_c10d" + ext)
        with open(module, "rb") as f:
            data = f.read()
        at = data.find(mark)
        if at < 0:
            fail(f"{module} carries no mark '{mark.decode()}'", 1, "")
        start = at + len(mark)
        version = data[start:data.index(b"\0", start)]
        if version.decode() != str(torch.__version__):
            fail(f"{module} is marked torch {version.decode()}, not {torch.__version__}", 1, "")

        good = case("module")
        shutil.copy(module, os.path.join(good, "_c10d" + ext))
        checks += 1
        rc, err = run(good)
        if rc != 0:
            fail("the build's module beside the library does not import", rc, err)

        # The same length, the first character changed: another torch.
        another = (b"1" if version[:1] != b"1" else b"2") + version[1:]
        upgraded = case("another-torch")
        with open(os.path.join(upgraded, "_c10d" + ext), "wb") as f:
            f.write(data[:start] + another + data[start + len(version):])
        expect_error("another torch", upgraded,
                     [f"built against torch {another.decode()}", f"has torch {torch.__version__}",
                      "no stable ABI"])

        broken = case("not-a-module")
        with open(os.path.join(broken, "_c10d" + ext), "wb") as f:
            f.write(b"not an ELF file\n" + mark + version + b"\0")
        expect_error("not a module", broken, ["does not load"])

print(f"ok {checks} checks", flush=True)
