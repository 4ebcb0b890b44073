"""The command-line tools of a `pip install .`: each console script (collc,
collrun, ...; pyproject.toml) runs the program of that name that the install
put in coll/bin, with the same arguments. There, the tools find what they
look for beside themselves as in a CMake install (the CUDA plugin in
coll/lib)."""

import os
import sys

_BIN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin")


def _run(name):
    path = os.path.join(_BIN, name)
    if not os.access(path, os.X_OK):
        sys.exit(f"{name}: not in this install of coll ({path}); collc, collsynth, collcost "
                 "and colltune are built only with the language front end (COLL_ENABLE_LANG)")
    os.execv(path, [path] + sys.argv[1:])


def collc():
    _run("collc")


def collir():
    _run("collir")


def collrun():
    _run("collrun")


def collbench():
    _run("collbench")


def collplot():
    _run("collplot")


def collsynth():
    _run("collsynth")


def collcost():
    _run("collcost")


def colltune():
    _run("colltune")
